"""The §9.6 drawings (kvcourse.viz.overload)."""

from __future__ import annotations

import pytest
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from kvcourse.cluster.overload import OverloadConfig, poisson_requests
from kvcourse.cluster.overload_sim import compare_rejection_rules
from kvcourse.traces import load_mooncake_trace
from kvcourse.viz.overload import REJECTION_RULE_COLORS, pd_load_figure, rejection_bars
from kvcourse.viz.style import BLUE, ORANGE


@pytest.fixture(scope="module")
def results():
    config = OverloadConfig(warmup_s=60.0)
    requests = poisson_requests(load_mooncake_trace("conversation"), duration_s=400.0, seed=2)
    return compare_rejection_rules(requests, config)


def test_pd_load_figure_stacks_the_baseline_and_early_rejection(results, render):
    fig = pd_load_figure(results, window_s=(100.0, 300.0))
    assert isinstance(fig, Figure)
    top, bottom = fig.axes
    assert top.get_shared_x_axes().joined(top, bottom)
    assert bottom.get_xlim() == (100.0, 300.0)
    base, early = results[0], results[1]
    assert top.get_title(loc="left") == f"reject after prefill: correlation {base.correlation:+.2f}"
    assert bottom.get_title(loc="left").startswith("early rejection: correlation ")
    for ax, r in ((top, base), (bottom, early)):
        prefill, decode = ax.lines
        assert (prefill.get_color(), decode.get_color()) == (BLUE, ORANGE)
        xs = list(prefill.get_xdata())
        assert xs[0] == 100.0 and xs[-1] == 300.0 and len(xs) == 201  # one sample a second
        assert list(decode.get_ydata()) == list(r.decode_load[100:301])
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["prefill pool: queued work / TTFT SLO", "decode pool: occupied slots"]
    render(fig, "png")


def test_pd_load_figure_options_and_errors(results):
    fig = pd_load_figure(results, rules=("baseline", "early", "predictive"), window_s=None)
    assert len(fig.axes) == 3
    assert len(fig.axes[2].lines[0].get_xdata()) == len(results[2].times)
    with pytest.raises(ValueError, match="no 'late' run among the results"):
        pd_load_figure(results, rules=("late",))
    with pytest.raises(ValueError, match="start < stop"):
        pd_load_figure(results, window_s=(300.0, 100.0))
    with pytest.raises(ValueError, match="non-empty"):
        pd_load_figure(results, rules=())
    with pytest.raises(ValueError, match="non-empty sequence of OverloadResult"):
        pd_load_figure([])


def test_rejection_bars_write_every_count(results, render):
    fig = rejection_bars(results)
    ax = fig.axes[0]
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(bars) == 3 * 3  # three groups, one bar per rule in each
    heights = sorted(round(b.get_height()) for b in bars)
    expected = [v for r in results for v in (r.wasted_prefills, r.completed, r.rejected)]
    assert heights == sorted(expected)
    texts = {t.get_text() for t in ax.texts}
    assert {f"{v:,}" for v in expected} <= texts
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "wasted prefills",
        "completed",
        "rejected",
    ]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "reject after prefill",
        "early rejection",
        "predictive early rejection",
    ]
    assert bars[0].get_facecolor()[:3] == to_rgb(REJECTION_RULE_COLORS["baseline"])
    render(fig, "png")
    with pytest.raises(TypeError, match="only OverloadResult"):
        rejection_bars([1, 2])
