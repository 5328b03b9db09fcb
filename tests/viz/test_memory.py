"""The §3 drawings (kvcourse.viz.memory), headless: the right number of slots, blocks, bars and
lines, the labels a reader needs, and clear errors for bad input."""

import io

import matplotlib
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

from kvcourse.blocks import WALKTHROUGH_REQUESTS, buddy_walkthrough
from kvcourse.serving import KINDS, compare_policies, default_policies
from kvcourse.viz import (
    KIND_COLORS,
    KIND_LABELS,
    ArenaRun,
    arena_kinds,
    draw_arena,
    draw_buddy_walkthrough,
    kind_legend_handles,
    memory_breakdown_bars,
    memory_timeline_plot,
    rate_sweep_plot,
)
from kvcourse.workloads import LengthDistribution, generate_requests

# A small overloaded run, fast enough for a unit test (the same shape as the accounting tests').
SMALL = LengthDistribution("small", mean_prompt=20, mean_output=60, max_total=256)
SMALL_SLOTS = 1500


def small_results(rate: float = 40.0, n: int = 300):
    requests = generate_requests(n, SMALL, rate=rate, seed=0)
    return compare_policies(requests, default_policies(max_len=256), num_slots=SMALL_SLOTS)


@pytest.fixture(scope="module")
def results():
    return small_results()


def new_axes(size=(8.0, 3.0)):
    fig = Figure(figsize=size)
    return fig, fig.add_subplot()


def texts(ax):
    return [t.get_text() for t in ax.texts]


def render(fig):
    fig.savefig(io.BytesIO(), format="svg")


# ---------------------------------------------------------------------------- arena


EXAMPLE = [ArenaRun("A", 0, 16, 9, 12), ArenaRun("B", 20, 8, 3, 5)]


def test_arena_kinds_follow_the_simulator_definitions():
    kinds = arena_kinds(EXAMPLE, 32, waiting=6)
    assert kinds[:9] == ["stored"] * 9
    assert kinds[9:12] == ["reserved"] * 3
    assert kinds[12:16] == ["internal"] * 4
    assert kinds[16:20] == ["external"] * 4  # 8 free in gaps of 4: C (6) is refused
    assert [kinds.count(k) for k in KINDS] == [12, 5, 7, 8, 0]
    # A request that fits a gap, or one larger than all free memory, is no fragmentation.
    assert arena_kinds(EXAMPLE, 32, waiting=4).count("free") == 8
    assert arena_kinds(EXAMPLE, 32, waiting=9).count("free") == 8
    assert arena_kinds(EXAMPLE, 32).count("external") == 0


def test_arena_rejects_bad_runs():
    with pytest.raises(ValueError, match="stored <= final <= size"):
        ArenaRun("A", 0, 4, 3, 5)
    with pytest.raises(ValueError, match="overlaps"):
        arena_kinds([ArenaRun("A", 0, 4, 1, 2), ArenaRun("B", 2, 4, 1, 2)], 8)
    with pytest.raises(ValueError, match="does not fit"):
        arena_kinds([ArenaRun("A", 6, 4, 1, 2)], 8)
    with pytest.raises(TypeError):
        arena_kinds([("A", 0, 4, 1, 2)], 8)


def test_draw_arena_draws_every_slot_in_its_kind_colour():
    fig, ax = new_axes((9.0, 2.4))
    drawn = draw_arena(ax, EXAMPLE, 32, waiting=("C", 6))
    assert len(drawn.slots) == 32
    colours = [matplotlib.colors.to_hex(r.get_facecolor()) for r in drawn.slots]
    kinds = arena_kinds(EXAMPLE, 32, waiting=6)
    assert colours == [KIND_COLORS[k].lower() for k in kinds]
    # Two runs, two gaps and the waiting request's bar are outlined.
    assert len(drawn.outlines) == 5
    labels = texts(ax)
    assert "A: 16 slots" in labels and "B: 8 slots" in labels
    assert labels.count("gap 4") == 2 and "C waits" in labels
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [KIND_LABELS[k] for k in KINDS]
    render(fig)


def test_draw_arena_rejects_a_bad_waiting_request():
    _, ax = new_axes()
    with pytest.raises(ValueError, match="waiting"):
        draw_arena(ax, EXAMPLE, 32, waiting=("C", 0))


# ---------------------------------------------------------------------------- walk-through


def test_walkthrough_draws_sixteen_slots_per_step_and_the_failed_pieces():
    steps = buddy_walkthrough()
    drawn = draw_buddy_walkthrough(steps)
    assert len(drawn.slots) == len(steps) == 5
    assert all(len(row) == 16 for row in drawn.slots)
    # Blocks per row: 16 | A 4 8 | A B 2 8 | A B 2 C 4 | the same.
    assert [len(row) for row in drawn.blocks] == [1, 3, 4, 5, 5]
    # Only D's failed step outlines free pieces: the 2 at offset 6 and the 4 at offset 12.
    assert [len(row) for row in drawn.failed_pieces] == [0, 0, 0, 0, 2]
    pieces = sorted((r.get_x(), r.get_width()) for r in drawn.failed_pieces[4])
    assert pieces == [(6, 2), (12, 4)]
    labels = [t.get_text() for t in drawn.labels]
    assert labels[0] == "start" and labels[4].startswith("D asks 6")
    assert drawn.notes[4].get_text() == "needs 8; free 4 + 2"
    ax = drawn.labels[0].axes
    assert {"A", "B", "C"} <= set(texts(ax))
    render(ax.figure)


