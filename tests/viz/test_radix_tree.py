"""The drawings of the page Beyond block prefixes (kvcourse.viz.radix_tree): the radix tree's
snapshots, desktop and phone, and the hit-rate panels."""

from __future__ import annotations

import pytest

from kvcourse.blocks import RadixCache
from kvcourse.viz import radix_hit_rate_plot, radix_tree_figure


def snapshots():
    cache = RadixCache(16)
    cache.insert([5, 8, 2, 9, 4, 7, 3])
    first = cache.tree()
    cache.acquire("B", [5, 8, 2, 9, 4, 1, 1])
    second = cache.tree()
    return [("before", first), ("B running", second)]


def texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def test_each_node_shows_its_tokens_slots_and_references():
    fig = radix_tree_figure(snapshots())
    shown = texts(fig)
    assert "5 8 2 9\n4 7 3" in shown and "5 8 2 9\n4" in shown and "7 3" in shown
    assert "slots 0–4 · ref 1" in shown and "slots 5–6 · ref 0" in shown
    assert "before" in shown and "B running" in shown


def test_the_phone_outline_puts_a_node_on_each_row():
    fig = radix_tree_figure(snapshots(), phone=True)
    shown = texts(fig)
    assert "5 8 2 9 4 7 3" in shown and "5 8 2 9 4" in shown
    ys = {t.get_text(): t.get_position()[1] for t in fig.axes[0].texts}
    assert ys["5 8 2 9 4"] > ys["7 3"]  # a child is drawn under its parent


def test_bad_snapshots_are_refused():
    with pytest.raises(ValueError, match="at least one"):
        radix_tree_figure([])
    with pytest.raises(TypeError, match="RadixCache.tree"):
        radix_tree_figure([("x", [1, 2])])


def test_hit_rate_panels_one_per_workload_with_fraction_ticks():
    curves = {
        w: {"radix tree": [(0.125, 0.5), (1, 0.9)], "blocks of 16": [(0.125, 0.4), (1, 0.8)]}
        for w in ("a", "b", "c", "d")
    }
    fig = radix_hit_rate_plot(curves)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["a", "b", "c", "d"]
    assert [t.get_text() for t in visible[2].get_xticklabels()] == ["1/8", "1"]
    assert len(fig.legends[0].get_texts()) == 2
    with pytest.raises(ValueError):
        radix_hit_rate_plot({})
