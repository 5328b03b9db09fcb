"""The §5 drawings: sharing frames, copy-on-write arrows, beam fork trees (all headless)."""

import io

import pytest
from matplotlib.figure import Figure

from kvcourse.blocks import (
    BlockPool,
    SharedBlockManager,
)
from kvcourse.generation import expected_cow_count, random_parent_choices, scripted_beam_search
from kvcourse.viz import (
    FORK_SAMPLE_WORDS,
    SYSTEM_PROMPT,
    SYSTEM_QUESTIONS,
    SharingFrame,
    beam_edges,
    beam_search_figure,
    draw_beam_tree,
    draw_sharing_frame,
    fork_cow_frames,
    shared_prefix_frame,
    sharing_frame,
    sharing_frames_figure,
    sharing_legend_handles,
)


def render(fig: Figure) -> None:
    """Draw the figure for real (catches errors that only show at draw time)."""
    fig.savefig(io.BytesIO(), format="svg")


# ---------------------------------------------------------------------------- the fork demo


def test_fork_frames_follow_exercise_4():
    frames = fork_cow_frames()
    n = len(FORK_SAMPLE_WORDS)
    assert len(frames) == n + 1
    first = frames[0]
    # 7 prompt tokens in blocks of 4: blocks 0 and 1, each listed by all three samples.
    assert [s.block_ids for s in first.sequences] == [(0, 1)] * n
    assert first.ref_counts[:2] == (n, n) and first.copies == ()
    # The first n - 1 writers copy block 1; the last writes in place.
    assert [f.copies for f in frames[1:]] == [((1, 2),), ((1, 3),), ()]
    assert frames[-1].ref_counts == (3, 1, 1, 1, 0)
    assert frames[1].changed_refs == (1, 2)
    assert "copy it to block 2" in frames[1].label and "in place" in frames[-1].label
    assert frames[-1].num_used == 4 and frames[-1].blocks_unshared == 6


def test_frame_contents_and_new_slots():
    frames = fork_cow_frames()
    after = frames[1]  # sample 1 wrote "fathers" into its copy, block 2
    assert after.block_tokens(2) == ("years", "ago", "our", "fathers")
    assert after.block_is_new(2) == (False, False, False, True)
    assert after.block_tokens(1) == ("years", "ago", "our")
    assert after.block_tokens(4) == ()  # free
    assert after.sequences[0].new_tokens == 1 and after.sequences[1].new_tokens == 0


def test_prompt_filling_its_last_block_copies_nothing():
    frames = fork_cow_frames(["a", "b", "c", "d"], ["x", "y"], num_blocks=4)
    assert all(f.copies == () for f in frames)
    assert "full" in frames[1].label and "new block" in frames[1].label


def test_fork_frames_accept_another_manager():
    made = []

    def factory(pool):
        made.append(SharedBlockManager(pool))
        return made[-1]

    frames = fork_cow_frames(manager_factory=factory)
    assert len(made) == 1 and made[0].cow_count == 2
    assert frames[-1].ref_counts == (3, 1, 1, 1, 0)


def test_sharing_frame_checks_token_counts():
    manager = SharedBlockManager(BlockPool(4, 4))
    manager.add_sequence("a")
    manager.append("a", 5)
    with pytest.raises(ValueError, match="5 tokens|2 blocks"):
        sharing_frame(manager, {"a": ["t"] * 9}, "wrong")
    frame = sharing_frame(manager, {"a": ["t"] * 5}, "right", names={"a": "seq A"})
    assert frame.sequences[0].name == "seq A" and frame.sequences[0].block_ids == (0, 1)
    with pytest.raises(TypeError):
        sharing_frame(object(), {}, "not a manager")


