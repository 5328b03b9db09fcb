"""The book's drawings, tables and JupyterLab steppers, one module per chapter's pictures.

* :mod:`kvcourse.viz.style`: the one palette, font size and drawing pieces every figure shares;
* §2, virtual memory: :mod:`kvcourse.viz.address_translation` (one address translated),
  :mod:`kvcourse.viz.os_paging` (page tables and the frames they point at);
* §3, where the memory went: :mod:`kvcourse.viz.arena` (a contiguous arena and its kinds of
  waste), :mod:`kvcourse.viz.buddy` (the buddy walk-through), :mod:`kvcourse.viz.memory` (a
  serving run's memory: breakdown bars, timelines, rate sweeps);
* §4, PagedAttention: :mod:`kvcourse.viz.block_table_frames` (a block table recorded step by
  step), :mod:`kvcourse.viz.block_tables` (those frames drawn, as small multiples or an
  animation), :mod:`kvcourse.viz.block_size` (waste against block size),
  :mod:`kvcourse.viz.overview` (the scheduler and its GPU workers),
  :mod:`kvcourse.viz.kernel_results` (the kernel's recorded GPU measurements);
* §5, sharing: :mod:`kvcourse.viz.sharing_frames` (shared block tables recorded from a block
  manager), :mod:`kvcourse.viz.sharing` (those frames drawn, with copy-on-write),
  :mod:`kvcourse.viz.beams` (beam-search fork trees and what sharing saves);
* §6, scheduling and preemption: :mod:`kvcourse.viz.preemption_frames` (the scheduler's pool
  and queue recorded one iteration at a time), :mod:`kvcourse.viz.preemption` (those frames
  drawn with the victims marked; swap against recompute by block size);
* §7, end to end: :mod:`kvcourse.viz.latency` (latency against request rate, the highest
  sustainable rate and its ratios);
* §8, prefix caching: :mod:`kvcourse.viz.prefix_cache` (chained hashes, hit rate against
  capacity);
* Reading vLLM v1: :mod:`kvcourse.viz.metrics_dashboard` (vLLM's metrics of simulated runs as
  a dashboard);
* Beyond block prefixes: :mod:`kvcourse.viz.radix_tree` (a radix tree of cached tokens step by
  step; hit rate against capacity, block-aligned against radix);
* §9, Mooncake: :mod:`kvcourse.viz.mooncake_architecture` (the architecture, drawn from the
  pieces of :mod:`kvcourse.viz.mooncake_pieces`),
  :mod:`kvcourse.viz.mooncake_timelines` (layer-wise prefill and chunked pipeline timelines),
  :mod:`kvcourse.viz.conductor` (the Conductor's placements compared),
  :mod:`kvcourse.viz.overload` (rejection rules and the two pools' loads);
* §10, other ways to make KV cheaper: :mod:`kvcourse.viz.kv_formats` (memory of a sink + window
  rule against length, and the blocks it keeps), :mod:`kvcourse.viz.token_eviction` (attention
  maps of the trained and the random tiny model; H2O and sinks + window against the budget);
* :mod:`kvcourse.viz.widgets`: JupyterLab steppers; :mod:`kvcourse.viz.tables`: computed tables
  for the pages (§7's latency against rate among them); :mod:`kvcourse.viz.prose`: the words a
  page glues into its prose (``1, 4 and 7``, ``65 or 66``, ``2 to 8``), in English and in
  Chinese for the Chinese edition;
* every figure on a phone: :mod:`kvcourse.viz.phone` (a figure's phone rendering: plots
  restacked by themselves, diagrams drawn with ``phone=True``), :mod:`kvcourse.viz.figure_pair`
  (the desktop and phone renderings shown as one picture, ``book_figure``).

Book pages, notebooks and tests import from here; the names below are the public ones.
"""

from __future__ import annotations