def test_walkthrough_shows_merging_and_rounding():
    more = (("B", None), ("D", 6), ("A", None), ("D", 6))
    steps = buddy_walkthrough(16, WALKTHROUGH_REQUESTS + more)
    fig, ax = new_axes((10.0, 5.0))
    drawn = draw_buddy_walkthrough(steps, ax=ax)
    assert len(drawn.slots) == 9
    notes = [t.get_text() for t in drawn.notes]
    assert notes[5] == "merges into 4; free 4 + 4"
    assert notes[6] == "needs 8; free 4 + 4"
    assert notes[7] == "merges into 8; free 8 + 4"
    assert notes[8] == "gets 8 at 0, 2 unused; free 4"
    # D asked for 6 of its 8 slots: the last 2 are hatched.
    hatched = [r for r in drawn.slots[8] if r.get_hatch()]
    assert sorted(r.get_x() for r in hatched) == [6, 7]
    render(fig)


def test_walkthrough_notes_a_free_without_merge():
    steps = buddy_walkthrough(8, (("A", 2), ("B", 2), ("A", None)))
    drawn = draw_buddy_walkthrough(steps)
    assert drawn.notes[-1].get_text().startswith("buddy in use, no merge")


def test_walkthrough_rejects_bad_steps():
    with pytest.raises(ValueError, match="non-empty"):
        draw_buddy_walkthrough([])
    with pytest.raises(ValueError, match="non-empty"):
        draw_buddy_walkthrough(["start"])
    mixed = buddy_walkthrough(16)[:2] + buddy_walkthrough(8)[:1]
    with pytest.raises(ValueError, match="same arena"):
        draw_buddy_walkthrough(mixed)


# ---------------------------------------------------------------------------- a serving run


def test_breakdown_bars_one_bar_per_policy_five_segments(results):
    fig, ax = new_axes((8.0, 4.0))
    memory_breakdown_bars(
        results, ax=ax, reference={"Max": 0.2, "Paged": 0.9}, reference_label="lecture"
    )
    assert len(ax.containers) == len(KINDS)
    assert all(len(c) == len(results) for c in ax.containers)
    # The segments of each bar add up to 100 %.
    for i in range(len(results)):
        assert sum(c[i].get_width() for c in ax.containers) == pytest.approx(100)
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert [t.split("\n")[0] for t in ticks] == [r.label for r in results.values()]
    assert all("running" in t for t in ticks)
    # Big segments carry their percentage.
    paged = results["Paged"].shares.stored
    assert f"{100 * paged:.0f}\u00a0%" in texts(ax)
    assert len(ax.lines) == 2  # two reference ticks
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "lecture" in legend and KIND_LABELS["stored"] in legend
    render(fig)


def test_breakdown_bars_accept_a_list_and_reject_junk(results):
    ax = memory_breakdown_bars(list(results.values())[:2], show_running=False)
    assert len(ax.containers[0]) == 2
    assert all("running" not in t.get_text() for t in ax.get_yticklabels())
    with pytest.raises(ValueError):
        memory_breakdown_bars({})
    with pytest.raises(TypeError):
        memory_breakdown_bars(["Max"])


def test_timeline_stacks_the_five_kinds(results):
    r = results["Oracle"]
    ax = memory_timeline_plot(r, window_s=5.0, bin_s=0.25)
    stacks = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(stacks) == len(KINDS)
    assert ax.get_title(loc="left") == r.label
    assert ax.get_ylim() == (0, 100)
    render(ax.figure)
    with pytest.raises(ValueError, match="no measured iteration"):
        memory_timeline_plot(r, start_s=1e6)
    with pytest.raises(TypeError):
        memory_timeline_plot("Oracle")


def test_rate_sweep_draws_a_line_per_policy_and_the_diagonal():
    sweep = {rate: small_results(rate, n=200) for rate in (5.0, 40.0)}
    left, right = rate_sweep_plot(sweep, mark=(40.0,), title="small")
    assert len(left.get_lines()) == 3 + 1  # three policies, one marked rate
    assert len(right.get_lines()) == 3 + 1 + 1  # ... and "finished = arrived"
    assert all(len(line.get_xdata()) == 2 for line in left.get_lines()[:3])
    legend = [t.get_text() for t in right.get_legend().get_texts()]
    assert "finished = arrived" in legend and len(legend) == 4
    assert left.get_title(loc="left") == "small"
    render(left.figure)
    with pytest.raises(ValueError):
        rate_sweep_plot({})


def test_legend_handles():
    assert [h.get_label() for h in kind_legend_handles()] == [KIND_LABELS[k] for k in KINDS]
    with pytest.raises(ValueError, match="unknown"):
        kind_legend_handles(["stored", "wasted"])
