"""Drawings for §3, "Where the memory went": contiguous arenas, the buddy walk-through, and where
the KV memory of a whole serving run goes.

Like :mod:`kvcourse.viz.block_tables`, everything draws on an ``Axes`` you pass in, or on a new ``Figure``
built without pyplot, so a page shows a figure only when it displays or glues it.

* :func:`draw_arena`: one contiguous KV arena with a few requests, every slot coloured by its kind
  (stored, reserved, internal fragmentation, external fragmentation, free): the vLLM paper's Fig. 3
  picture of the three kinds of waste, drawn from numbers;
* :func:`draw_buddy_walkthrough`: the steps of :func:`kvcourse.blocks.buddy.buddy_walkthrough` as rows of
  slots, one row per step, coloured by owner, with block boundaries drawn thick; a failed
  allocation outlines the free pieces that could not serve it;
* :func:`memory_breakdown_bars`: one stacked bar per policy of
  :mod:`kvcourse.serving`, the five kinds as memory-weighted shares;
* :func:`memory_timeline_plot`: the five kinds over simulated time for one policy;
* :func:`rate_sweep_plot`: concurrency and finished requests per second against the request rate.

The colours of the five kinds are the same in every figure (:data:`KIND_COLORS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Text
from matplotlib.transforms import offset_copy

from kvcourse.blocks.buddy import WalkthroughStep
from kvcourse.serving.records import KINDS, AccountingResult

__all__ = [
    "KIND_COLORS",
    "KIND_LABELS",
    "OWNER_COLORS",
    "POLICY_COLORS",
    "ArenaArtists",
    "ArenaRun",
    "WalkthroughArtists",
    "arena_kinds",
    "draw_arena",
    "draw_buddy_walkthrough",
    "kind_legend_handles",
    "memory_breakdown_bars",
    "memory_timeline_plot",
    "rate_sweep_plot",
]

#: One colour per kind of KV memory, in every figure of §3.
KIND_COLORS: dict[str, str] = {
    "stored": "#4C78A8",
    "reserved": "#9ECAE9",
    "internal": "#F58518",
    "external": "#E45756",
    "free": "#EFEFEF",
}
#: How the legends name the five kinds.
KIND_LABELS: dict[str, str] = {
    "stored": "stored tokens",
    "reserved": "reserved for future tokens",
    "internal": "internal fragmentation",
    "external": "external fragmentation",
    "free": "free",
}
#: Kinds whose colour is dark enough for white text on it.
_DARK_KINDS = frozenset({"stored", "external"})
#: The three policies as the vLLM paper colours them (Orca Max red, Orca Oracle green, vLLM blue).
POLICY_COLORS: dict[str, str] = {"Max": "#D62728", "Oracle": "#2CA02C", "Paged": "#1F77B4"}
#: Owners of the walk-through's blocks, in order of appearance.
OWNER_COLORS: tuple[str, ...] = ("#4C78A8", "#72B7B2", "#B279A2", "#EECA3B", "#9D755D", "#FF9DA6")

_FONT = 11
_FAIL = "#C0392B"
_EDGE = "0.2"


def kind_legend_handles(kinds: Sequence[str] = KINDS) -> list[Patch]:
    """Legend patches for ``kinds`` (default: all five, in :data:`KINDS` order)."""
    unknown = [k for k in kinds if k not in KIND_COLORS]
    if unknown:
        raise ValueError(f"unknown kinds {unknown}; the kinds are {list(KINDS)}")
    return [Patch(fc=KIND_COLORS[k], ec="0.4", lw=0.6, label=KIND_LABELS[k]) for k in kinds]


# ---------------------------------------------------------------------------- one arena


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
            value = getattr(self, attr)
            if not _is_int(value) or value < 0:
                raise ValueError(
                    f"ArenaRun {self.name!r}: {attr} must be an int >= 0, got {value!r}"
                )
        if not 0 < self.size or not 0 <= self.stored <= self.final <= self.size:
            raise ValueError(
                f"ArenaRun {self.name!r}: need 0 <= stored <= final <= size and size > 0, got "
                f"stored {self.stored}, final {self.final}, size {self.size}"
            )


def arena_kinds(
    runs: Sequence[ArenaRun], num_slots: int, *, waiting: int | None = None
) -> list[str]:
    """The kind of every slot of an arena of ``num_slots`` slots holding ``runs``.

    Slots outside every run are ``"external"`` when a request of ``waiting`` slots is refused
    although the free slots add up to at least ``waiting`` (no free gap is long enough), else
    ``"free"`` — the simulator's definition (:mod:`kvcourse.serving`).
    """
    if not _is_int(num_slots) or num_slots <= 0:
        raise ValueError(f"num_slots must be a positive int, got {num_slots!r}")
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


@dataclass
class ArenaArtists:
    """What :func:`draw_arena` drew: one rectangle per slot, one outline per run."""

    slots: list[Rectangle] = field(default_factory=list)
    outlines: list[Rectangle] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)


def draw_arena(
    ax: Axes,
    runs: Sequence[ArenaRun],
    num_slots: int,
    *,
    waiting: tuple[str, int] | None = None,
    legend: bool = True,
    fontsize: float = _FONT,
) -> ArenaArtists:
    """One contiguous arena: each slot coloured by its kind (:func:`arena_kinds`), each run
    outlined and named above, each free gap labelled with its size. ``waiting = (name, slots)``
    adds a request that asks for ``slots`` contiguous slots, drawn as a bar of that length to the
    right with the verdict; the free slots count as external fragmentation when it is refused
    although they would be enough."""
    need = None
    if waiting is not None:
        if (
            not isinstance(waiting, tuple)
            or len(waiting) != 2
            or not _is_int(waiting[1])
            or waiting[1] <= 0
        ):
            raise ValueError(f"waiting must be (name, slots) with slots > 0, got {waiting!r}")
        need = waiting[1]
    kinds = arena_kinds(runs, num_slots, waiting=need)
    artists = ArenaArtists()
    h = 1.0
    for i, kind in enumerate(kinds):
        rect = Rectangle((i, 0), 1, h, fc=KIND_COLORS[kind], ec="white", lw=0.8, zorder=1)
        ax.add_patch(rect)
        artists.slots.append(rect)
    label_kw = {"ha": "center", "va": "bottom", "fontsize": fontsize}
    for run in runs:
        box = Rectangle((run.offset, 0), run.size, h, fc="none", ec=_EDGE, lw=2.0, zorder=3)
        ax.add_patch(box)
        artists.outlines.append(box)
        text = f"{run.name}: {run.size} slots" if run.size >= 6 else run.name
        artists.texts.append(
            ax.text(run.offset + run.size / 2, h + 0.2, text, weight="bold", **label_kw)
        )
    allocated = [k not in ("free", "external") for k in kinds]
    gaps = _gaps([not a for a in allocated])
    gap_color = KIND_COLORS["external"] if kinds and "external" in kinds else "0.35"
    for start, size in gaps:
        box = Rectangle((start, 0), size, h, fc="none", ec=gap_color, lw=1.4, ls="--", zorder=3)
        ax.add_patch(box)
        artists.outlines.append(box)
        artists.texts.append(
            ax.text(start + size / 2, h + 0.2, f"gap {size}", color=gap_color, **label_kw)
        )
    # Offsets under the row, every 4 slots.
    step = 4 if num_slots <= 64 else max(4, 1 << (num_slots // 16).bit_length())
    for x in range(0, num_slots + 1, step):
        ax.text(x, -0.15, str(x), ha="center", va="top", fontsize=fontsize - 2, color="0.4")
    right = num_slots
    if need is not None:
        name = waiting[0]
        x0 = num_slots + 2.0
        refused = need > max((size for _, size in gaps), default=0)
        color = _FAIL if refused else "0.2"
        bar = Rectangle((x0, 0), need, h, fc="white", ec=color, lw=1.6, ls="--", zorder=3)
        ax.add_patch(bar)
        artists.outlines.append(bar)
        artists.texts.append(
            ax.text(x0 + need / 2, h + 0.2, f"{name} waits", color=color, weight="bold", **label_kw)
        )
        artists.texts.append(
            ax.text(
                x0 + need / 2,
                h / 2,
                f"needs {need}",
                ha="center",
                va="center",
                fontsize=fontsize - 1,
                color=color,
            )
        )
        right = x0 + need
    ax.set_xlim(-0.5, right + 0.5)
    ax.set_ylim(-1.0 if not legend else -1.2, h + 1.0)
    ax.set_aspect("equal")
    ax.axis("off")
    if legend:
        ax.legend(
            handles=kind_legend_handles(),
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            ncols=3,
            frameon=False,
            fontsize=fontsize - 1,
        )
    return artists


# ---------------------------------------------------------------------------- the walk-through


@dataclass
class WalkthroughArtists:
    """What :func:`draw_buddy_walkthrough` drew: ``slots[i]`` are the slot rectangles of row ``i``,
    ``blocks[i]`` its block outlines, ``failed_pieces[i]`` the free blocks outlined because row
    ``i``'s allocation failed, ``labels`` the step labels on the left, ``notes`` the verdicts."""

    slots: list[list[Rectangle]] = field(default_factory=list)
    blocks: list[list[Rectangle]] = field(default_factory=list)
    failed_pieces: list[list[Rectangle]] = field(default_factory=list)
    labels: list[Text] = field(default_factory=list)
    notes: list[Text] = field(default_factory=list)


