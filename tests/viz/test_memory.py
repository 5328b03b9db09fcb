"""Where a serving run's memory went (kvcourse.viz.memory), headless: the right number of bars,
layers and lines, the labels a reader needs, and clear errors for bad input."""

import pytest
from matplotlib.collections import PolyCollection

from kvcourse.serving import KINDS, compare_policies, default_policies
from kvcourse.viz import (
    KIND_LABELS,
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


def texts(ax):
    return [t.get_text() for t in ax.texts]


def test_breakdown_bars_one_bar_per_policy_five_segments(results, new_axes, render):
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


def test_rate_sweep_draws_a_line_per_policy_and_the_diagonal(render):
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
    with pytest.raises(ValueError, match="two Axes"):
        rate_sweep_plot(sweep, axes=[left])
