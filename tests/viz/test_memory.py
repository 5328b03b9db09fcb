"""Where a serving run's memory went (kvcourse.viz.memory), headless: the right number of bars,
layers and lines, the labels a reader needs, and clear errors for bad input."""

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection

from kvcourse.serving import KINDS, compare_schemes, default_schemes
from kvcourse.viz import (
    KIND_LABELS,
    memory_breakdown_bars,
    memory_timeline_plot,
    rate_sweep_plot,
)
from kvcourse.viz.memory import ratio_sweep_plot
from kvcourse.workloads import LengthDistribution, generate_requests

# A small overloaded run, fast enough for a unit test (the same shape as the accounting tests').
SMALL = LengthDistribution("small", mean_prompt=20, mean_output=60, max_total=256)
SMALL_SLOTS = 1500


def small_results(rate: float = 40.0, n: int = 300):
    requests = generate_requests(n, SMALL, rate=rate, seed=0)
    return compare_schemes(requests, default_schemes(max_len=256), num_slots=SMALL_SLOTS)


@pytest.fixture(scope="module")
def results():
    return small_results()


def texts(ax):
    return [t.get_text() for t in ax.texts]


def test_breakdown_bars_one_bar_per_scheme_five_segments(results, new_axes, render):
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
    # Each reference is a triangle on each edge of its bar, outside the bar: none covers a label.
    marks = [t for t in ax.texts if t.get_text() in ("\u25bc", "\u25b2")]
    assert len(marks) == 4  # two bars with a reference, two edges each
    # Drawn for real, no mark overlaps a segment's percentage label.
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    labels = [t for t in ax.texts if t not in marks]
    for mark in marks:
        box = mark.get_window_extent(renderer)
        assert not any(box.overlaps(t.get_window_extent(renderer)) for t in labels)
    assert [mark.xy[0] for mark in marks[::2]] == pytest.approx([20.0, 90.0])
    assert len(ax.lines) == 1  # the legend's entry for the references
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "lecture" in legend and KIND_LABELS["stored"] in legend
    render(fig)


def test_breakdown_bars_accept_a_list_and_reject_junk(results):
    ax = memory_breakdown_bars(list(results.values())[:2], show_running=False, title="two")
    assert len(ax.containers[0]) == 2
    assert all("running" not in t.get_text() for t in ax.get_yticklabels())
    assert ax.get_title(loc="left") == "two"
    with pytest.raises(ValueError):
        memory_breakdown_bars({})
    with pytest.raises(TypeError):
        memory_breakdown_bars(["Max"])


def test_timeline_stacks_the_five_kinds(results, render):
    r = results["Oracle"]
    ax = memory_timeline_plot(r, window_s=5.0, bin_s=0.25)
    stacks = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(stacks) == len(KINDS)
    assert ax.get_title(loc="left") == r.label
    assert ax.get_ylim() == (0, 100)
    render(ax.figure)
    with pytest.raises(ValueError, match="no measured iteration"):
        memory_timeline_plot(r, start_s=1e6)
    with pytest.raises(ValueError, match="positive"):
        memory_timeline_plot(r, bin_s=0)
    with pytest.raises(TypeError):
        memory_timeline_plot("Oracle")


def test_rate_sweep_draws_a_line_per_scheme_and_the_diagonal(render):
    sweep = {rate: small_results(rate, n=200) for rate in (5.0, 40.0)}
    left, right = rate_sweep_plot(sweep, mark=(40.0,), title="small")
    assert len(left.get_lines()) == 3 + 1  # three schemes, one marked rate
    assert len(right.get_lines()) == 3 + 1 + 1  # ... and "finished = arrived"
    assert all(len(line.get_xdata()) == 2 for line in left.get_lines()[:3])
    legend = [t.get_text() for t in right.get_legend().get_texts()]
    assert "finished = arrived" in legend and len(legend) == 4
    assert left.get_title(loc="left") == "small"
    render(left.figure)
    with pytest.raises(ValueError):
        rate_sweep_plot({})
    with pytest.raises(ValueError, match="two Axes"):
        rate_sweep_plot(sweep, axes=[left])


def test_breakdown_bars_legend_columns(results, new_axes):
    ax = memory_breakdown_bars(results, legend_ncols=2)
    assert ax.get_legend()._ncols == 2
    # By default: three columns where they fit the figure, two where they would not.
    _, wide = new_axes((8.0, 4.0))
    assert memory_breakdown_bars(results, ax=wide).get_legend()._ncols == 3
    _, narrow = new_axes((6.0, 4.0))
    assert memory_breakdown_bars(results, ax=narrow).get_legend()._ncols == 2
    _, wide = new_axes((8.0, 4.0))
    long = "lecture: ≈ 23 %, ≈ 39 %, > 90 % stored"  # assignment a1's label
    bars = memory_breakdown_bars(results, ax=wide, reference={"Max": 0.2}, reference_label=long)
    assert bars.get_legend()._ncols == 2
    with pytest.raises(ValueError, match="legend_ncols"):
        memory_breakdown_bars(results, legend_ncols=0)


def test_ratio_sweep_draws_both_ratios_the_references_and_the_knee(render):
    sweep = {rate: small_results(rate, n=200) for rate in (5.0, 40.0)}
    references = {
        "lecture": (40.0, {"paged/oracle": 1.8, "paged/max": 3.0}),
        "paper": (40.0, {"paged/oracle": 2.2, "paged/max": 4.3}),
    }
    ax = ratio_sweep_plot(sweep, references=references, knee=20.0, title="small")
    lines = ax.get_lines()
    paged = {rate: res["Paged"].mean_running for rate, res in sweep.items()}
    oracle = lines[0]
    assert list(oracle.get_xdata()) == [5.0, 40.0]
    expected = [paged[r] / sweep[r]["Oracle"].mean_running for r in (5.0, 40.0)]
    assert list(oracle.get_ydata()) == pytest.approx(expected)
    # Each reference: one marker per ratio at its rate, and one legend entry.
    marked = [
        (line.get_xdata()[0], line.get_ydata()[0]) for line in lines if len(line.get_xdata()) == 1
    ]
    assert {(40.0, 1.8), (40.0, 3.0), (40.0, 2.2), (40.0, 4.3)} <= set(marked)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["Paged ÷ Oracle", "Paged ÷ Max", "lecture", "paper"]
    assert any("saturates" in t.get_text() for t in ax.texts)
    assert ax.get_title(loc="left") == "small"
    render(ax.figure)


def test_ratio_sweep_rejects_junk():
    sweep = {40.0: small_results(40.0, n=200)}
    with pytest.raises(ValueError, match="non-empty"):
        ratio_sweep_plot({})
    with pytest.raises(ValueError, match="lacks"):
        ratio_sweep_plot(sweep, references={"paper": (2.0, {"paged/oracle": 2.2})})
    with pytest.raises(ValueError, match="Max"):
        ratio_sweep_plot({40.0: {"Paged": sweep[40.0]["Paged"]}})