def draw_buddy_walkthrough(
    steps: Sequence[WalkthroughStep],
    *,
    ax: Axes | None = None,
    fontsize: float = _FONT,
) -> WalkthroughArtists:
    """The arena after each step of a walk-through (:func:`kvcourse.blocks.buddy.buddy_walkthrough`),
    one row per step, top to bottom.

    Slots are coloured by the request that owns their block (free slots white); every block, free
    or allocated, is outlined thick, so the splits and merges show; slots a request was given but
    did not ask for (rounding up) are hatched. Left of each row: the step; right: what came of it.
    A failed allocation draws its label and verdict in red and outlines the free blocks in red:
    enough slots in total, but no block large enough.

    With ``ax`` None a new figure sized to the rows is made (``artists.labels[0].figure``).
    """
    steps = list(steps)
    if not steps or not all(isinstance(s, WalkthroughStep) for s in steps):
        raise ValueError("steps must be a non-empty list of WalkthroughStep (buddy_walkthrough())")
    num_slots = sum(size for _, size, _ in steps[0].blocks)
    if any(sum(size for _, size, _ in s.blocks) != num_slots for s in steps):
        raise ValueError("every step must cover the same arena")
    label_w, note_w, pitch, h = 6.5, 12.5, 1.35, 0.9
    if ax is None:
        width = label_w + num_slots + note_w
        # About 0.22 inch per slot: the figure's natural width is then close to a book
        # page's text width, so the labels are drawn at about their nominal size. The height
        # has room to spare (the aspect is fixed; a tight bounding box trims the rest).
        fig = Figure(
            figsize=(0.22 * width, 0.22 * (pitch * len(steps) + 3.0)), layout="constrained"
        )
        ax = fig.add_subplot()
    # Colours by owner, in order of first appearance; what each owner asked for.
    colors: dict[str, str] = {}
    asked: dict[str, int] = {}
    for s in steps:
        for _, _, owner in s.blocks:
            if owner is not None and owner not in colors:
                colors[owner] = OWNER_COLORS[len(colors) % len(OWNER_COLORS)]
    artists = WalkthroughArtists()
    previous: WalkthroughStep | None = None
    for row, s in enumerate(steps):
        y = -row * pitch
        failed = s.action == "alloc" and not s.ok
        if s.action == "alloc" and s.ok:
            asked[s.name] = s.slots
        row_slots, row_blocks, row_failed = [], [], []
        for offset, size, owner in s.blocks:
            fc = "white" if owner is None else colors[owner]
            used = size if owner is None else min(size, asked.get(owner, size))
            for i in range(size):
                hatched = owner is not None and i >= used
                rect = Rectangle(
                    (offset + i, y),
                    1,
                    h,
                    fc="white" if hatched else fc,
                    ec=fc if hatched else "0.75",
                    hatch="////" if hatched else None,
                    lw=0.6,
                    zorder=1,
                )
                ax.add_patch(rect)
                row_slots.append(rect)
            edge = _FAIL if failed and owner is None else _EDGE
            outline = Rectangle(
                (offset, y),
                size,
                h,
                fc="none",
                ec=edge,
                lw=2.4 if failed and owner is None else 1.8,
                ls="--" if failed and owner is None else "-",
                zorder=3,
            )
            ax.add_patch(outline)
            row_blocks.append(outline)
            if failed and owner is None:
                row_failed.append(outline)
            text = owner if owner is not None else str(size)
            ax.text(
                offset + (used if owner is not None else size) / 2,
                y + h / 2,
                text,
                ha="center",
                va="center",
                fontsize=fontsize if owner is not None else fontsize - 1,
                color=_text_on(fc) if owner is not None else "0.45",
                weight="bold" if owner is not None else "normal",
                bbox={"fc": fc, "ec": "none", "pad": 1.0},
                zorder=4,
            )
        artists.slots.append(row_slots)
        artists.blocks.append(row_blocks)
        artists.failed_pieces.append(row_failed)
        color = _FAIL if failed else "black"
        artists.labels.append(
            ax.text(
                -0.6,
                y + h / 2,
                _step_label(s),
                ha="right",
                va="center",
                fontsize=fontsize,
                color=color,
                weight="bold" if failed else "normal",
            )
        )
        artists.notes.append(
            ax.text(
                num_slots + 0.6,
                y + h / 2,
                _step_note(s, previous),
                ha="left",
                va="center",
                fontsize=fontsize - 1,
                color=color,
            )
        )
        previous = s
    step = 4 if num_slots <= 64 else num_slots // 8
    for x in range(0, num_slots + 1, step):
        ax.text(x, h + 0.25, str(x), ha="center", va="bottom", fontsize=fontsize - 2, color="0.4")
    ax.text(num_slots / 2, h + 0.85, "slot offset", ha="center", va="bottom", fontsize=fontsize - 1)
    ax.set_xlim(-label_w, num_slots + note_w)
    ax.set_ylim(-(len(steps) - 1) * pitch - 0.2, h + 1.5)
    ax.set_aspect("equal")
    ax.axis("off")
    return artists


