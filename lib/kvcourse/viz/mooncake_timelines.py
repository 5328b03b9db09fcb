"""The timing drawings of §9 (Mooncake's prefill): layer-wise prefill as a Gantt chart, and a
chunked pipeline's schedule.

* :func:`layerwise_gantt` draws :class:`~kvcourse.cluster.layerwise.LayerwiseTimeline` records,
  one row group per schedule (e.g. "no cache", "half hit, serial", "half hit, overlapped"), each
  with three lanes — the link bringing cached KV in, the GPUs computing, the link writing new KV
  out. The 80 layers are thin bars, alternate layers shaded lighter so they can be told apart;
  each group's total is written at its end, and every group shares one time axis in ms;
* :func:`pipeline_schedule_figure` draws a
  :class:`~kvcourse.cluster.chunked_pipeline.PipelineSchedule`: one row per pipeline stage,
  each chunk a coloured box labelled with its number where it is wide enough, time in seconds.
"""

from __future__ import annotations

from collections.abc import Mapping

from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from kvcourse.cluster.chunked_pipeline import PipelineSchedule
from kvcourse.cluster.layerwise import INTERVAL_KINDS, LayerwiseTimeline
from kvcourse.viz.style import (
    BLUE,
    FONT_SIZE,
    ORANGE,
    SEQUENCE_COLORS,
    TEAL,
    center_text,
    despine,
    text_color_on,
)

__all__ = ["LANE_COLORS", "LANE_LABELS", "layerwise_gantt", "pipeline_schedule_figure"]

#: The colour of each kind of interval: KV coming in, compute, KV going out.
LANE_COLORS: dict[str, str] = {"load": TEAL, "compute": BLUE, "store": ORANGE}
#: How the lanes are named on the chart.
LANE_LABELS: dict[str, str] = {"load": "link in", "compute": "GPUs", "store": "link out"}


def _lighter(color: str, amount: float = 0.45) -> str:
    r, g, b = to_rgb(color)
    return to_hex((r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount))


def layerwise_gantt(
    timelines: Mapping[str, LayerwiseTimeline],
    *,
    width: float = 9.0,
    fontsize: float = FONT_SIZE,
) -> Figure:
    """A Gantt chart of layer-wise prefills: one group of three lanes (link in, GPUs, link out)
    per ``timelines`` entry, labelled by its key, on a shared axis in milliseconds, with each
    group's total time written after its last bar."""
    if not timelines:
        raise ValueError("timelines must map at least one label to a LayerwiseTimeline")
    for label, timeline in timelines.items():
        if not isinstance(timeline, LayerwiseTimeline):
            raise TypeError(
                f"timelines[{label!r}] must be a LayerwiseTimeline "
                f"(from kvcourse.cluster.layerwise.layerwise_prefill), got {timeline!r}"
            )
    lane_h, group_gap = 0.72, 1.25
    group_h = len(INTERVAL_KINDS) + group_gap
    fig = Figure(figsize=(width, 0.9 + 1.05 * len(timelines)), layout="constrained")
    ax = fig.add_subplot()
    longest = max(t.total_s for t in timelines.values()) * 1e3
    ticks, tick_labels = [], []
    top = len(timelines) * group_h
    for g, (label, timeline) in enumerate(timelines.items()):
        base = top - (g + 1) * group_h  # lowest lane of this group
        for k, kind in enumerate(INTERVAL_KINDS):
            y = base + len(INTERVAL_KINDS) - 1 - k
            ticks.append(y)
            tick_labels.append(LANE_LABELS[kind])
            bars = timeline.of_kind(kind)
            if not bars:
                ax.text(0, y, " nothing to move", va="center", fontsize=fontsize - 2, color="0.45")
                continue
            # Bars far thinner than a pixel would vanish at random: an edge of their own colour
            # keeps every one visible, and they are too thin to show alternate shading anyway.
            thin = min(b.duration_s for b in bars) * 1e3 < 0.004 * longest
            for parity in (0, 1):
                spans = [
                    (b.start_s * 1e3, b.duration_s * 1e3) for b in bars if b.layer % 2 == parity
                ]
                color = LANE_COLORS[kind] if parity == 0 or thin else _lighter(LANE_COLORS[kind])
                ax.broken_barh(
                    spans,
                    (y - lane_h / 2, lane_h),
                    facecolors=color,
                    edgecolors=color,
                    linewidth=0.8 if thin else 0,
                )
        ax.text(
            0,
            base + len(INTERVAL_KINDS) - 0.35,
            label,
            fontsize=fontsize,
            weight="bold",
            va="bottom",
        )
        end = timeline.total_s * 1e3
        ax.text(end + 0.01 * longest, base + 1, f"{end:.0f} ms", va="center", fontsize=fontsize)
    ax.set_yticks(ticks, tick_labels, fontsize=fontsize - 1)
    ax.tick_params(axis="y", length=0)
    ax.tick_params(axis="x", labelsize=fontsize - 1)
    ax.set_ylim(-0.6, top - group_gap + 0.75)
    ax.set_xlim(0, longest * 1.12)
    ax.set_xlabel("time since the prefill began (ms)", fontsize=fontsize)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    despine(ax, ("top", "right", "left"))
    handles = [
        Patch(fc=LANE_COLORS["load"], label="load cached KV (one layer)"),
        Patch(fc=LANE_COLORS["compute"], label="compute one layer"),
        Patch(fc=LANE_COLORS["store"], label="store new KV (one layer)"),
    ]
    fig.legend(
        handles=handles, loc="outside lower center", ncols=3, frameon=False, fontsize=fontsize - 1
    )
    return fig


