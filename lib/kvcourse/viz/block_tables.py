"""Drawings the book and the assignments share: block tables, block-size waste, the vLLM layout.

Everything here draws with matplotlib on an ``Axes`` you pass in, or returns a ``Figure`` built
without pyplot (so a loop of frames leaves no open pyplot windows behind and a notebook shows a
figure only when it is displayed or glued).

* :func:`draw_block_table`: one sequence's logical KV blocks, its block table, arrows into the
  physical block pool (blocks held by other requests shaded, free blocks white), as in Fig. 6 of
  the vLLM paper;
* :func:`block_table_frames` records a real :class:`~kvcourse.blocks.table.BlockTable` after
  prefill and after each decode step, :func:`four_score_frames` the lecture's example, and
  :func:`block_table_frames_figure` / :func:`block_table_animation` render the frames for a static
  page (small multiples, or a ``FuncAnimation`` whose ``to_jshtml()`` needs no kernel);
  :mod:`kvcourse.viz.widgets` steps through the same frames in JupyterLab;
* :func:`block_size_waste` and :func:`block_size_waste_plot`: the share of allocated KV slots left
  empty in each sequence's last block, against the block size;
* :func:`draw_system_overview`: the scheduler, its block manager and the GPU workers (§4.5).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from matplotlib.animation import FuncAnimation
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch, Rectangle

from kvcourse.blocks.pool import BlockPool
from kvcourse.blocks.table import BlockTable, BlockTableEntry

__all__ = [
    "FOUR_SCORE_OUTPUT",
    "FOUR_SCORE_PROMPT",
    "FOUR_SCORE_TAKEN",
    "BlockTableArtists",
    "BlockTableFrame",
    "PoolState",
    "block_size_waste",
    "block_size_waste_plot",
    "block_table_animation",
    "block_table_frames",
    "block_table_frames_figure",
    "block_table_legend_handles",
    "draw_block_table",
    "draw_block_table_frame",
    "draw_system_overview",
    "four_score_frames",
]

#: The prompt of the vLLM paper's Fig. 6, one word per token.
FOUR_SCORE_PROMPT: tuple[str, ...] = ("Four", "score", "and", "seven", "years", "ago", "our")
#: The words the example goes on to generate, one per decode step.
FOUR_SCORE_OUTPUT: tuple[str, ...] = ("fathers", "brought", "forth", "on", "this")
#: Blocks of the example's 8-block pool that other requests already hold.
FOUR_SCORE_TAKEN: tuple[int, ...] = (0, 2, 3, 5, 6)

# Colours: this sequence blue, other requests grey, the step's changes orange.
_OURS = "#4C78A8"
_OURS_FILL = "#C9D9EC"
_OURS_EMPTY = "#EEF3F9"
_OTHERS = "#BDBDBD"
_NEW = "#E45756"
_NEW_TEXT = "#B22222"
_FONT = 11


# ---------------------------------------------------------------------------- state records


@dataclass(frozen=True)
class PoolState:
    """A frozen picture of a :class:`~kvcourse.blocks.pool.BlockPool`: its size and which block
    ids are in use. Frames keep one of these, since the pool itself keeps changing."""

    num_blocks: int
    block_size: int
    used: frozenset[int]

    @classmethod
    def of(cls, pool: BlockPool) -> PoolState:
        """The current state of ``pool``."""
        if not isinstance(pool, BlockPool):
            raise TypeError(f"pool must be a BlockPool, got {pool!r}")
        return cls(pool.num_blocks, pool.block_size, frozenset(pool.used_block_ids()))


@dataclass(frozen=True)
class BlockTableFrame:
    """One step of a sequence's life: its block table and the pool after the step.

    ``tokens`` are the token texts stored so far, ``new_tokens`` how many of them (the last ones)
    this step wrote, and ``new_blocks`` the physical blocks this step allocated.
    """

    label: str
    entries: tuple[BlockTableEntry, ...]
    pool: PoolState
    tokens: tuple[str, ...]
    new_tokens: int
    new_blocks: tuple[int, ...]

    @property
    def block_ids(self) -> tuple[int, ...]:
        """Physical blocks of the sequence, in logical order."""
        return tuple(e.physical for e in self.entries)

    @property
    def wasted_slots(self) -> int:
        """Allocated but empty slots (at most ``block_size − 1``)."""
        return len(self.entries) * self.pool.block_size - len(self.tokens)


@dataclass
class BlockTableArtists:
    """What :func:`draw_block_table` put on the axes, for tests and for later restyling."""

    logical_slots: list[Rectangle] = field(default_factory=list)
    physical_slots: list[Rectangle] = field(default_factory=list)
    arrows: list[FancyArrowPatch] = field(default_factory=list)


# ---------------------------------------------------------------------------- frames


def block_table_frames(
    prompt: Sequence[str],
    generated: Sequence[str] = (),
    *,
    block_size: int = 4,
    num_blocks: int = 8,
    taken: Iterable[int] = FOUR_SCORE_TAKEN,
) -> list[BlockTableFrame]:
    """Run a real block table through prefill of ``prompt`` and one decode step per word of
    ``generated``, and record a frame after each step.

    The pool has ``num_blocks`` blocks of ``block_size`` slots, of which ``taken`` are held by
    other requests from the start. Raises the pool's ``OutOfBlocksError`` if the sequence does
    not fit.
    """
    prompt = _check_words("prompt", prompt)
    generated = _check_words("generated", generated, allow_empty=True)
    if not prompt:
        raise ValueError("prompt must hold at least one token")
    pool = BlockPool(num_blocks, block_size, taken=taken)
    table = BlockTable(pool)
    frames = []
    tokens: list[str] = []
    steps = [(list(prompt), None)] + [([word], i + 1) for i, word in enumerate(generated)]
    for words, decode_step in steps:
        new_blocks = table.append(len(words))
        tokens.extend(words)
        if decode_step is None:
            what = f"Prefill: {len(words)} prompt tokens"
        else:
            what = f"Decode step {decode_step}: “{words[0]}”"
        if new_blocks:
            ids = ", ".join(str(b) for b in new_blocks)
            change = f"allocates block{'s' if len(new_blocks) > 1 else ''} {ids}"
        else:
            change = "fills a free slot, no new block"
        frames.append(
            BlockTableFrame(
                label=f"{what} → {change}",
                entries=tuple(table.entries()),
                pool=PoolState.of(pool),
                tokens=tuple(tokens),
                new_tokens=len(words),
                new_blocks=tuple(new_blocks),
            )
        )
    return frames


def four_score_frames(decode_steps: int = 2) -> list[BlockTableFrame]:
    """The lecture's example: "Four score and seven years ago our" (7 tokens), block size 4, an
    8-block pool with blocks 0, 2, 3, 5, 6 held by other requests; prefill, then
    ``decode_steps`` decode steps (at most 5)."""
    if not _is_int(decode_steps) or not 0 <= decode_steps <= len(FOUR_SCORE_OUTPUT):
        raise ValueError(
            f"decode_steps must be an int from 0 to {len(FOUR_SCORE_OUTPUT)}, got {decode_steps!r}"
        )
    return block_table_frames(FOUR_SCORE_PROMPT, FOUR_SCORE_OUTPUT[:decode_steps])


# ---------------------------------------------------------------------------- one block table


def block_table_legend_handles() -> list[Patch]:
    """Legend entries for :func:`draw_block_table`'s colours."""
    return [
        Patch(fc=_OURS_FILL, ec=_OURS, label="this sequence's token"),
        Patch(fc=_OURS_EMPTY, ec=_OURS, hatch="..", label="allocated, still empty"),
        Patch(fc=_OTHERS, ec="0.45", hatch="///", label="held by other requests"),
        Patch(fc="white", ec="0.45", label="free"),
        Patch(fc="white", ec=_NEW, lw=2.2, label="changed in this step"),
    ]