def _step_label(s: WalkthroughStep) -> str:
    if s.action == "start":
        return "start"
    if s.action == "free":
        return f"{s.name} frees"
    mark = "✓" if s.ok else "✗"
    return f"{s.name} asks {s.slots} {mark}"


def _step_note(s: WalkthroughStep, previous: WalkthroughStep | None) -> str:
    free = sorted((size for _, size, owner in s.blocks if owner is None), reverse=True)
    pieces = " + ".join(str(n) for n in free) or "none"
    if s.action == "start":
        return f"one free block of {s.free_slots}"
    if s.action == "alloc" and s.ok:
        size = next(size for off, size, owner in s.blocks if owner == s.name)
        got = f"gets {size} at {s.offset}"
        if size > s.slots:
            got += f", {size - s.slots} unused"
        return f"{got}; free {pieces}"
    if s.action == "alloc":
        need = 1 << (s.slots - 1).bit_length()
        return f"needs {need}; free {pieces}"
    merged = next(
        size for off, size, owner in s.blocks if owner is None and off <= s.offset < off + size
    )
    before = None
    if previous is not None:
        before = next(
            (size for off, size, owner in previous.blocks if off == s.offset and owner == s.name),
            None,
        )
    if before is not None and merged > before:
        return f"merges into {merged}; free {pieces}"
    return f"buddy in use, no merge; free {pieces}"