def pipeline_schedule_figure(
    schedule: PipelineSchedule,
    *,
    width: float = 9.0,
    fontsize: float = FONT_SIZE,
) -> Figure:
    """A chunked pipeline's schedule: one row per stage (stage 1 on top), each chunk a coloured
    box labelled with its number counting from 1 (where the box is wide enough), time in
    seconds; the title gives the total against one node."""
    if not isinstance(schedule, PipelineSchedule):
        raise TypeError(
            f"schedule must be a PipelineSchedule (from kvcourse.cluster.chunked_pipeline."
            f"chunked_pipeline), got {schedule!r}"
        )
    stages = schedule.num_stages
    fig = Figure(figsize=(width, 1.3 + 0.5 * stages), layout="constrained")
    ax = fig.add_subplot()
    xmax = schedule.total_s * 1.02
    # Roughly how many seconds one inch of the axes spans, to decide which boxes get a number.
    seconds_per_inch = xmax / (0.85 * width)
    digits = len(str(schedule.num_chunks))
    # A digit of the label is about 0.08 in wide at 9 pt; leave a little margin either side.
    min_label_s = (0.06 + 0.08 * digits) * (fontsize - 2) / 9 * seconds_per_inch
    for slot in schedule.slots:
        y = stages - 1 - slot.stage
        color = SEQUENCE_COLORS[slot.chunk % len(SEQUENCE_COLORS)]
        ax.add_patch(
            Rectangle(
                (slot.start_s, y - 0.38),
                slot.end_s - slot.start_s,
                0.76,
                fc=color,
                ec="white",
                lw=0.6,
            )
        )
        if slot.end_s - slot.start_s >= min_label_s:
            center_text(
                ax,
                (slot.start_s + slot.end_s) / 2,
                y,
                str(slot.chunk + 1),
                fontsize=fontsize - 2,
                color=text_color_on(color),
            )
    ax.set_yticks(range(stages), [f"stage {stages - i}" for i in range(stages)], fontsize=fontsize)
    ax.tick_params(axis="y", length=0)
    ax.tick_params(axis="x", labelsize=fontsize - 1)
    ax.set_xlim(0, xmax)
    ax.set_ylim(-0.6, stages - 0.4)
    ax.set_xlabel("time since the prefill began (s)", fontsize=fontsize)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    despine(ax, ("top", "right", "left"))
    chunks = schedule.num_chunks
    ax.set_title(
        f"{schedule.model}, {schedule.prompt_len:,} tokens in {chunks} chunk"
        f"{'s' if chunks > 1 else ''} on {stages} stages: {schedule.total_s:.2f} s "
        f"(one node {schedule.single_node_s:.2f} s, {schedule.speedup:.2f}×)",
        loc="left",
        fontsize=fontsize,
    )
    return fig
