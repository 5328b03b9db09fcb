"""§5's beam-search drawings (kvcourse.viz.beams): the fork tree, its copy-on-writes, and what
sharing saves, headless."""

import pytest
from matplotlib.figure import Figure

from kvcourse.generation import expected_cow_count, random_parent_choices, scripted_beam_search
from kvcourse.viz import beam_edges, beam_search_figure, draw_beam_tree


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


def test_draw_beam_tree_artists(render):
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


def test_beam_search_figure(render):
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
