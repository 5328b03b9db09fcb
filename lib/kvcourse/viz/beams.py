"""§5's beam search drawn: the fork tree, the children that copy a shared block, and what
sharing saves in memory and in copying.

* :func:`beam_edges` lists the fork tree of a beam search, marking the children that copy a
  block;
* :func:`draw_beam_tree` draws that tree and :func:`beam_search_figure` adds the memory held and
  the tokens copied under both schemes (a copy per beam, shared blocks with copy-on-write).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from kvcourse._checks import check_positive_int
from kvcourse.viz.style import BLUE, CHANGED, FONT_SIZE, NEW_BLOCK_SHADE, despine

__all__ = ["BeamEdge", "beam_edges", "beam_search_figure", "draw_beam_tree"]


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
    prompt_len = check_positive_int("prompt_len", prompt_len)
    block_size = check_positive_int("block_size", block_size)
    steps = [tuple(int(p) for p in step) for step in parents]
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
    fontsize: float = FONT_SIZE,
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
                ax.axvspan(s + 0.5, s + 1.5, color=NEW_BLOCK_SHADE, zorder=0, lw=0)
            )
    for e in edges:
        y0 = mid if e.step == 0 else e.parent
        (line,) = ax.plot(
            [e.step, e.step + 1],
            [y0, e.child],
            color=BLUE if e.survives else "0.75",
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
                color=CHANGED,
                zorder=3,
            )
        )
    ax.scatter([0], [mid], s=60, color="black", zorder=3, marker="s")
    ax.set_yticks(range(k), [f"beam {j + 1}" for j in range(k)], fontsize=fontsize)
    ax.set_ylim(k - 0.5, -0.5)
    ax.set_xlim(-0.5, len(parents) + 0.5)
    ax.set_xlabel("step (0 = the prompt)", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize)
    despine(ax, ("top", "right", "left"))
    handles = [
        Line2D([], [], color=BLUE, lw=2.0, label="leads to a final beam"),
        Line2D([], [], color="0.75", lw=1.0, label="pruned"),
        Line2D([], [], color=CHANGED, marker="o", ls="", ms=5, label="copy-on-write"),
        Patch(fc=NEW_BLOCK_SHADE, label="token starts a new block"),
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
    mem.step(steps, blocks_shared, where="post", color=BLUE, lw=2.2, label="shared blocks")
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
    cp.plot(steps, paged, color=BLUE, lw=2.2, label="copy-on-write (whole blocks)")
    cp.set_yscale("symlog", linthresh=block_size)
    cp.set_xlabel("step", fontsize=fontsize)
    cp.set_ylabel("tokens copied so far", fontsize=fontsize)
    cp.set_title("(c) copying", fontsize=fontsize + 1, loc="left")
    cp.legend(fontsize=fontsize - 1, frameon=False, loc="lower right")
    for ax in (mem, cp):
        ax.tick_params(labelsize=fontsize)
        ax.grid(alpha=0.3)
        despine(ax)
    return fig
