"""The public names of kvcourse.viz, which the book pages and notebooks import."""

import kvcourse.viz as viz

PUBLIC = {
    "ArenaArtists", "ArenaRun", "BeamEdge", "BlockTableArtists", "BlockTableFrame",
    "BlockTableStepper", "FORK_SAMPLE_WORDS", "FOUR_SCORE_OUTPUT", "FOUR_SCORE_PROMPT",
    "FOUR_SCORE_TAKEN", "KIND_COLORS", "KIND_LABELS", "OWNER_COLORS", "SCHEME_COLORS",
    "PoolState", "SYSTEM_PROMPT", "SYSTEM_QUESTIONS", "SequenceSnapshot", "SharingArtists",
    "SharingFrame", "WalkthroughArtists", "arena_kinds", "beam_edges", "beam_search_figure",
    "block_size_waste", "block_size_waste_plot", "block_table_animation", "block_table_frames",
    "block_table_frames_figure", "block_table_legend_handles", "block_table_stepper",
    "draw_arena", "draw_beam_tree", "draw_block_table", "draw_block_table_frame",
    "draw_buddy_walkthrough", "draw_sharing_frame", "draw_system_overview", "fork_cow_frames",
    "four_score_frames", "html_table", "kind_legend_handles", "markdown_table",
    "memory_breakdown_bars", "memory_timeline_plot", "rate_sweep_plot", "render_frame_png",
    "shared_prefix_frame", "sharing_frame", "sharing_frames_figure", "sharing_legend_handles",
}  # fmt: skip


def test_public_names_are_kept_and_all_exist():
    # Pages and notebooks import these: a name may be added, never dropped (but renamed, with
    # every page and notebook, when it meant two things).
    assert len(viz.__all__) == len(set(viz.__all__))
    assert set(viz.__all__) >= PUBLIC
    assert all(hasattr(viz, name) for name in viz.__all__)


def test_each_name_comes_from_its_chapter_module():
    # Every public class and function is defined in one of the package's modules.
    for name in viz.__all__:
        module = getattr(getattr(viz, name), "__module__", None)
        assert module is None or module.startswith("kvcourse.viz.")
    assert viz.draw_arena.__module__ == "kvcourse.viz.arena"
    assert viz.SharingFrame.__module__ == "kvcourse.viz.sharing_frames"
    assert viz.beam_edges.__module__ == "kvcourse.viz.beams"