# ---------------------------------------------------------------------------- a serving run


def _as_results(results: object) -> list[AccountingResult]:
    if isinstance(results, Mapping):
        results = list(results.values())
    if isinstance(results, (str, bytes)) or not isinstance(results, Sequence) or not results:
        raise ValueError(
            "results must be a non-empty dict or list of AccountingResult, such as what "
            "a100_accounting() returns"
        )
    results = list(results)
    if not all(isinstance(r, AccountingResult) for r in results):
        raise TypeError("results must contain only AccountingResult records")
    return results


def memory_breakdown_bars(
    results: Mapping[str, AccountingResult] | Sequence[AccountingResult],
    *,
    ax: Axes | None = None,
    reference: Mapping[str, float] | None = None,
    reference_label: str = "reference",
    show_running: bool = True,
    min_label: float = 0.04,
    title: str | None = None,
    fontsize: float = _FONT,
) -> Axes:
    """Where the KV memory went: one horizontal bar per result, top to bottom, split into the five
    kinds (memory-weighted shares, :class:`~kvcourse.serving.MemoryShares`).

    Segments of at least ``min_label`` are labelled with their percentage. ``reference`` (policy
    name → share of memory holding tokens, e.g. the lecture's) draws a black tick on that bar;
    ``show_running`` adds each policy's mean number of running requests under its name.
    Returns the axes (a new figure's when ``ax`` is None).
    """
    results = _as_results(results)
    if ax is None:
        ax = Figure(figsize=(8.0, 1.2 + 0.9 * len(results)), layout="constrained").add_subplot()
    ys = np.arange(len(results))[::-1].astype(float)
    lefts = np.zeros(len(results))
    for kind in KINDS:
        widths = np.array([100 * getattr(r.shares, kind) for r in results])
        ax.barh(
            ys,
            widths,
            left=lefts,
            height=0.62,
            color=KIND_COLORS[kind],
            edgecolor="white",
            linewidth=0.8,
            label=KIND_LABELS[kind],
        )
        for y, left, w in zip(ys, lefts, widths, strict=True):
            if w >= 100 * min_label:
                ax.text(
                    left + w / 2,
                    y,
                    f"{w:.0f}\u00a0%",
                    ha="center",
                    va="center",
                    fontsize=fontsize,
                    color="white" if kind in _DARK_KINDS else "black",
                )
        lefts += widths
    if reference:
        first = True
        for y, r in zip(ys, results, strict=True):
            if r.policy in reference:
                x = 100 * float(reference[r.policy])
                ax.plot(
                    [x, x],
                    [y - 0.42, y + 0.42],
                    color="black",
                    lw=2.2,
                    solid_capstyle="butt",
                    label=reference_label if first else None,
                )
                first = False
    names = []
    for r in results:
        name = r.label
        if show_running:
            name += f"\n{r.mean_running:.1f} running"
        names.append(name)
    ax.set_yticks(ys, names, fontsize=fontsize)
    ax.set_xlim(0, 100)
    ax.set_ylim(-0.6, len(results) - 0.4)
    ax.set_xlabel("share of the KV token slots, averaged over iterations (%)", fontsize=fontsize)
    ax.tick_params(axis="y", length=0)
    ax.spines[["top", "right", "left"]].set_visible(False)
    # The legend hangs a fixed distance below the axes, clear of the tick labels and x label.
    below = offset_copy(ax.transAxes, fig=ax.figure, y=-3.6 * fontsize, units="points")
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        bbox_transform=below,
        ncols=3,
        frameon=False,
        fontsize=fontsize - 1,
    )
    if title:
        ax.set_title(title, loc="left", fontsize=fontsize + 1)
    return ax


