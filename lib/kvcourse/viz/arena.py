"""§3's contiguous KV arena drawn slot by slot, every slot coloured by its kind of use or waste
(the vLLM paper's Figure 3, drawn from numbers).

* :class:`ArenaRun` is one request's contiguous run of slots;
* :func:`arena_kinds` names the kind of every slot (stored, reserved, internal fragmentation,
  external fragmentation, free) as the simulator of :mod:`kvcourse.serving` defines them;
* :func:`draw_arena` draws the arena, its runs and gaps, and a request that waits for room.

The colours of the five kinds are :data:`~kvcourse.viz.style.KIND_COLORS`, the same in every
figure of §3.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from matplotlib.axes import Axes
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from kvcourse._checks import check_count, check_positive_int, is_int
from kvcourse.viz.phone import PHONE_MIN_FONT_PT, phone_font_size
from kvcourse.viz.style import (
    FAILED,
    FONT_SIZE,
    KIND_COLORS,
    OUTLINE,
    center_text,
    figure_legend,
    finish_diagram,
    kind_legend_handles,
    legend_below,
)

__all__ = ["ArenaArtists", "ArenaRun", "arena_kinds", "draw_arena"]


@dataclass(frozen=True)
class ArenaRun:
    """A contiguous run of ``size`` slots from ``offset`` held by request ``name``.

    The request has stored ``stored`` tokens so far and will hold ``final`` (prompt + output) when
    it finishes, so its slots ``[0, stored)`` are stored, ``[stored, final)`` reserved for its
    future tokens and ``[final, size)`` internal fragmentation (never used).
    """

    name: str
    offset: int
    size: int
    stored: int
    final: int

    def __post_init__(self) -> None:
        for attr in ("offset", "size", "stored", "final"):
            check_count(f"ArenaRun {self.name!r}: {attr}", getattr(self, attr))
        if not 0 < self.size or not 0 <= self.stored <= self.final <= self.size:
            raise ValueError(
                f"ArenaRun {self.name!r}: need 0 <= stored <= final <= size and size > 0, got "
                f"stored {self.stored}, final {self.final}, size {self.size}"
            )


@dataclass
class ArenaArtists:
    """What :func:`draw_arena` drew: one rectangle per slot, one outline per run."""

    slots: list[Rectangle] = field(default_factory=list)
    outlines: list[Rectangle] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)


def arena_kinds(
    runs: Sequence[ArenaRun], num_slots: int, *, waiting: int | None = None
) -> list[str]:
    """The kind of every slot of an arena of ``num_slots`` slots holding ``runs``.

    Slots outside every run are ``"external"`` when a request of ``waiting`` slots is refused
    although the free slots add up to at least ``waiting`` (no free gap is long enough), else
    ``"free"`` — the simulator's definition (:mod:`kvcourse.serving`).
    """
    num_slots = check_positive_int("num_slots", num_slots)
    kinds: list[str | None] = [None] * num_slots
    for run in runs:
        if not isinstance(run, ArenaRun):
            raise TypeError(f"runs must be ArenaRun records, got {run!r}")
        if run.offset + run.size > num_slots:
            raise ValueError(
                f"run {run.name!r} ({run.size} slots at {run.offset}) does not fit in "
                f"{num_slots} slots"
            )
        for i in range(run.size):
            if kinds[run.offset + i] is not None:
                raise ValueError(f"run {run.name!r} overlaps another run at slot {run.offset + i}")
            kind = "stored" if i < run.stored else "reserved" if i < run.final else "internal"
            kinds[run.offset + i] = kind
    gaps = _gaps([k is None for k in kinds])
    free_total = sum(size for _, size in gaps)
    largest = max((size for _, size in gaps), default=0)
    refused = waiting is not None and largest < waiting <= free_total
    unallocated = "external" if refused else "free"
    return [unallocated if k is None else k for k in kinds]


def draw_arena(
    ax: Axes,
    runs: Sequence[ArenaRun],
    num_slots: int,
    *,
    waiting: tuple[str, int] | None = None,
    legend: bool = True,
    fontsize: float = FONT_SIZE,
    phone: bool = False,
) -> ArenaArtists:
    """One contiguous arena: each slot coloured by its kind (:func:`arena_kinds`), each run
    outlined and named above, each free gap labelled with its size. ``waiting = (name, slots)``
    adds a request that asks for ``slots`` contiguous slots, drawn as a bar of that length to the
    right with the verdict; the free slots count as external fragmentation when it is refused
    although they would be enough.

    ``phone=True`` draws it for a phone's column (:func:`~kvcourse.viz.phone.phone_figure`): slots
    taller than wide, so that the narrow strip stays visible, text at
    :func:`~kvcourse.viz.phone.phone_font_size`, the legend the figure's."""
    need = None
    if waiting is not None:
        if (
            not isinstance(waiting, tuple)
            or len(waiting) != 2
            or not is_int(waiting[1])
            or waiting[1] <= 0
        ):
            raise ValueError(f"waiting must be (name, slots) with slots > 0, got {waiting!r}")
        need = waiting[1]
    kinds = arena_kinds(runs, num_slots, waiting=need)
    artists = ArenaArtists()
    font = phone_font_size if phone else float
    small = max(font(fontsize - 2), PHONE_MIN_FONT_PT) if phone else fontsize - 2
    h = 2.4 if phone else 1.0
    for i, kind in enumerate(kinds):
        rect = Rectangle((i, 0), 1, h, fc=KIND_COLORS[kind], ec="white", lw=0.8, zorder=1)
        ax.add_patch(rect)
        artists.slots.append(rect)

    def outline(x: float, width: float, color: str, lw: float, ls: str = "-") -> None:
        box = Rectangle((x, 0), width, h, fc="none", ec=color, lw=lw, ls=ls, zorder=3)
        ax.add_patch(box)
        artists.outlines.append(box)

    def label_above(x: float, text: str, **kwargs: object) -> None:
        artists.texts.append(
            ax.text(x, h + 0.2, text, ha="center", va="bottom", fontsize=font(fontsize), **kwargs)
        )

    for run in runs:
        outline(run.offset, run.size, OUTLINE, 2.0)
        text = f"{run.name}: {run.size} slots" if run.size >= 6 else run.name
        label_above(run.offset + run.size / 2, text, weight="bold")
    gaps = _gaps([k in ("free", "external") for k in kinds])
    gap_color = KIND_COLORS["external"] if "external" in kinds else "0.35"
    for start, size in gaps:
        outline(start, size, gap_color, 1.4, "--")
        label_above(start + size / 2, f"gap {size}", color=gap_color)
    # Offsets under the row, every 4 slots (fewer on a long arena).
    step = 4 if num_slots <= 64 else max(4, 1 << (num_slots // 16).bit_length())
    for x in range(0, num_slots + 1, step):
        ax.text(x, -0.15, str(x), ha="center", va="top", fontsize=small, color="0.4")
    right = num_slots
    if need is not None:
        x0 = num_slots + 2.0
        refused = need > max((size for _, size in gaps), default=0)
        color = FAILED if refused else "0.2"
        box = Rectangle((x0, 0), need, h, fc="white", ec=color, lw=1.6, ls="--", zorder=3)
        ax.add_patch(box)
        artists.outlines.append(box)
        label_above(x0 + need / 2, f"{waiting[0]} waits", color=color, weight="bold")
        artists.texts.append(
            center_text(
                ax, x0 + need / 2, h / 2, f"needs {need}", fontsize=font(fontsize - 1), color=color
            )
        )
        right = x0 + need
    if phone:  # room above and below for text of a fixed size in points, whatever the scale
        units = (right + 1.0) / (0.95 * ax.figure.get_figwidth() * 72)  # data units per point
        finish_diagram(ax, (-0.5, right + 0.5), (-1.6 * small * units, h + 1.8 * fontsize * units))
    else:
        finish_diagram(ax, (-0.5, right + 0.5), (-1.0 if not legend else -1.2, h + 1.0))
    if legend and phone:
        figure_legend(ax.figure, kind_legend_handles(), fontsize=font(fontsize - 1), ncols=2)
    elif legend:
        legend_below(ax, kind_legend_handles(), fontsize=fontsize - 1)
    return artists


def _gaps(free: Sequence[bool]) -> list[tuple[int, int]]:
    """Maximal runs of True in ``free`` as ``(start, length)``."""
    gaps, start = [], None
    for i, f in enumerate([*free, False]):
        if f and start is None:
            start = i
        elif not f and start is not None:
            gaps.append((start, i - start))
            start = None
    return gaps
