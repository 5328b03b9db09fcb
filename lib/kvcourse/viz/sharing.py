"""Drawings for §5 (sharing): block tables that point at shared blocks, copy-on-write, beam trees.

Like :mod:`kvcourse.viz.block_tables`, everything draws on an ``Axes`` you pass in or returns a ``Figure``
built without pyplot, and the colours follow that module (changes in red, this step's new tokens
outlined).

* :class:`SharingFrame` is a frozen picture of several sequences' block tables over one pool, with
  the pool's reference counts and the copy-on-writes of the step; :func:`sharing_frame` takes it
  from any block manager with the :class:`~kvcourse.blocks.sharing.ForkAppendFree` interface (yours too).
* :func:`fork_cow_frames` runs the vLLM paper's Fig. 8 example (a 7-token prompt, block size 4,
  forked into samples that each write one word) and records a frame after every operation;
  :func:`shared_prefix_frame` records requests whose tables point at one system prompt.
* :func:`draw_sharing_frame` draws one frame; :func:`sharing_frames_figure` stacks several.
* :func:`beam_edges` lists the fork tree of a beam search, marking the children that copy a
  block; :func:`draw_beam_tree` draws that tree and :func:`beam_search_figure` adds the memory
  held and the tokens copied under both schemes, step by step.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle

from kvcourse.blocks.pool import BlockPool
from kvcourse.blocks.sharing import ForkAppendFree, SharedBlockManager, check_manager
from kvcourse.viz.block_tables import FOUR_SCORE_PROMPT

__all__ = [
    "FORK_SAMPLE_WORDS",
    "SYSTEM_PROMPT",
    "SYSTEM_QUESTIONS",
    "BeamEdge",
    "SequenceSnapshot",
    "SharingArtists",
    "SharingFrame",
    "beam_edges",
    "beam_search_figure",
    "draw_beam_tree",
    "draw_sharing_frame",
    "fork_cow_frames",
    "sharing_frame",
    "sharing_frames_figure",
    "sharing_legend_handles",
    "shared_prefix_frame",
]

#: The words the samples of :func:`fork_cow_frames` write after the shared prompt.
FORK_SAMPLE_WORDS: tuple[str, ...] = ("fathers", "mothers", "elders")
#: An 8-token system prompt (two full blocks of 4) for :func:`shared_prefix_frame`.
SYSTEM_PROMPT: tuple[str, ...] = ("You", "are", "a", "helpful", "tutor", ".", "Be", "brief")
#: Each request's own tokens after the system prompt.
SYSTEM_QUESTIONS: tuple[tuple[str, ...], ...] = (
    ("What", "is", "KV", "?"),
    ("Why", "pages", "?"),
    ("Define", "CoW"),
)

# Colours shared with kvcourse.viz.block_tables: changes in red, neutral greys.
_NEW = "#E45756"
_NEW_TEXT = "#B22222"
_SHARED = "#FFE7A8"  # a physical block with more than one holder
_FREE_EDGE = "0.6"
_FONT = 11
#: One colour per sequence, in order (blue, green, purple, teal, brown, pink).
SEQUENCE_COLORS: tuple[str, ...] = (
    "#4C78A8",
    "#54A24B",
    "#B279A2",
    "#72B7B2",
    "#9D755D",
    "#FF9DA6",
)
_LIGHT = {  # the colours above, mixed with white for slot fills
    "#4C78A8": "#D2DEEC",
    "#54A24B": "#D4E8D1",
    "#B279A2": "#ECDDE8",
    "#72B7B2": "#DCEEED",
    "#9D755D": "#E9DFD8",
    "#FF9DA6": "#FFE5E8",
}


# ---------------------------------------------------------------------------- records


@dataclass(frozen=True)
class SequenceSnapshot:
    """One sequence in a :class:`SharingFrame`: its display ``name``, its physical blocks in
    logical order, the token texts it holds, how many of them (the last ones) this step wrote,
    and its colour."""

    name: str
    block_ids: tuple[int, ...]
    tokens: tuple[str, ...]
    new_tokens: int
    color: str


@dataclass(frozen=True)
class SharingFrame:
    """Several sequences' block tables over one pool, after one step.

    ``ref_counts[b]`` is block ``b``'s reference count; ``copies`` lists this step's copy-on-writes
    as ``(source, target)`` block pairs, ``new_blocks`` the blocks this step allocated (copies
    included) and ``changed_refs`` the blocks whose count this step changed.
    """

    label: str
    sequences: tuple[SequenceSnapshot, ...]
    block_size: int
    ref_counts: tuple[int, ...]
    copies: tuple[tuple[int, int], ...] = ()
    new_blocks: tuple[int, ...] = ()
    changed_refs: tuple[int, ...] = ()

    @property
    def num_blocks(self) -> int:
        """Physical blocks in the pool."""
        return len(self.ref_counts)

    @property
    def num_used(self) -> int:
        """Blocks with at least one reference."""
        return sum(1 for c in self.ref_counts if c > 0)

    @property
    def blocks_unshared(self) -> int:
        """Blocks the same sequences would hold if none were shared."""
        size = self.block_size
        return sum(-(-len(s.tokens) // size) for s in self.sequences)

    def block_tokens(self, block_id: int) -> tuple[str, ...]:
        """The token texts in physical block ``block_id`` (empty for a block no sequence lists).

        Every holder of a block agrees on its filled slots: only a sole holder writes."""
        size = self.block_size
        for seq in self.sequences:
            if block_id in seq.block_ids:
                i = seq.block_ids.index(block_id)
                return seq.tokens[i * size : (i + 1) * size]
        return ()

    def block_is_new(self, block_id: int) -> tuple[bool, ...]:
        """For each filled slot of ``block_id``: did this step write it (outlined in red)?"""
        size = self.block_size
        for seq in self.sequences:
            if block_id in seq.block_ids:
                i = seq.block_ids.index(block_id)
                first_new = len(seq.tokens) - seq.new_tokens
                stop = min(len(seq.tokens), (i + 1) * size)
                return tuple(p >= first_new for p in range(i * size, stop))
        return ()


@dataclass
class SharingArtists:
    """What :func:`draw_sharing_frame` put on the axes, for tests and for restyling."""

    logical_slots: list[Rectangle] = field(default_factory=list)
    physical_slots: list[Rectangle] = field(default_factory=list)
    table_arrows: list[FancyArrowPatch] = field(default_factory=list)
    copy_arrows: list[FancyArrowPatch] = field(default_factory=list)
    ref_labels: list = field(default_factory=list)


def sharing_frame(
    manager: ForkAppendFree,
    tokens: Mapping[Hashable, Sequence[str]],
    label: str,
    *,
    names: Mapping[Hashable, str] | None = None,
    new_tokens: Mapping[Hashable, int] | None = None,
    copies: Sequence[tuple[int, int]] = (),
    new_blocks: Sequence[int] = (),
    previous: SharingFrame | None = None,
) -> SharingFrame:
    """Record the sequences of ``tokens`` (sequence id → token texts, in drawing order) as the
    block ``manager`` holds them now.

    Only the :class:`~kvcourse.blocks.sharing.ForkAppendFree` interface is used (``block_ids`` and the
    pool's ``ref_count``), so any manager can be drawn. ``previous`` (the frame before) lets the
    frame mark the reference counts that changed. Raises ``ValueError`` when a sequence's token
    count does not fit its block table.
    """
    manager = check_manager(manager)
    pool = manager.pool
    size = pool.block_size
    names = dict(names or {})
    new_tokens = dict(new_tokens or {})
    seqs = []
    for i, (seq_id, texts) in enumerate(tokens.items()):
        texts = tuple(str(t) for t in texts)
        ids = tuple(int(b) for b in manager.block_ids(seq_id))
        if len(ids) != -(-len(texts) // size):
            raise ValueError(
                f"sequence {seq_id!r} has {len(texts)} tokens but {len(ids)} blocks of {size}; "
                f"give the token texts the sequence holds now"
            )
        seqs.append(
            SequenceSnapshot(
                names.get(seq_id, str(seq_id)),
                ids,
                texts,
                int(new_tokens.get(seq_id, 0)),
                SEQUENCE_COLORS[i % len(SEQUENCE_COLORS)],
            )
        )
    counts = tuple(pool.ref_count(b) for b in range(pool.num_blocks))
    changed: tuple[int, ...] = ()
    if previous is not None and previous.num_blocks == len(counts):
        changed = tuple(b for b, c in enumerate(counts) if c != previous.ref_counts[b])
    return SharingFrame(
        label,
        tuple(seqs),
        size,
        counts,
        tuple((int(s), int(t)) for s, t in copies),
        tuple(int(b) for b in new_blocks),
        changed,
    )


# ---------------------------------------------------------------------------- the demos


def fork_cow_frames(
    prompt: Sequence[str] = FOUR_SCORE_PROMPT,
    words: Sequence[str] = FORK_SAMPLE_WORDS,
    *,
    block_size: int = 4,
    num_blocks: int = 5,
    manager_factory: Callable[[BlockPool], ForkAppendFree] = SharedBlockManager,
) -> list[SharingFrame]:
    """Parallel sampling in miniature (vLLM paper Fig. 8): prefill ``prompt`` once as sample 1,
    fork samples 2.. from it, then let sample ``i`` write ``words[i]``, in order.

    Returns a frame after the fork and after each sample's write. With the defaults (7 tokens,
    blocks of 4, three samples) the last prompt block is shared and partly filled, so samples 1
    and 2 each copy it and sample 3 finds its reference count back at 1 and writes in place.
    ``manager_factory`` builds the block manager over the pool (yours, for assignment a3).
    """
    prompt = [str(t) for t in prompt]
    words = [str(w) for w in words]
    if not prompt or not words:
        raise ValueError("give a non-empty prompt and at least one sample word")
    pool = BlockPool(num_blocks, block_size)
    manager = check_manager(manager_factory(pool), pool)
    samples = list(range(len(words)))
    names = {s: f"sample {s + 1}" for s in samples}
    texts = {s: list(prompt) for s in samples}
    manager.add_sequence(0)
    manager.append(0, len(prompt))
    for s in samples[1:]:
        manager.fork(0, s)
    ids = ", ".join(str(b) for b in manager.block_ids(0))
    n = len(samples)
    frame = sharing_frame(
        manager,
        texts,
        f"Prefill once, fork {n - 1} time{'s' if n > 2 else ''}: {n} tables share blocks {ids}",
        names=names,
        new_blocks=manager.block_ids(0),
    )
    frames = [frame]
    for s, word in zip(samples, words, strict=True):
        before = tuple(manager.block_ids(s))
        last = before[-1]
        refs = pool.ref_count(last)
        partly = len(texts[s]) % block_size != 0
        cows = manager.cow_count
        manager.append(s, 1)
        after = tuple(manager.block_ids(s))
        texts[s].append(word)
        copies = [(o, w) for o, w in zip(before, after, strict=False) if o != w]
        new = [b for b in after if b not in before]
        if manager.cow_count > cows:
            what = f"block {last} has ref {refs}: copy it to block {copies[0][1]}, then write"
        elif partly:
            what = f"block {last} has ref {refs}: write in place, no copy"
        else:
            what = f"block {last} is full: write into new block {new[0]}"
        frame = sharing_frame(
            manager,
            texts,
            f"{names[s].capitalize()} writes “{word}”: {what}",
            names=names,
            new_tokens={s: 1},
            copies=copies,
            new_blocks=new,
            previous=frame,
        )
        frames.append(frame)
    return frames


def shared_prefix_frame(
    prefix: Sequence[str] = SYSTEM_PROMPT,
    questions: Sequence[Sequence[str]] = SYSTEM_QUESTIONS,
    *,
    block_size: int = 4,
    num_blocks: int | None = None,
    manager_factory: Callable[[BlockPool], ForkAppendFree] = SharedBlockManager,
) -> SharingFrame:
    """A system prompt stored once (a sequence of its own, kept alive like a shared library) and
    one request per entry of ``questions`` that forks it and appends its own tokens. The pool
    has ``num_blocks`` blocks; by default what sharing needs and one more."""
    prefix = [str(t) for t in prefix]
    if not prefix or not questions:
        raise ValueError("give a non-empty prefix and at least one request")
    if num_blocks is None:  # what sharing needs, and one free block to show the pool
        full = len(prefix) // block_size
        num_blocks = -(-len(prefix) // block_size) + 1
        num_blocks += sum(-(-(len(prefix) + len(q)) // block_size) - full for q in questions)
    pool = BlockPool(num_blocks, block_size)
    manager = check_manager(manager_factory(pool), pool)
    manager.add_sequence("prefix")
    manager.append("prefix", len(prefix))
    texts: dict[Hashable, list[str]] = {"prefix": list(prefix)}
    names: dict[Hashable, str] = {"prefix": "system\nprompt"}
    for r, question in enumerate(questions):
        manager.fork("prefix", r)
        manager.append(r, len(question))
        texts[r] = list(prefix) + [str(t) for t in question]
        names[r] = f"request {r + 1}"
    n_prefix = len(manager.block_ids("prefix"))
    return sharing_frame(
        manager,
        texts,
        f"{len(questions)} requests point at the {n_prefix} blocks of one system prompt",
        names=names,
        new_tokens={r: len(q) for r, q in enumerate(questions)},
    )


# ---------------------------------------------------------------------------- drawing a frame


def sharing_legend_handles(*, copies: bool = True) -> list:
    """Legend entries for :func:`draw_sharing_frame` (without the copy arrow if not
    ``copies``)."""
    handles = [
        Patch(fc=_SHARED, ec="0.35", label="shared block (ref > 1)"),
        Patch(fc="white", ec=_FREE_EDGE, label="free block"),
        Patch(fc="white", ec=_NEW, lw=2.2, label="written or allocated in this step"),
    ]
    if copies:
        handles.append(Line2D([], [], color=_NEW, lw=1.8, ls="--", label="copy-on-write"))
    return handles


def draw_sharing_frame(
    ax: Axes, frame: SharingFrame, *, title: bool = True, fontsize: float = _FONT
) -> SharingArtists:
    """Draw ``frame`` on ``ax``: each sequence's logical blocks (token texts) and block-table
    entry on the left, arrows into the physical pool on the right, and each physical block's
    reference count. Shared blocks are yellow; the step's new tokens, new blocks and changed
    counts are red; a copy-on-write is a dashed red arrow from the copied block to its copy."""
    if not isinstance(frame, SharingFrame):
        raise TypeError(f"frame must be a SharingFrame, got {frame!r}")
    size = frame.block_size
    w, h, pitch, seq_gap = _SLOT_W, _SLOT_H, _PITCH, _SEQ_GAP
    x_log, x_tab, tab_w, x_pool, x_id, x_ref, ref_w, x_end = _columns(size)
    text_kw = {"ha": "center", "va": "center", "fontsize": fontsize}
    artists = SharingArtists()

    # Left: the sequences, one under the other.
    rows = sum(len(s.block_ids) for s in frame.sequences)
    left_h = rows * pitch + seq_gap * max(0, len(frame.sequences) - 1)
    pool_h = frame.num_blocks * pitch
    top = 0.0
    left_top = top - max(0.0, (pool_h - left_h) / 2)
    pool_top = top - max(0.0, (left_h - pool_h) / 2)
    pool_y = [pool_top - b * pitch for b in range(frame.num_blocks)]  # top edges

    # Where each table arrow lands: holders of one block spread along its left edge.
    landing: dict[tuple[int, int], float] = {}
    for b in range(frame.num_blocks):
        holders = [n for n, seq in enumerate(frame.sequences) if b in seq.block_ids]
        step = min(0.13, 0.8 * h / max(1, len(holders)))
        for rank, n in enumerate(holders):
            landing[n, b] = pool_y[b] - h / 2 + ((len(holders) - 1) / 2 - rank) * step

    y = left_top
    for number, seq in enumerate(frame.sequences):
        light = _LIGHT.get(seq.color, "#EEEEEE")
        first_new = len(seq.tokens) - seq.new_tokens
        n_rows = len(seq.block_ids)
        ax.text(
            x_log - 0.2,
            y - (n_rows * pitch - (pitch - h)) / 2,
            seq.name,
            ha="right",
            va="center",
            fontsize=fontsize,
            color=seq.color,
            weight="bold",
            linespacing=1.0,
        )
        for i, block in enumerate(seq.block_ids):
            yb = y - h
            for s in range(size):
                p = i * size + s
                filled = p < len(seq.tokens)
                new = filled and p >= first_new
                rect = Rectangle(
                    (x_log + s * w, yb),
                    w,
                    h,
                    fc=light if filled else "white",
                    ec=_NEW if new else seq.color,
                    lw=2.2 if new else 1.0,
                    hatch=None if filled else "..",
                    zorder=2 if new else 1,
                )
                ax.add_patch(rect)
                artists.logical_slots.append(rect)
                if filled:
                    ax.text(
                        x_log + s * w + w / 2,
                        yb + h / 2,
                        seq.tokens[p],
                        color=_NEW_TEXT if new else "black",
                        **text_kw,
                    )
            moved = any(t == block for _, t in frame.copies) or block in frame.new_blocks
            ax.add_patch(
                Rectangle(
                    (x_tab, yb),
                    tab_w,
                    h,
                    fc="white",
                    ec=_NEW if moved else "0.35",
                    lw=2.2 if moved else 1.0,
                )
            )
            ax.text(
                x_tab + tab_w / 2,
                yb + h / 2,
                str(block),
                color=_NEW_TEXT if moved else "black",
                **text_kw,
            )
            if 0 <= block < frame.num_blocks:
                arrow = FancyArrowPatch(
                    (x_tab + tab_w, yb + h / 2),
                    (x_pool, landing[number, block]),
                    arrowstyle="-|>",
                    mutation_scale=12,
                    lw=1.4,
                    color=seq.color,
                    shrinkA=1,
                    shrinkB=1,
                    zorder=4,
                )
                ax.add_patch(arrow)
                artists.table_arrows.append(arrow)
            y -= pitch
        y -= seq_gap

    # Right: the physical pool with reference counts.
    for b in range(frame.num_blocks):
        yb = pool_y[b] - h
        count = frame.ref_counts[b]
        texts = frame.block_tokens(b)
        is_new = frame.block_is_new(b)
        holder = next((s for s in frame.sequences if b in s.block_ids), None)
        if count > 1:
            fill = _SHARED
        elif holder is not None:
            fill = _LIGHT.get(holder.color, "#EEEEEE")
        else:
            fill = "white"
        for s in range(size):
            filled = s < len(texts)
            new = filled and is_new[s]
            rect = Rectangle(
                (x_pool + s * w, yb),
                w,
                h,
                fc=fill if filled else "white",
                ec=_NEW if new else ("0.35" if count else _FREE_EDGE),
                lw=2.2 if new else 1.0,
                hatch=".." if (count and not filled) else None,
                zorder=2 if new else 1,
            )
            ax.add_patch(rect)
            artists.physical_slots.append(rect)
            if filled:
                ax.text(
                    x_pool + s * w + w / 2,
                    yb + h / 2,
                    texts[s],
                    color=_NEW_TEXT if new else "black",
                    **text_kw,
                )
        if b in frame.new_blocks:
            ax.add_patch(Rectangle((x_pool, yb), size * w, h, fc="none", ec=_NEW, lw=2.4, zorder=3))
        ax.text(x_id, yb + h / 2, str(b), color="0.3", **text_kw)
        changed = b in frame.changed_refs
        label = ax.text(
            x_ref + ref_w / 2,
            yb + h / 2,
            f"ref {count}" if count else "free",
            color=_NEW_TEXT if changed else ("black" if count else "0.5"),
            weight="bold" if count > 1 or changed else "normal",
            **text_kw,
        )
        artists.ref_labels.append(label)

    # Copy-on-write: a dashed arc on the far right, from the copied block to its copy.
    for source, target in frame.copies:
        if not (0 <= source < frame.num_blocks and 0 <= target < frame.num_blocks):
            continue
        x = x_ref + ref_w + 0.05
        arrow = FancyArrowPatch(
            (x, pool_y[source] - h / 2),
            (x, pool_y[target] - h / 2),
            connectionstyle=f"arc3,rad={-0.45 if target > source else 0.45}",
            arrowstyle="-|>",
            mutation_scale=13,
            lw=1.8,
            ls="--",
            color=_NEW,
            zorder=4,
        )
        ax.add_patch(arrow)
        artists.copy_arrows.append(arrow)
        span = abs(target - source) * pitch
        ax.text(
            x + 0.35 + 0.22 * span,
            (pool_y[source] + pool_y[target]) / 2 - h / 2,
            "copy",
            ha="left",
            va="center",
            fontsize=fontsize,
            color=_NEW_TEXT,
        )

    # Headings.
    head_y = top + 0.25
    sub = {"ha": "center", "va": "bottom", "fontsize": fontsize, "color": "0.3"}
    ax.text(x_log + size * w / 2, head_y, "logical KV blocks", weight="bold", **sub)
    ax.text(x_tab + tab_w / 2, head_y, "table", weight="bold", **sub)
    ax.text(x_pool + size * w / 2, head_y, "physical KV blocks", weight="bold", **sub)
    ax.text(x_ref + ref_w / 2, head_y, "count", weight="bold", **sub)
    bottom = min(left_top - left_h, pool_top - pool_h)
    ax.set_xlim(0.0, x_end)
    ax.set_ylim(bottom - 0.1, head_y + 0.6)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(frame.label, fontsize=fontsize + 1, loc="left", pad=4)
    return artists


def sharing_frames_figure(
    frames: Sequence[SharingFrame],
    *,
    width: float = 9.5,
    fontsize: float = 12,
    legend: bool = True,
) -> Figure:
    """The frames one under another, each titled with its label, with one legend at the bottom:
    the static stand-in for stepping through a sharing demo."""
    frames = list(frames)
    if not frames or not all(isinstance(f, SharingFrame) for f in frames):
        raise ValueError("frames must be a non-empty list of SharingFrame")
    heights = [_frame_height(f) for f in frames]
    scale = width / _frame_width(frames[0])  # inches per data unit
    legend_h = 0.5 if legend else 0.0
    fig = Figure(
        figsize=(width, sum(h * scale + 0.45 for h in heights) + legend_h),
        layout="constrained",
    )
    axes = fig.subplots(len(frames), 1, squeeze=False, height_ratios=heights)
    for ax, frame in zip(axes[:, 0], frames, strict=True):
        draw_sharing_frame(ax, frame, fontsize=fontsize)
    if legend:
        handles = sharing_legend_handles(copies=any(f.copies for f in frames))
        fig.legend(
            handles=handles,
            loc="outside lower center",
            ncols=len(handles),
            frameon=False,
            fontsize=fontsize - 1,
        )
    return fig


# Geometry of a frame, in data units (the axes have an equal aspect ratio).
_SLOT_W, _SLOT_H, _PITCH, _SEQ_GAP = 1.6, 0.6, 0.75, 0.45


def _columns(size: int) -> tuple[float, ...]:
    """x of: logical slots, table cell, its width, pool slots, block id, ref count, its width,
    and the right edge (room for the copy arrows)."""
    x_log = 2.4
    x_tab = x_log + size * _SLOT_W + 0.25
    tab_w = 0.9
    x_pool = x_tab + tab_w + 2.3
    x_id = x_pool + size * _SLOT_W + 0.35
    x_ref = x_id + 0.45
    ref_w = 1.35
    return x_log, x_tab, tab_w, x_pool, x_id, x_ref, ref_w, x_ref + ref_w + 1.6


def _frame_height(frame: SharingFrame) -> float:
    rows = sum(len(s.block_ids) for s in frame.sequences)
    left = rows * _PITCH + _SEQ_GAP * max(0, len(frame.sequences) - 1)
    return max(left, frame.num_blocks * _PITCH) + 1.0


def _frame_width(frame: SharingFrame) -> float:
    return _columns(frame.block_size)[-1]


# ---------------------------------------------------------------------------- beam search


@dataclass(frozen=True)
class BeamEdge:
    """One fork of a beam search: at ``step`` (0-based) new beam ``child`` forks old beam
    ``parent`` (the prompt at step 0) and writes token ``P + step``. ``copies`` is True when that
    write is a copy-on-write; ``survives`` when the child has a descendant among the final
    beams."""

    step: int
    child: int
    parent: int
    copies: bool
    survives: bool


def beam_edges(
    parents: Sequence[Sequence[int]], prompt_len: int, block_size: int
) -> list[BeamEdge]:
    """The fork tree of a beam search with ``parents[s][j]`` = parent of new beam ``j`` at step
    ``s`` (as :func:`kvcourse.generation.scripted_beam_search` and
    :func:`~kvcourse.generation.beam_search` record it).

    The children of one parent write in order; when the parent's last block is partly filled
    (``(P + s) mod B ≠ 0``) all but the last of them copy it, so the edges marked ``copies``
    add up to :func:`~kvcourse.generation.expected_cow_count`.
    """
    steps = [tuple(int(p) for p in step) for step in parents]
    if prompt_len <= 0 or block_size <= 0:
        raise ValueError("prompt_len and block_size must be positive")
    alive: list[set[int]] = [set() for _ in steps]
    if steps:
        alive[-1] = set(range(len(steps[-1])))
    for s in range(len(steps) - 1, 0, -1):
        alive[s - 1] = {steps[s][j] for j in alive[s]}
    edges = []
    for s, step in enumerate(steps):
        partly = (prompt_len + s) % block_size != 0
        for j, parent in enumerate(step):
            later = step[j + 1 :]
            edges.append(BeamEdge(s, j, parent, partly and parent in later, j in alive[s]))
    return edges


def draw_beam_tree(
    ax: Axes,
    parents: Sequence[Sequence[int]],
    *,
    prompt_len: int,
    block_size: int,
    fontsize: float = _FONT,
) -> dict[str, list]:
    """Draw the fork tree: step on x (0 = the prompt), beam rank on y (best on top). Lines that
    lead to a final beam are blue, pruned branches grey; a red dot marks a child that copies its
    parent's shared last block; shaded columns are steps whose token starts a new block (nobody
    copies). Returns the drawn artists by kind."""
    edges = beam_edges(parents, prompt_len, block_size)
    k = max((len(p) for p in parents), default=1)
    mid = (k - 1) / 2
    out: dict[str, list] = {"edges": [], "copies": [], "new_block_steps": []}
    for s in range(len(parents)):
        if (prompt_len + s) % block_size == 0:
            out["new_block_steps"].append(
                ax.axvspan(s + 0.5, s + 1.5, color="#E8F0E0", zorder=0, lw=0)
            )
    for e in edges:
        y0 = mid if e.step == 0 else e.parent
        (line,) = ax.plot(
            [e.step, e.step + 1],
            [y0, e.child],
            color="#4C78A8" if e.survives else "0.75",
            lw=2.0 if e.survives else 1.0,
            zorder=2 if e.survives else 1,
            solid_capstyle="round",
        )
        out["edges"].append(line)
    cow = [e for e in edges if e.copies]
    if cow:
        out["copies"].append(
            ax.scatter(
                [e.step + 1 for e in cow],
                [e.child for e in cow],
                s=22,
                color=_NEW,
                zorder=3,
            )
        )
    ax.scatter([0], [mid], s=60, color="black", zorder=3, marker="s")
    ax.set_yticks(range(k), [f"beam {j + 1}" for j in range(k)], fontsize=fontsize)
    ax.set_ylim(k - 0.5, -0.5)
    ax.set_xlim(-0.5, len(parents) + 0.5)
    ax.set_xlabel("step (0 = the prompt)", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    handles = [
        Line2D([], [], color="#4C78A8", lw=2.0, label="leads to a final beam"),
        Line2D([], [], color="0.75", lw=1.0, label="pruned"),
        Line2D([], [], color=_NEW, marker="o", ls="", ms=5, label="copy-on-write"),
        Patch(fc="#E8F0E0", label="token starts a new block"),
    ]
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.22),
        ncols=4,
        frameon=False,
        fontsize=fontsize - 1,
    )
    return out


def beam_search_figure(
    parents: Sequence[Sequence[int]],
    *,
    prompt_len: int,
    block_size: int,
    blocks_shared: Sequence[int],
    blocks_unshared: Sequence[int],
    width: float = 9.5,
    fontsize: float = 12,
) -> Figure:
    """A beam search in three panels: the fork tree (:func:`draw_beam_tree`); the blocks held
    after each step with sharing and with a copy per beam; and the tokens copied so far by the
    full-copy scheme (each new beam copies its parent's ``P + s`` tokens) and by the paged one
    (a block of ``B`` slots per copy-on-write), on a log scale.

    ``blocks_shared`` and ``blocks_unshared`` hold one value for the prompt and one per step.
    """
    n = len(parents)
    if len(blocks_shared) != n + 1 or len(blocks_unshared) != n + 1:
        raise ValueError(
            f"give {n + 1} block counts (after the prompt and after each of {n} steps), got "
            f"{len(blocks_shared)} and {len(blocks_unshared)}"
        )
    edges = beam_edges(parents, prompt_len, block_size)
    fig = Figure(figsize=(width, 8.0), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=[1.25, 1.0])
    tree = fig.add_subplot(grid[0, :])
    draw_beam_tree(tree, parents, prompt_len=prompt_len, block_size=block_size, fontsize=fontsize)
    tree.set_title("(a) who forks whom", fontsize=fontsize + 1, loc="left")

    steps = list(range(n + 1))
    mem = fig.add_subplot(grid[1, 0])
    mem.step(steps, blocks_unshared, where="post", color="0.45", lw=1.8, label="copy per beam")
    mem.step(steps, blocks_shared, where="post", color="#4C78A8", lw=2.2, label="shared blocks")
    mem.set_ylim(0, max(blocks_unshared) * 1.15)
    mem.set_xlabel("step", fontsize=fontsize)
    mem.set_ylabel("blocks held", fontsize=fontsize)
    mem.set_title("(b) memory", fontsize=fontsize + 1, loc="left")
    mem.legend(fontsize=fontsize - 1, frameon=False, loc="lower right")

    k = max(len(p) for p in parents) if parents else 0
    full, paged = [0], [0]
    for s in range(n):
        full.append(full[-1] + k * (prompt_len + s))
        made = sum(1 for e in edges if e.step == s and e.copies)
        paged.append(paged[-1] + made * block_size)
    cp = fig.add_subplot(grid[1, 1])
    cp.plot(steps, full, color="0.45", lw=1.8, label="full copy")
    cp.plot(steps, paged, color="#4C78A8", lw=2.2, label="copy-on-write (whole blocks)")
    cp.set_yscale("symlog", linthresh=block_size)
    cp.set_xlabel("step", fontsize=fontsize)
    cp.set_ylabel("tokens copied so far", fontsize=fontsize)
    cp.set_title("(c) copying", fontsize=fontsize + 1, loc="left")
    cp.legend(fontsize=fontsize - 1, frameon=False, loc="lower right")
    for ax in (mem, cp):
        ax.tick_params(labelsize=fontsize)
        ax.grid(alpha=0.3)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    return fig
