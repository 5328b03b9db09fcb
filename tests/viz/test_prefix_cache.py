"""The §8 drawings (kvcourse.viz.prefix_cache)."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from kvcourse.cluster import hit_rate_curve
from kvcourse.viz import chained_hash_figure, hit_rate_plot
from kvcourse.viz.style import CHANGED, SHARED


def test_chained_hash_figure_marks_shared_and_changed_blocks():
    a = list(range(100, 120))
    edited = a.copy()
    edited[9] = 7
    fig = chained_hash_figure([("A", a), ("edited", edited), ("short", a[:10])], 4)
    assert isinstance(fig, Figure)
    boxes = [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]
    assert len(boxes) == 5 + 5 + 3
    shared = [
        b
        for b in boxes
        if b.get_facecolor()[:3] == Rectangle((0, 0), 1, 1, fc=SHARED).get_facecolor()[:3]
    ]
    changed = [
        b
        for b in boxes
        if b.get_edgecolor()[:3] == Rectangle((0, 0), 1, 1, ec=CHANGED).get_edgecolor()[:3]
    ]
    assert len(shared) == 2 + 2 and len(changed) == 3  # edited: blocks 3-5 differ
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "no hash" in texts  # the short prompt's partial block
    with pytest.raises(ValueError, match="at least one"):
        chained_hash_figure([])


def test_hit_rate_plot_draws_every_curve_and_the_reference():
    trace = [[1, 2, 3], [1, 2, 4], [5], [1, 2, 3]]
    curves = {"toy": hit_rate_curve(trace, [1, 2, 4, None])}
    ax = hit_rate_plot(curves, reference={"paper": [(2, 0.5)]})
    assert len(ax.lines) == 2 + 1 + 1  # LRU, LFU, the ceiling, the reference
    assert ax.get_xscale() == "log"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["toy", "LRU", "LFU", "infinite cache", "paper"]