from kvcourse.viz.address_translation import draw_translation
from kvcourse.viz.arena import (
    ArenaArtists,
    ArenaRun,
    arena_kinds,
    draw_arena,
)
from kvcourse.viz.beams import (
    BeamEdge,
    beam_edges,
    beam_search_figure,
    draw_beam_tree,
)
from kvcourse.viz.block_size import (
    block_size_waste,
    block_size_waste_plot,
)
from kvcourse.viz.block_table_frames import (
    FOUR_SCORE_OUTPUT,
    FOUR_SCORE_PROMPT,
    FOUR_SCORE_TAKEN,
    BlockTableFrame,
    PoolState,
    block_table_frames,
    four_score_frames,
)
from kvcourse.viz.block_tables import (
    BlockTableArtists,
    block_table_animation,
    block_table_frames_figure,
    block_table_legend_handles,
    draw_block_table,
    draw_block_table_frame,
)
from kvcourse.viz.buddy import (
    WalkthroughArtists,
    draw_buddy_walkthrough,
)
from kvcourse.viz.conductor import placement_comparison_figure, ttft_load_plot
from kvcourse.viz.figure_pair import BookFigure, book_figure
from kvcourse.viz.kernel_results import (
    KernelRun,
    gpu_kernel_runs,
    kernel_run_rows,
    latest_gpu_kernel_run,
)
from kvcourse.viz.kv_formats import window_blocks_figure, window_memory_plot
from kvcourse.viz.latency import (
    LatencyCurve,
    batch_rate_plot,
    latency_curves,
    latency_rate_plot,
    sustainable_ratio_plot,
)
from kvcourse.viz.memory import (
    memory_breakdown_bars,
    memory_timeline_plot,
    rate_sweep_plot,
    ratio_sweep_plot,
)
from kvcourse.viz.metrics_dashboard import metrics_dashboard
from kvcourse.viz.mooncake_architecture import mooncake_architecture_figure
from kvcourse.viz.mooncake_timelines import (
    LANE_COLORS,
    LANE_LABELS,
    layerwise_gantt,
    pipeline_schedule_figure,
)
from kvcourse.viz.os_paging import (
    PageTableArtists,
    draw_page_tables,
    page_table_legend_handles,
)
from kvcourse.viz.overload import REJECTION_RULE_COLORS, pd_load_figure, rejection_bars
from kvcourse.viz.overview import (
    draw_system_overview,
)
from kvcourse.viz.phone import (
    PHONE_MIN_FONT_PT,
    PHONE_WIDTH_IN,
    fit_height,
    phone_figure,
    phone_layout,
)
from kvcourse.viz.preemption import (
    PreemptionArtists,
    draw_preemption_frame,
    preemption_frames_figure,
    preemption_legend_handles,
    swap_vs_recompute_plot,
)
from kvcourse.viz.preemption_frames import (
    PREEMPTION_DEMO,
    PreemptionFrame,
    RequestState,
    frame_note,
    preemption_frames,
)
from kvcourse.viz.prefix_cache import chained_hash_figure, hit_rate_plot
from kvcourse.viz.prose import LANGUAGES, either, listed, ordinal, span, yes_no
from kvcourse.viz.radix_tree import DESIGN_STYLES, radix_hit_rate_plot, radix_tree_figure
from kvcourse.viz.sharing import (
    SharingArtists,
    draw_sharing_frame,
    sharing_frames_figure,
    sharing_legend_handles,
)
from kvcourse.viz.sharing_frames import (
    FORK_SAMPLE_WORDS,
    SYSTEM_PROMPT,
    SYSTEM_QUESTIONS,
    SequenceSnapshot,
    SharingFrame,
    fork_cow_frames,
    shared_prefix_frame,
    sharing_frame,
)
from kvcourse.viz.style import (
    KIND_COLORS,
    KIND_LABELS,
    OWNER_COLORS,
    SCHEME_COLORS,
    kind_legend_handles,
)
from kvcourse.viz.tables import (
    html_table,
    latency_table,
    markdown_table,
)
from kvcourse.viz.token_eviction import attention_map_figure, eviction_plot
from kvcourse.viz.widgets import (
    BlockTableStepper,
    block_table_stepper,
    render_frame_png,
)

__all__ = [
    "attention_map_figure",
    "eviction_plot",
    "LANE_COLORS",
    "metrics_dashboard",
    "LANE_LABELS",
    "REJECTION_RULE_COLORS",
    "pd_load_figure",
    "rejection_bars",
    "layerwise_gantt",
    "mooncake_architecture_figure",
    "pipeline_schedule_figure",
    "placement_comparison_figure",
    "ttft_load_plot",
    "chained_hash_figure",
    "hit_rate_plot",
    "DESIGN_STYLES",
    "radix_hit_rate_plot",
    "radix_tree_figure",
    # §2
    "PageTableArtists",
    "draw_page_tables",
    "draw_translation",
    "page_table_legend_handles",
    # §3
    "KIND_COLORS",
    "KIND_LABELS",
    "OWNER_COLORS",
    "SCHEME_COLORS",
    "ArenaArtists",
    "ArenaRun",
    "WalkthroughArtists",
    "arena_kinds",
    "draw_arena",
    "draw_buddy_walkthrough",
    "kind_legend_handles",
    "memory_breakdown_bars",
    "memory_timeline_plot",
    "rate_sweep_plot",
    "ratio_sweep_plot",
    # §4
    "FOUR_SCORE_OUTPUT",
    "FOUR_SCORE_PROMPT",
    "FOUR_SCORE_TAKEN",
    "BlockTableArtists",
    "BlockTableFrame",
    "PoolState",
    "block_size_waste",
    "block_size_waste_plot",
    "block_table_animation",
    "block_table_frames",
    "block_table_frames_figure",
    "block_table_legend_handles",
    "draw_block_table",
    "draw_block_table_frame",
    "draw_system_overview",
    "four_score_frames",
    # §5
    "FORK_SAMPLE_WORDS",
    "SYSTEM_PROMPT",
    "SYSTEM_QUESTIONS",
    "BeamEdge",
    "SequenceSnapshot",
    "SharingArtists",
    "SharingFrame",
    "beam_edges",
    "beam_search_figure",
    "draw_beam_tree",
    "draw_sharing_frame",
    "fork_cow_frames",
    "shared_prefix_frame",
    "sharing_frame",
    "sharing_frames_figure",
    "sharing_legend_handles",
    # §6
    "PREEMPTION_DEMO",
    "PreemptionArtists",
    "PreemptionFrame",
    "RequestState",
    "draw_preemption_frame",
    "frame_note",
    "preemption_frames",
    "preemption_frames_figure",
    "preemption_legend_handles",
    "swap_vs_recompute_plot",
    # §7
    "LatencyCurve",
    "batch_rate_plot",
    "latency_curves",
    "latency_rate_plot",
    "sustainable_ratio_plot",
    # steppers and tables
    "BlockTableStepper",
    "block_table_stepper",
    "render_frame_png",
    "html_table",
    "latency_table",
    "markdown_table",
    # the words glued into the prose, in English and Chinese
    "LANGUAGES",
    "either",
    "listed",
    "ordinal",
    "span",
    "yes_no",
    # §4's GPU measurements
    "KernelRun",
    "gpu_kernel_runs",
    "kernel_run_rows",
    "latest_gpu_kernel_run",
    "window_blocks_figure",
    "window_memory_plot",
    # every figure on a phone
    "PHONE_MIN_FONT_PT",
    "PHONE_WIDTH_IN",
    "BookFigure",
    "book_figure",
    "fit_height",
    "phone_figure",
    "phone_layout",
]
