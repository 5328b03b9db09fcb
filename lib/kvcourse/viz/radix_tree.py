"""The drawings of the page *Beyond block prefixes*: a radix tree of cached tokens, step by step,
and hit rate against capacity for the block-aligned cache and the radix tree.

* :func:`radix_tree_figure` draws snapshots of a :class:`~kvcourse.blocks.radix_cache.RadixCache`
  (its :meth:`~kvcourse.blocks.radix_cache.RadixCache.tree`) side by side: each node a box with
  its edge's tokens, under it the slots that hold them and its reference count; a node a running
  request references is shaded. ``phone=True`` stacks the snapshots and draws each tree as an
  indented outline, one node a row, so that a wide tree still fits a phone's column;
* :func:`radix_hit_rate_plot` draws one panel per workload: hit rate (share of prompt tokens
  reused) against capacity, one line per design.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from kvcourse.blocks.radix_cache import RadixNodeView
from kvcourse.viz.phone import PHONE_MIN_FONT_PT, phone_figure
from kvcourse.viz.style import (
    BLUE,
    FONT_SIZE,
    GREEN,
    ORANGE,
    SHARED,
    center_text,
    despine,
    finish_diagram,
)

__all__ = ["DESIGN_STYLES", "radix_hit_rate_plot", "radix_tree_figure"]

#: How :func:`radix_hit_rate_plot` draws each design: (colour, line style, marker).
DESIGN_STYLES: dict[str, tuple[str, str, str]] = {
    "radix tree": ("black", "-", "o"),
    "blocks of 1": (GREEN, ":", "^"),
    "blocks of 16": (BLUE, "--", "s"),
    "blocks of 64": (ORANGE, "-.", "D"),
}


def _label(node: RadixNodeView, per_line: int) -> str:
    words = [str(t) for t in node.tokens]
    return "\n".join(" ".join(words[i : i + per_line]) for i in range(0, len(words), per_line))


def _note(node: RadixNodeView) -> str:
    s = node.slots
    slots = f"slot {s[0]}" if len(s) == 1 else f"slots {s[0]}–{s[-1]}"
    if list(s) != list(range(s[0], s[0] + len(s))):
        slots = "slots " + ",".join(map(str, s))
    return f"{slots} · ref {node.ref_count}"


def _box(ax, x, y, w, h, node, size):
    fill = SHARED if node.ref_count > 0 else "white"
    ax.add_patch(
        FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=0.12", fc=fill, ec="0.3")
    )


def _leaves(node: RadixNodeView) -> int:
    return max(1, sum(_leaves(c) for c in node.children))


def _draw_tree(ax, root, x0, top, size, per_line):
    """Top-down tree with its root (a dot) at the top; returns the width used."""
    w, h, dx, dy = 2.4, 1.1, 0.5, 1.0

    def place(node, left, depth):
        """Draw ``node``'s children under it; returns the x of node's centre."""
        y = top - depth * (h + dy)
        centres, at = [], left
        for child in node.children:
            centres.append((child, place(child, at, depth + 1)))
            at += _leaves(child) * (w + dx)
        cx = (centres[0][1] + centres[-1][1]) / 2 if centres else left + w / 2
        for child, ccx in centres:
            cy = top - (depth + 1) * (h + dy)
            ax.plot([cx, ccx], [y - 0.42 if depth else top - 0.1, cy + h], color="0.4", lw=1)
            _box(ax, ccx - w / 2, cy, w, h, child, size)
            center_text(ax, ccx, cy + h / 2, _label(child, per_line), fontsize=size)
            center_text(ax, ccx, cy - 0.22, _note(child), fontsize=size - 1, color="0.3")
        return cx

    cx = place(root, x0, 0)
    ax.plot([cx], [top], "o", color="0.3", ms=5)
    return _leaves(root) * (w + dx)


def _depth(node):
    return 1 + max((_depth(c) for c in node.children), default=0)


def _count(node):
    return 1 + sum(_count(c) for c in node.children)


def radix_tree_figure(
    snapshots: Sequence[tuple[str, RadixNodeView]],
    *,
    fontsize: float = FONT_SIZE,
    phone: bool = False,
) -> Figure:
    """Radix trees side by side: ``snapshots`` are ``(title, tree)`` pairs, a tree being
    :meth:`RadixCache.tree() <kvcourse.blocks.radix_cache.RadixCache.tree>`. Each node is a box
    with its tokens (four to a line), under it its slots and reference count; a referenced node
    is shaded. ``phone=True`` draws the snapshots one under another, each tree as an outline
    (a node a row, children indented under their parent, tokens on one line)."""
    if not snapshots:
        raise ValueError("snapshots must list at least one (title, tree) pair")
    for title, tree in snapshots:
        if not isinstance(tree, RadixNodeView):
            raise TypeError(f"{title!r}: a snapshot is RadixCache.tree(), got {tree!r}")
    if phone:
        return _outline_figure(snapshots)
    size = fontsize - 1
    h, dy = 1.1, 1.0
    tall = max(_depth(t) for _, t in snapshots) - 1
    top = tall * (h + dy) + 0.3
    fig = Figure(figsize=(8.0, 3.0), layout="constrained")
    ax = fig.subplots()
    x = 0.0
    for title, tree in snapshots:
        used = _draw_tree(ax, tree, x, top, size, 4)
        center_text(ax, x + used / 2, top + 0.75, title, fontsize=fontsize, weight="bold")
        x += used + 0.8
    finish_diagram(ax, (-0.3, x - 0.5), (-0.7, top + 1.2))
    fig.set_size_inches(8.0, 8.0 * (top + 1.9) / (x + 0.3) + 0.2)
    return fig


def _outline_figure(snapshots):
    size = PHONE_MIN_FONT_PT
    row, indent, w = 1.0, 0.9, 7.4
    rows = sum(_count(t) - 1 + 1.3 for _, t in snapshots)
    fig = phone_figure()
    ax = fig.subplots()
    y = rows * row

    def draw(node, depth, parent_y):
        nonlocal y
        for child in node.children:
            y -= row
            x = depth * indent
            ax.plot(
                [x - indent * 0.6, x - indent * 0.6, x],
                [parent_y, y + 0.4, y + 0.4],
                color="0.4",
                lw=1,
            )
            _box(ax, x, y + 0.05, w - x, 0.75, child, size)
            words = " ".join(map(str, child.tokens))
            ax.text(x + 0.15, y + 0.42, words, ha="left", va="center", fontsize=size)
            ax.text(
                w - 0.12,
                y + 0.42,
                _note(child),
                ha="right",
                va="center",
                fontsize=size,
                color="0.3",
            )
            draw(child, depth + 1, y + 0.05)

    for title, tree in snapshots:
        y -= row * 0.95
        ax.text(0.0, y + 0.35, title, ha="left", va="center", fontsize=size + 0.5, weight="bold")
        ax.plot([0.3], [y - 0.05], "o", color="0.3", ms=4)
        draw(tree, 1, y - 0.05)
        y -= row * 0.35
    finish_diagram(ax, (-0.1, w + 0.1), (y - 0.1, rows * row + 0.1))
    return fig


def _fraction(x: float) -> str:
    """A capacity share as a tick label: 0.125 → 1/8, 1.0 → 1, 3.0 → 3."""
    f = Fraction(x).limit_denominator(64)
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"


def radix_hit_rate_plot(
    curves: Mapping[str, Mapping[str, Sequence[tuple[float, float]]]],
    *,
    fontsize: float = FONT_SIZE,
    xlabel: str = "cache capacity (share of the workload's distinct tokens)",
) -> Figure:
    """One panel per workload, two to a row: ``curves[workload][design]`` lists ``(capacity,
    hit rate)`` points, capacity on a log axis, hit rate the share of prompt tokens reused. A
    design named in :data:`DESIGN_STYLES` gets its style; others the next colour."""
    if not curves:
        raise ValueError("curves must hold at least one workload")
    n = len(curves)
    cols = min(2, n)
    rows = -(-n // cols)
    fig = Figure(figsize=(8.0, 3.0 * rows + 0.6), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=True)
    handles = {}
    for ax, (workload, designs) in zip(axes.flat, curves.items(), strict=False):
        for design, points in designs.items():
            color, ls, marker = DESIGN_STYLES.get(design, ("0.5", "-", "x"))
            xs, ys = zip(*points, strict=True)
            (line,) = ax.plot(xs, ys, ls=ls, marker=marker, ms=4, color=color, label=design)
            handles.setdefault(design, line)
        ax.set_title(workload, fontsize=fontsize)
        ax.set_xscale("log", base=2)
        ticks = sorted({x for points in designs.values() for x, _ in points})
        ax.set_xticks(ticks, labels=[_fraction(x) for x in ticks])
        ax.minorticks_off()
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
        despine(ax)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    fig.supxlabel(xlabel, fontsize=fontsize - 1)
    fig.supylabel("hit rate (share of prompt tokens)", fontsize=fontsize - 1)
    fig.legend(
        handles=list(handles.values()),
        loc="outside upper center",
        ncols=len(handles),
        frameon=False,
        fontsize=fontsize - 1.5,
    )
    return fig
