"""The §10 heavy-hitter drawings (kvcourse.viz.token_eviction)."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from kvcourse.generation import EvictionPoint
from kvcourse.viz.style import ORANGE
from kvcourse.viz.token_eviction import attention_map_figure, eviction_plot


def lower_triangular(n: int, heavy: int) -> np.ndarray:
    """Every query splits its attention between token 0, token ``heavy`` and itself."""
    a = np.zeros((n, n))
    for t in range(n):
        cols = sorted({0, min(heavy, t), t})
        a[t, cols] = 1.0 / len(cols)
    return a


def test_attention_map_figure_marks_the_sink_and_the_heavy_hitters(render):
    trained = lower_triangular(8, 3)
    fig = attention_map_figure({"trained": trained, "random": np.tril(np.ones((8, 8))) / 8}, top=1)
    assert isinstance(fig, Figure)
    assert [ax.get_title() for ax in fig.axes] == ["trained", "random"]  # one panel per model
    ax = fig.axes[0]
    assert len(ax.images) == 1
    first, marked = ax.patches[-2], ax.patches[-1]  # the bars after the step line
    orange = tuple(int(ORANGE[i : i + 2], 16) / 255 for i in (1, 3, 5))
    assert marked.get_facecolor()[:3] == pytest.approx(orange)
    assert marked.get_x() == pytest.approx(3 - 0.5)  # token 3, the heavy hitter
    sums = trained.sum(axis=0)
    # The strip is scaled so the tallest column (token 0 here) is 0.3 × 8 rows high.
    assert abs(first.get_height()) == pytest.approx(0.3 * 8)
    assert abs(marked.get_height()) == pytest.approx(sums[3] / sums.max() * 0.3 * 8)
    render(fig)
    with pytest.raises(ValueError, match="square"):
        attention_map_figure({"x": np.ones((2, 3))})
    with pytest.raises(ValueError, match="at least one"):
        attention_map_figure({})


def test_eviction_plot_draws_a_line_per_rule_and_the_full_cache(render):
    points = [
        EvictionPoint(rule, b, 1.0 / b, 0.5 / b, k / b, 1 - k / (2 * b))
        for rule, k in (("sink_window", 2.0), ("h2o", 1.0))
        for b in (8, 16, 32)
    ]
    fig = eviction_plot(points)
    left, right = fig.axes
    assert [line.get_label() for line in left.lines] == [
        "sinks + window",
        "H2O (heavy hitters + recent)",
        "full cache",
    ]
    assert list(left.lines[1].get_ydata()) == pytest.approx([1 / 8, 1 / 16, 1 / 32])
    assert list(right.lines[0].get_ydata()) == pytest.approx([87.5, 93.75, 96.875])
    assert [t.get_text() for t in left.get_xticklabels()] == ["8", "16", "32"]
    render(fig)
    with pytest.raises(ValueError, match="at least one"):
        eviction_plot([])
