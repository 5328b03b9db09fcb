"""§3's buddy walk-through drawn: one row of slots per step, so the splits, the merges and the
failed allocation show.

The steps come from :func:`kvcourse.blocks.buddy_demo.buddy_walkthrough`. Slots are coloured by
owner (:data:`~kvcourse.viz.style.OWNER_COLORS`), blocks outlined thick; a failed allocation
outlines in red the free blocks that add up to enough slots but cannot serve it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from kvcourse.blocks.buddy_demo import WalkthroughStep
from kvcourse.viz.phone import phone_figure, phone_font_size
from kvcourse.viz.style import (
    FAILED,
    FONT_SIZE,
    OUTLINE,
    OWNER_COLORS,
    center_text,
    finish_diagram,
    text_color_on,
)

__all__ = ["WalkthroughArtists", "draw_buddy_walkthrough"]


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
    fontsize: float = FONT_SIZE,
    phone: bool = False,
) -> WalkthroughArtists:
    """The arena after each step of a walk-through
    (:func:`kvcourse.blocks.buddy_demo.buddy_walkthrough`), one row per step, top to bottom.

    Slots are coloured by the request that owns their block (free slots white); every block, free
    or allocated, is outlined thick, so the splits and merges show; slots a request was given but
    did not ask for (rounding up) are hatched. Left of each row: the step; right: what came of it.
    A failed allocation draws its label and verdict in red and outlines the free blocks in red:
    enough slots in total, but no block large enough.

    With ``ax`` None a new figure sized to the rows is made (``artists.labels[0].figure``).
    ``phone=True`` draws it for a phone's column (:func:`~kvcourse.viz.phone.phone_figure`): each
    verdict on a line of its own under its row instead of right of it, text at
    :func:`~kvcourse.viz.phone.phone_font_size`.
    """
    steps = list(steps)
    if not steps or not all(isinstance(s, WalkthroughStep) for s in steps):
        raise ValueError("steps must be a non-empty list of WalkthroughStep (buddy_walkthrough())")
    num_slots = sum(size for _, size, _ in steps[0].blocks)
    if any(sum(size for _, size, _ in s.blocks) != num_slots for s in steps):
        raise ValueError("every step must cover the same arena")
    label_w, note_w, pitch, h = 6.5, 12.5, 1.35, 0.9
    font = phone_font_size if phone else float
    if phone:
        label_w, note_w, pitch = 5.6, 0.4, 2.3
    if ax is None and phone:
        ax = phone_figure().add_subplot()
    elif ax is None:
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
            unusable = failed and owner is None  # a free block too small for the request
            outline = Rectangle(
                (offset, y),
                size,
                h,
                fc="none",
                ec=FAILED if unusable else OUTLINE,
                lw=2.4 if unusable else 1.8,
                ls="--" if unusable else "-",
                zorder=3,
            )
            ax.add_patch(outline)
            row_blocks.append(outline)
            if unusable:
                row_failed.append(outline)
            center_text(
                ax,
                offset + (used if owner is not None else size) / 2,
                y + h / 2,
                owner if owner is not None else str(size),
                fontsize=font(fontsize if owner is not None else fontsize - 1),
                color=text_color_on(fc) if owner is not None else "0.45",
                weight="bold" if owner is not None else "normal",
                bbox={"fc": fc, "ec": "none", "pad": 1.0},
                zorder=4,
            )
        artists.slots.append(row_slots)
        artists.blocks.append(row_blocks)
        artists.failed_pieces.append(row_failed)
        color = FAILED if failed else "black"
        artists.labels.append(
            ax.text(
                -0.6,
                y + h / 2,
                _step_label(s),
                ha="right",
                va="center",
                fontsize=font(fontsize),
                color=color,
                weight="bold" if failed else "normal",
            )
        )
        artists.notes.append(
            ax.text(
                0.0 if phone else num_slots + 0.6,
                y - 0.12 if phone else y + h / 2,
                _step_note(s, previous),
                ha="left",
                va="top" if phone else "center",
                fontsize=font(fontsize - 1),
                color=color,
            )
        )
        previous = s
    step = 4 if num_slots <= 64 else num_slots // 8
    for x in range(0, num_slots + 1, step):
        ax.text(
            x, h + 0.25, str(x), ha="center", va="bottom", fontsize=font(fontsize - 2), color="0.4"
        )
    top = h + (1.15 if phone else 0.85)
    ax.text(
        num_slots / 2, top, "slot offset", ha="center", va="bottom", fontsize=font(fontsize - 1)
    )
    bottom = -(len(steps) - 1) * pitch - (1.1 if phone else 0.2)
    finish_diagram(ax, (-label_w, num_slots + note_w), (bottom, top + (1.1 if phone else 0.65)))
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