def memory_timeline_plot(
    result: AccountingResult,
    *,
    ax: Axes | None = None,
    start_s: float | None = None,
    window_s: float = 60.0,
    bin_s: float = 0.5,
    title: str | None = None,
    fontsize: float = _FONT,
) -> Axes:
    """The five kinds of one run over simulated time, stacked, as shares of the arena.

    Shows ``window_s`` seconds from ``start_s`` (default: the start of the measured window), each
    point the mean over the iterations of a ``bin_s``-second bin — the same per-iteration average
    the shares use, over a short stretch. ``title`` defaults to the policy's label.
    """
    if not isinstance(result, AccountingResult):
        raise TypeError(f"result must be an AccountingResult, got {result!r}")
    if not window_s > 0 or not bin_s > 0:
        raise ValueError(f"window_s and bin_s must be positive, got {window_s!r}, {bin_s!r}")
    t = result.timeline.time_s
    start = float(t[0]) if start_s is None else float(start_s)
    keep = (t >= start) & (t < start + window_s)
    if not keep.any():
        raise ValueError(
            f"no measured iteration between {start:g} s and {start + window_s:g} s; the run "
            f"measured {t[0]:g} s to {t[-1]:g} s"
        )
    bins = ((t[keep] - start) // bin_s).astype(np.int64)
    count = np.bincount(bins)
    used = count > 0
    centres = (np.arange(len(count)) + 0.5)[used] * bin_s
    layers = []
    for kind in KINDS:
        sums = np.bincount(bins, weights=getattr(result.timeline, kind)[keep])
        layers.append(100 * sums[used] / count[used] / result.num_slots)
    if ax is None:
        ax = Figure(figsize=(8.0, 3.0), layout="constrained").add_subplot()
    ax.stackplot(
        centres,
        layers,
        colors=[KIND_COLORS[k] for k in KINDS],
        labels=[KIND_LABELS[k] for k in KINDS],
        linewidth=0,
    )
    ax.set_xlim(0, window_s)
    ax.set_ylim(0, 100)
    ax.set_ylabel("% of slots", fontsize=fontsize)
    ax.set_xlabel(f"seconds after {start:.0f} s", fontsize=fontsize)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(result.label if title is None else title, loc="left", fontsize=fontsize)
    return ax


def rate_sweep_plot(
    sweep: Mapping[float, Mapping[str, AccountingResult]],
    *,
    axes: Sequence[Axes] | None = None,
    title: str | None = None,
    mark: Sequence[float] = (),
    fontsize: float = _FONT,
) -> tuple[Axes, Axes]:
    """Concurrency and throughput against the request rate, one line per policy.

    ``sweep`` maps a request rate (requests per second) to the results of one workload at that
    rate. Left axes: mean running requests. Right axes: finished requests per second, with the
    dashed line "finished = arrived" — a policy on that line keeps up with the arrivals (it is
    rate-bound); below it, requests pile up in the queue. ``mark`` draws dotted verticals at
    chosen rates. Returns the two axes (of a new figure when ``axes`` is None).
    """
    if not isinstance(sweep, Mapping) or not sweep:
        raise ValueError("sweep must be a non-empty dict: rate -> {policy name: AccountingResult}")
    rates = sorted(float(r) for r in sweep)
    by_rate = {float(r): _as_results(res) for r, res in sweep.items()}
    if axes is None:
        fig = Figure(figsize=(8.0, 3.4), layout="constrained")
        axes = fig.subplots(1, 2)
    if len(axes) != 2:
        raise ValueError(f"axes must be two Axes, got {len(axes)}")
    left, right = axes
    names = [r.policy for r in by_rate[rates[0]]]
    for name in names:
        picked = [next(r for r in by_rate[rate] if r.policy == name) for rate in rates]
        color = POLICY_COLORS.get(name, "0.3")
        kw = {"color": color, "marker": "o", "ms": 4.5, "lw": 2, "label": picked[0].label}
        left.plot(rates, [r.mean_running for r in picked], **kw)
        right.plot(rates, [r.throughput_rps for r in picked], **kw)
    right.plot(
        [0, rates[-1]], [0, rates[-1]], ls="--", color="0.5", lw=1.2, label="finished = arrived"
    )
    for ax, ylabel in (
        (left, "requests running at once"),
        (right, "requests finished per second"),
    ):
        for rate in mark:
            ax.axvline(rate, color="0.6", lw=1, ls=":")
        ax.set_xlim(0, rates[-1] * 1.04)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("request rate (req/s)", fontsize=fontsize)
        ax.set_ylabel(ylabel, fontsize=fontsize)
        ax.grid(alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    right.legend(frameon=False, fontsize=fontsize - 2, loc="upper left")
    if title:
        left.set_title(title, loc="left", fontsize=fontsize + 1)
    return left, right


# ---------------------------------------------------------------------------- helpers


def _text_on(color: str) -> str:
    """Black or white, whichever reads better on ``color``."""
    r, g, b = to_rgb(color)
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.6 else "white"


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


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