def draw_block_table(
    ax: Axes,
    table_or_entries: BlockTable | Sequence[BlockTableEntry],
    pool: BlockPool | PoolState,
    *,
    tokens: Sequence[str] | None = None,
    title: str | None = None,
    new_tokens: int = 0,
    new_blocks: Iterable[int] = (),
    legend: bool = False,
    fontsize: float = _FONT,
) -> BlockTableArtists:
    """Draw one sequence's logical blocks, its block table and the physical pool on ``ax``.

    Left to right: the logical KV blocks (with the token text in each filled slot when ``tokens``
    is given; token ``p`` sits in logical block ``p // B``, slot ``p % B``), the block table
    (physical block id and filled slots per row), arrows from each row to its physical block, and
    the pool's ``num_blocks`` physical blocks, where this sequence's blocks show its tokens, blocks
    used by others are shaded grey and free blocks are white. The last ``new_tokens`` tokens and
    the ``new_blocks`` are outlined in orange. Returns the slot rectangles and arrows it drew.
    """
    entries = _entries(table_or_entries)
    state = PoolState.of(pool) if isinstance(pool, BlockPool) else pool
    if not isinstance(state, PoolState):
        raise TypeError(f"pool must be a BlockPool or a PoolState, got {pool!r}")
    size = state.block_size
    num_tokens = sum(e.filled for e in entries)
    if tokens is not None:
        tokens = [str(t) for t in tokens]
        if len(tokens) != num_tokens:
            raise ValueError(
                f"tokens has {len(tokens)} entries but the block table holds {num_tokens} tokens"
            )
    ours = {e.physical: e for e in entries}
    for e in entries:
        if not 0 <= e.physical < state.num_blocks:
            raise ValueError(
                f"block table row {e.logical} points at block {e.physical}, outside the pool's "
                f"blocks 0..{state.num_blocks - 1}"
            )
    new_blocks = set(new_blocks)
    new_from = num_tokens - new_tokens

    # Geometry in data units (the axes get an equal aspect ratio).
    w, h, gap = 1.6, 0.62, 0.14
    pitch = h + gap
    x_log = 0.55  # logical slots start here; their row numbers sit left of it
    x_tab = x_log + size * w + 0.35  # the block table: physical id, filled
    tab_w = 1.45
    x_phys = x_tab + 2 * tab_w + 1.0  # the pool's slots
    x_end = x_phys + size * w
    top = 0.0
    n_rows = max(state.num_blocks, len(entries))
    offset = ((state.num_blocks - len(entries)) // 2) * pitch if entries else 0.0
    row_y = [top - offset - i * pitch for i in range(len(entries))]  # top edge of each row
    phys_y = [top - b * pitch for b in range(state.num_blocks)]

    artists = BlockTableArtists()
    text_kw = {"ha": "center", "va": "center", "fontsize": fontsize}

    def slot_text(position: int) -> str:
        return "" if tokens is None else tokens[position]

    # Logical blocks.
    for i, e in enumerate(entries):
        y = row_y[i] - h
        ax.text(x_log - 0.28, y + h / 2, str(e.logical), color="0.3", **text_kw)
        for s in range(size):
            position = e.logical * size + s
            filled = s < e.filled
            is_new = filled and position >= new_from
            rect = Rectangle(
                (x_log + s * w, y),
                w,
                h,
                fc=_OURS_FILL if filled else _OURS_EMPTY,
                ec=_NEW if is_new else _OURS,
                lw=2.2 if is_new else 1.0,
                hatch=None if filled else "..",
                zorder=2 if is_new else 1,
            )
            ax.add_patch(rect)
            artists.logical_slots.append(rect)
            if filled:
                ax.text(
                    x_log + s * w + w / 2,
                    y + h / 2,
                    slot_text(position),
                    color=_NEW_TEXT if is_new else "black",
                    **text_kw,
                )

    # The block table.
    for i, e in enumerate(entries):
        y = row_y[i] - h
        # Which cells this step changed: the id of a new block, the count of a row it wrote to.
        changed = (
            e.physical in new_blocks,
            new_tokens > 0 and e.logical * size + e.filled > new_from,
        )
        for c, value in enumerate((e.physical, e.filled)):
            ax.add_patch(
                Rectangle(
                    (x_tab + c * tab_w, y),
                    tab_w,
                    h,
                    fc="white",
                    ec=_NEW if changed[c] else "0.35",
                    lw=2.2 if changed[c] else 1.0,
                    zorder=2 if changed[c] else 1,
                )
            )
            ax.text(
                x_tab + c * tab_w + tab_w / 2,
                y + h / 2,
                str(value),
                color=_NEW_TEXT if changed[c] else "black",
                **text_kw,
            )

    # The physical pool.
    for b in range(state.num_blocks):
        y = phys_y[b] - h
        entry = ours.get(b)
        taken = b in state.used and entry is None
        for s in range(size):
            if entry is not None:
                filled = s < entry.filled
                position = entry.logical * size + s
                is_new = filled and position >= new_from
                fc, hatch = (_OURS_FILL, None) if filled else (_OURS_EMPTY, "..")
                ec, lw = (_NEW, 2.2) if is_new else (_OURS, 1.0)
            else:
                filled = is_new = False
                fc, hatch = (_OTHERS, "///") if taken else ("white", None)
                ec, lw = "0.45", 1.0
            rect = Rectangle(
                (x_phys + s * w, y),
                w,
                h,
                fc=fc,
                ec=ec,
                lw=lw,
                hatch=hatch,
                zorder=2 if is_new else 1,
            )
            ax.add_patch(rect)
            artists.physical_slots.append(rect)
            if entry is not None and filled:
                ax.text(
                    x_phys + s * w + w / 2,
                    y + h / 2,
                    slot_text(position),
                    color=_NEW_TEXT if is_new else "black",
                    **text_kw,
                )
        if b in new_blocks:
            ax.add_patch(Rectangle((x_phys, y), size * w, h, fc="none", ec=_NEW, lw=2.4, zorder=3))
        ax.text(x_end + 0.28, y + h / 2, str(b), color="0.3", **text_kw)

    # Arrows: block-table row → physical block.
    for i, e in enumerate(entries):
        start = (x_tab + 2 * tab_w, row_y[i] - h / 2)
        end = (x_phys, phys_y[e.physical] - h / 2)
        arrow = FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=13,
            lw=1.5,
            color=_NEW if e.physical in new_blocks else _OURS,
            shrinkA=1,
            shrinkB=1,
            zorder=4,
        )
        ax.add_patch(arrow)
        artists.arrows.append(arrow)

    # Column headings.
    head_y = top + 0.55
    sub_kw = {"ha": "center", "va": "bottom", "fontsize": fontsize, "color": "0.3"}
    ax.text(x_log + size * w / 2, head_y, "logical KV blocks", weight="bold", **sub_kw)
    ax.text(x_tab + tab_w, head_y + 0.42, "block table", weight="bold", **sub_kw)
    ax.text(x_tab + tab_w / 2, head_y - 0.05, "physical", **sub_kw)
    ax.text(x_tab + 1.5 * tab_w, head_y - 0.05, "filled", **sub_kw)
    ax.text(x_phys + size * w / 2, head_y, "physical KV blocks", weight="bold", **sub_kw)
    if not entries:
        ax.text(x_log + size * w / 2, top - h / 2, "(no blocks yet)", color="0.4", **text_kw)

    ax.set_xlim(0.0, x_end + 0.55)
    ax.set_ylim(top - n_rows * pitch - 0.05, head_y + 0.95)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=fontsize + 1, loc="left", pad=4)
    if legend:
        ax.legend(
            handles=block_table_legend_handles(),
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            ncols=3,
            frameon=False,
            fontsize=fontsize,
        )
    return artists