def test_shared_prefix_frame():
    frame = shared_prefix_frame()
    requests = len(SYSTEM_QUESTIONS)
    assert len(frame.sequences) == requests + 1
    assert frame.ref_counts[0] == frame.ref_counts[1] == requests + 1
    assert frame.copies == ()
    prefix_blocks = len(SYSTEM_PROMPT) // 4
    assert frame.num_used == prefix_blocks + requests
    assert frame.num_blocks == frame.num_used + 1  # one free block to show the pool
    assert (
        frame.blocks_unshared
        == sum(-(-(len(SYSTEM_PROMPT) + len(q)) // 4) for q in SYSTEM_QUESTIONS) + prefix_blocks
    )


# ---------------------------------------------------------------------------- drawing frames


def test_draw_sharing_frame_artists():
    frames = fork_cow_frames()
    fig = Figure()
    ax = fig.add_subplot()
    art = draw_sharing_frame(ax, frames[1])
    # 3 samples x 2 logical blocks x 4 slots; 5 physical blocks x 4 slots.
    assert len(art.logical_slots) == 24 and len(art.physical_slots) == 20
    assert len(art.table_arrows) == 6 and len(art.copy_arrows) == 1
    assert [t.get_text() for t in art.ref_labels] == ["ref 3", "ref 2", "ref 1", "free", "free"]
    texts = {t.get_text() for t in ax.texts}
    assert {"fathers", "copy", "sample 1", "physical KV blocks"} <= texts
    assert ax.get_title(loc="left") == frames[1].label
    # The new token's slots are outlined in red, in the sample's table and in the pool.
    red = [r for r in art.logical_slots + art.physical_slots if r.get_linewidth() > 2]
    assert len(red) == 2
    render(fig)


def test_draw_sharing_frame_without_copies_or_title():
    fig = Figure()
    ax = fig.add_subplot()
    art = draw_sharing_frame(ax, fork_cow_frames()[-1], title=False)
    assert art.copy_arrows == [] and ax.get_title(loc="left") == ""
    with pytest.raises(TypeError):
        draw_sharing_frame(ax, "not a frame")


def test_sharing_frames_figure():
    frames = fork_cow_frames()
    fig = sharing_frames_figure(frames)
    assert len(fig.axes) == len(frames)
    assert len(fig.legends) == 1
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "copy-on-write" in labels
    render(fig)
    alone = sharing_frames_figure([shared_prefix_frame()])
    labels = [t.get_text() for t in alone.legends[0].get_texts()]
    assert "copy-on-write" not in labels  # nothing is copied in that picture
    assert len(sharing_legend_handles(copies=False)) == 3
    render(alone)
    with pytest.raises(ValueError):
        sharing_frames_figure([])
    with pytest.raises(ValueError):
        sharing_frames_figure(["x"])
    assert isinstance(frames[0], SharingFrame)


# ---------------------------------------------------------------------------- beam search


def test_beam_edges_count_the_expected_copies():
    for seed in range(5):
        parents = random_parent_choices(4, 32, seed=seed)
        edges = beam_edges(parents, 64, 16)
        assert len(edges) == 4 * 32
        assert sum(e.copies for e in edges) == expected_cow_count(parents, 64, 16)
        assert sum(e.copies for e in edges) == scripted_beam_search(parents).cow_count
        # No copies in a step whose token opens a new block (64 + 0, 64 + 16).
        assert not any(e.copies for e in edges if e.step in (0, 16))
        # Every final beam survives; survivors form a chain back to step 0.
        assert all(e.survives for e in edges if e.step == 31)
        assert any(e.survives for e in edges if e.step == 0)


def test_beam_edges_small_case():
    # Step 1 (P + 1 = 5 tokens, B = 4, partly filled): parent 0 has children 0 and 1.
    edges = beam_edges([(0, 0), (0, 0)], prompt_len=4, block_size=4)
    step1 = [e for e in edges if e.step == 1]
    assert [(e.child, e.parent, e.copies) for e in step1] == [(0, 0, True), (1, 0, False)]
    # Only beam 0 of step 0 has children, so beam 1 of step 0 is pruned.
    step0 = {e.child: e.survives for e in edges if e.step == 0}
    assert step0 == {0: True, 1: False}
    with pytest.raises(ValueError):
        beam_edges([(0,)], prompt_len=0, block_size=4)


def test_draw_beam_tree_artists():
    parents = random_parent_choices(4, 32, seed=0)
    fig = Figure()
    ax = fig.add_subplot()
    out = draw_beam_tree(ax, parents, prompt_len=64, block_size=16)
    assert len(out["edges"]) == 4 * 32
    assert len(out["copies"]) == 1
    assert len(out["copies"][0].get_offsets()) == expected_cow_count(parents, 64, 16)
    assert len(out["new_block_steps"]) == 2  # tokens 64 and 80 open new blocks
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"beam {i}" for i in range(1, 5)]
    render(fig)


def test_beam_search_figure():
    report = scripted_beam_search(seed=0)
    fig = beam_search_figure(
        report.parents,
        prompt_len=64,
        block_size=16,
        blocks_shared=report.blocks_shared,
        blocks_unshared=report.blocks_unshared,
    )
    assert len(fig.axes) == 3
    memory, copying = fig.axes[1], fig.axes[2]
    assert len(memory.get_lines()) == 2
    full, paged = copying.get_lines()
    assert full.get_ydata()[-1] == report.full_copy_tokens == 10_176
    assert paged.get_ydata()[-1] == report.cow_block_slots
    render(fig)
    with pytest.raises(ValueError, match="block counts"):
        beam_search_figure(
            report.parents, prompt_len=64, block_size=16, blocks_shared=[1], blocks_unshared=[1]
        )
