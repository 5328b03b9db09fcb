"""Frames of §4's block-table pictures: one sequence's block table and the pool, recorded after
prefill and after each decode step.

* :class:`PoolState` is a frozen picture of a :class:`~kvcourse.blocks.pool.BlockPool`,
  :class:`BlockTableFrame` one step of a sequence's life;
* :func:`block_table_frames` runs a real :class:`~kvcourse.blocks.table.BlockTable` and records
  a frame per step, :func:`four_score_frames` the lecture's example (vLLM paper, Fig. 6).

:mod:`kvcourse.viz.block_tables` draws the frames and :mod:`kvcourse.viz.widgets` steps through
them in JupyterLab.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kvcourse._checks import check_count
from kvcourse.blocks.pool import BlockPool
from kvcourse.blocks.table import BlockTable, BlockTableEntry

__all__ = [
    "FOUR_SCORE_OUTPUT",
    "FOUR_SCORE_PROMPT",
    "FOUR_SCORE_TAKEN",
    "BlockTableFrame",
    "PoolState",
    "block_table_frames",
    "four_score_frames",
]

#: The prompt of the vLLM paper's Fig. 6, one word per token.
FOUR_SCORE_PROMPT: tuple[str, ...] = ("Four", "score", "and", "seven", "years", "ago", "our")
#: The words the example goes on to generate, one per decode step.
FOUR_SCORE_OUTPUT: tuple[str, ...] = ("fathers", "brought", "forth", "on", "this")
#: Blocks of the example's 8-block pool that other requests already hold.
FOUR_SCORE_TAKEN: tuple[int, ...] = (0, 2, 3, 5, 6)


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


def check_frames(frames: Iterable[object]) -> list[BlockTableFrame]:
    """``frames`` as a list, after checking that it holds at least one :class:`BlockTableFrame`
    and nothing else (``ValueError`` otherwise)."""
    frames = list(frames)
    if not frames or not all(isinstance(f, BlockTableFrame) for f in frames):
        raise ValueError(
            "frames must be a non-empty list of BlockTableFrame, e.g. four_score_frames(5)"
        )
    return frames


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
    decode_steps = check_count("decode_steps", decode_steps)
    if decode_steps > len(FOUR_SCORE_OUTPUT):
        raise ValueError(
            f"decode_steps must be from 0 to {len(FOUR_SCORE_OUTPUT)}, got {decode_steps}"
        )
    return block_table_frames(FOUR_SCORE_PROMPT, FOUR_SCORE_OUTPUT[:decode_steps])


def _check_words(name: str, words: object, *, allow_empty: bool = False) -> list[str]:
    if isinstance(words, (str, bytes)) or not isinstance(words, Sequence):
        raise TypeError(f"{name} must be a list of token strings, got {words!r}")
    words = [str(w) for w in words]
    if not words and not allow_empty:
        raise ValueError(f"{name} must hold at least one token")
    return words