def draw_block_table_frame(
    ax: Axes, frame: BlockTableFrame, *, legend: bool = False, fontsize: float = _FONT
) -> BlockTableArtists:
    """:func:`draw_block_table` for one recorded frame, titled with the frame's label."""
    return draw_block_table(
        ax,
        frame.entries,
        frame.pool,
        tokens=frame.tokens,
        title=frame.label,
        new_tokens=frame.new_tokens,
        new_blocks=frame.new_blocks,
        legend=legend,
        fontsize=fontsize,
    )


def block_table_frames_figure(
    frames: Sequence[BlockTableFrame],
    *,
    ncols: int = 1,
    panel_size: tuple[float, float] = (8.0, 3.5),
    fontsize: float = _FONT,
) -> Figure:
    """All frames as small multiples, ``ncols`` per row, with one legend at the bottom: the static
    stand-in for a stepper on a rendered page."""
    frames = list(frames)
    if not frames or not all(isinstance(f, BlockTableFrame) for f in frames):
        raise ValueError("frames must be a non-empty list of BlockTableFrame")
    if not _is_int(ncols) or ncols < 1:
        raise ValueError(f"ncols must be a positive int, got {ncols!r}")
    ncols = min(ncols, len(frames))
    nrows = math.ceil(len(frames) / ncols)
    legend_h = 0.6
    fig = Figure(
        figsize=(panel_size[0] * ncols, panel_size[1] * nrows + legend_h), layout="constrained"
    )
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax, frame in zip(axes.flat, frames, strict=False):
        draw_block_table_frame(ax, frame, fontsize=fontsize)
    for ax in list(axes.flat)[len(frames) :]:
        ax.axis("off")
    fig.legend(
        handles=block_table_legend_handles(),
        loc="outside lower center",
        ncols=3,
        frameon=False,
        fontsize=fontsize,
    )
    return fig


def block_table_animation(
    frames: Sequence[BlockTableFrame],
    *,
    figsize: tuple[float, float] = (8.0, 3.6),
    interval_ms: int = 1500,
    fontsize: float = _FONT,
) -> FuncAnimation:
    """The frames as a matplotlib animation, one frame per step. ``.to_jshtml()`` turns it into a
    self-contained HTML player (play, pause, step) that works on a static page."""
    frames = list(frames)
    if not frames or not all(isinstance(f, BlockTableFrame) for f in frames):
        raise ValueError("frames must be a non-empty list of BlockTableFrame")
    fig = Figure(figsize=figsize, layout="constrained")
    ax = fig.add_subplot()

    def update(i: int) -> list:
        ax.clear()
        draw_block_table_frame(ax, frames[i], legend=True, fontsize=fontsize)
        return []

    update(0)
    return FuncAnimation(fig, update, frames=len(frames), interval=interval_ms, blit=False)


# ---------------------------------------------------------------------------- block-size waste


def block_size_waste(lengths: Sequence[int], block_sizes: Iterable[int]) -> dict[int, float]:
    """For each block size ``B``, the share of allocated KV slots that hold no token when every
    sequence of ``lengths`` tokens has ``ceil(length / B)`` blocks: ``Σ (allocated − length) /
    Σ allocated`` (memory-weighted, not a mean of per-sequence shares)."""
    lengths = [int(n) for n in lengths]
    if not lengths or any(n < 1 for n in lengths):
        raise ValueError("lengths must be a non-empty list of positive token counts")
    result = {}
    total = sum(lengths)
    for b in block_sizes:
        if not _is_int(b) or b < 1:
            raise ValueError(f"block sizes must be positive ints, got {b!r}")
        allocated = sum(-(-n // b) * b for n in lengths)
        result[int(b)] = (allocated - total) / allocated
    if not result:
        raise ValueError("block_sizes is empty")
    return result


def block_size_waste_plot(
    lengths: Sequence[int] | Mapping[str, Sequence[int]],
    block_sizes: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256),
    *,
    ax: Axes | None = None,
    mark: Iterable[int] = (16, 256),
    half_block_estimate: bool = True,
    reference_points: Mapping[int, float] | None = None,
    reference_label: str = "lecture",
    title: str | None = None,
) -> Axes:
    """Memory-weighted waste (:func:`block_size_waste`) against block size, log–log.

    ``lengths`` is one list of final sequence lengths or a mapping name → lengths (one curve
    each). With ``half_block_estimate`` a dashed line shows the estimate "the last block is half
    empty", ``(B / 2) / mean length``, per workload; ``mark`` labels the first workload's values
    at those block sizes; ``reference_points`` (block size → fraction) adds other published
    values as crosses; ``title`` goes above the axes. Block sizes whose waste is exactly 0
    (``B = 1``) cannot sit on a log axis and are left out. Returns the axes (a new figure's
    when ``ax`` is None).
    """
    workloads = dict(lengths) if isinstance(lengths, Mapping) else {"": lengths}
    if ax is None:
        ax = Figure(figsize=(8.0, 4.6), layout="constrained").add_subplot()
    colors = [_OURS, "#F58518", "#54A24B", "#B279A2"]
    sizes = sorted(int(b) for b in block_sizes)
    mark = set(mark)
    for k, (name, lens) in enumerate(workloads.items()):
        color = colors[k % len(colors)]
        waste = block_size_waste(lens, sizes)
        mean = sum(lens) / len(lens)
        shown = [b for b in sizes if waste[b] > 0]
        label = f"{name} (mean length {mean:.0f} tokens)" if name else "measured"
        ax.plot(shown, [100 * waste[b] for b in shown], "o-", color=color, lw=2, ms=5, label=label)
        if half_block_estimate:
            estimate = [100 * (b / 2) / mean for b in shown]
            ax.plot(
                shown,
                [min(e, 100) for e in estimate],
                "--",
                color=color,
                lw=1.3,
                alpha=0.8,
                label=f"half-block estimate (B/2) / {mean:.0f}",
            )
        if k == 0:
            for b in sorted(mark & set(shown)):
                ax.annotate(
                    f"{100 * waste[b]:.2f} %",
                    xy=(b, 100 * waste[b]),
                    xytext=(8, -14),
                    textcoords="offset points",
                    fontsize=_FONT,
                    color=color,
                    weight="bold",
                )
    if reference_points:
        pts = sorted(reference_points.items())
        ax.plot(
            [b for b, _ in pts],
            [100 * v for _, v in pts],
            "x",
            color="black",
            ms=9,
            mew=2,
            label=reference_label,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sizes[1:] if sizes and sizes[0] == 1 else sizes)
    ax.set_xticklabels([str(b) for b in (sizes[1:] if sizes and sizes[0] == 1 else sizes)])
    ax.yaxis.set_major_formatter(_PercentFormatter())
    ax.set_ylim(top=100)
    ax.set_xlabel("block size B (tokens per block)")
    ax.set_ylabel("allocated KV slots left empty (%)")
    ax.grid(True, which="major", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(loc="upper left", frameon=False, fontsize=_FONT)
    if title:
        ax.set_title(title, loc="left", fontsize=_FONT + 1)
    return ax


class _PercentFormatter:
    """Tick labels like 0.1 %, 1 %, 10 % on a log axis."""

    def __new__(cls):  # a FuncFormatter, built lazily to keep the import list short
        from matplotlib.ticker import FuncFormatter

        return FuncFormatter(lambda v, _pos: f"{v:g} %")


# ---------------------------------------------------------------------------- system overview


def draw_system_overview(
    ax: Axes, *, num_workers: int = 2, num_heads: int = 40, fontsize: float = 12
) -> None:
    """The vLLM layout (paper Fig. 4, §4.6): a central scheduler whose block manager keeps every
    sequence's block table, sending token ids and block tables to ``num_workers`` tensor-parallel
    GPU workers each step. Every worker uses the same block ids, and its physical blocks hold the
    K and V of its own ``num_heads / num_workers`` heads."""
    if not _is_int(num_workers) or num_workers < 1:
        raise ValueError(f"num_workers must be a positive int, got {num_workers!r}")
    if not _is_int(num_heads) or num_heads < num_workers or num_heads % num_workers:
        raise ValueError(
            f"num_heads ({num_heads!r}) must be a positive multiple of num_workers ({num_workers})"
        )

    def box(x, y, w, h, fc, ec, lw=1.4):
        ax.add_patch(
            FancyBboxPatch(
                (x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.15", fc=fc, ec=ec, lw=lw
            )
        )

    def arrow(start, end, color="0.25", style="-|>", ls="-"):
        ax.add_patch(
            FancyArrowPatch(
                start, end, arrowstyle=style, mutation_scale=16, lw=1.6, color=color, ls=ls
            )
        )

    worker_h, worker_gap = 1.9, 0.55
    height = num_workers * worker_h + (num_workers - 1) * worker_gap
    # The scheduler with its block manager, vertically centred on the workers.
    sx, sw, sh = 0.0, 5.4, 3.3
    sy = (height - sh) / 2
    box(sx, sy, sw, sh, "#F3F6FA", _OURS)
    ax.text(
        sx + sw / 2,
        sy + sh - 0.35,
        "Scheduler (CPU)",
        ha="center",
        va="center",
        fontsize=fontsize + 1,
        weight="bold",
    )
    ax.text(
        sx + sw / 2,
        sy + sh - 0.8,
        "picks each step's sequences",
        ha="center",
        va="center",
        fontsize=fontsize,
        color="0.3",
    )
    bx, bw, bh = sx + 0.25, sw - 0.5, 1.85
    by = sy + 0.3
    box(bx, by, bw, bh, "white", _OURS, lw=1.1)
    ax.text(
        bx + bw / 2,
        by + bh - 0.3,
        "block manager",
        ha="center",
        va="center",
        fontsize=fontsize,
        weight="bold",
        color=_OURS,
    )
    for k, line in enumerate(
        ("a block table per sequence", "free GPU and CPU blocks", "reference counts")
    ):
        ax.text(
            bx + bw / 2,
            by + bh - 0.75 - 0.42 * k,
            line,
            ha="center",
            va="center",
            fontsize=fontsize,
        )

    # The workers, one GPU each, right of a gap wide enough for the message labels.
    wx, ww = sx + sw + 3.0, 5.4
    per = num_heads // num_workers
    centres = []
    for i in range(num_workers):
        y = height - (i + 1) * worker_h - i * worker_gap
        centres.append(y + worker_h / 2)
        box(wx, y, ww, worker_h, "#F7F7F7", "0.35")
        ax.text(
            wx + ww / 2,
            y + worker_h - 0.35,
            f"GPU worker {i}",
            ha="center",
            va="center",
            fontsize=fontsize,
            weight="bold",
        )
        heads = f"heads {i * per}–{(i + 1) * per - 1}"
        ax.text(
            wx + ww / 2,
            y + worker_h - 0.85,
            f"model shard: {heads}",
            ha="center",
            va="center",
            fontsize=fontsize,
        )
        ax.text(
            wx + ww / 2,
            y + worker_h - 1.3,
            f"block b: K and V of {heads}",
            ha="center",
            va="center",
            fontsize=fontsize,
        )
    # Messages: token ids and block tables out to every worker, sampled tokens back from one.
    left, right = sx + sw + 0.08, wx - 0.08
    mid_x = (left + right) / 2
    for i, c in enumerate(centres):
        y = c + 0.3
        arrow((left, y), (right, y), color=_OURS)
        text = "token ids +\nblock tables" if i == 0 else "the same\nblock tables"
        ax.text(
            mid_x,
            y + 0.1,
            text,
            ha="center",
            va="bottom",
            fontsize=fontsize,
            color=_OURS,
            linespacing=1.1,
        )
    y = centres[0] - 0.3
    arrow((right, y), (left, y), color=_NEW)
    ax.text(
        mid_x,
        y - 0.12,
        "sampled\ntokens",
        ha="center",
        va="top",
        fontsize=fontsize,
        color=_NEW,
        linespacing=1.1,
    )
    if num_workers > 1:
        for a, b in zip(centres, centres[1:], strict=False):
            arrow(
                (wx + ww + 0.2, a - 0.35),
                (wx + ww + 0.2, b + 0.35),
                color="0.45",
                style="<|-|>",
                ls="--",
            )
        ax.text(
            wx + ww + 0.4,
            (centres[0] + centres[-1]) / 2,
            "all-reduce",
            ha="left",
            va="center",
            fontsize=fontsize,
            color="0.35",
            rotation=90,
        )
    ax.set_xlim(-0.1, wx + ww + 0.9)
    ax.set_ylim(-0.1, height + 0.1)
    ax.set_aspect("equal")
    ax.axis("off")


# ---------------------------------------------------------------------------- helpers


def _entries(table_or_entries: object) -> list[BlockTableEntry]:
    if isinstance(table_or_entries, BlockTable):
        return table_or_entries.entries()
    if isinstance(table_or_entries, (str, bytes)) or not isinstance(table_or_entries, Sequence):
        raise TypeError(
            f"expected a BlockTable or a list of BlockTableEntry, got {table_or_entries!r}"
        )
    entries = list(table_or_entries)
    if not all(isinstance(e, BlockTableEntry) for e in entries):
        raise TypeError("the entries must be BlockTableEntry rows (BlockTable.entries())")
    return entries


def _check_words(name: str, words: object, *, allow_empty: bool = False) -> list[str]:
    if isinstance(words, (str, bytes)) or not isinstance(words, Sequence):
        raise TypeError(f"{name} must be a list of token strings, got {words!r}")
    words = [str(w) for w in words]
    if not words and not allow_empty:
        raise ValueError(f"{name} must hold at least one token")
    return words


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
