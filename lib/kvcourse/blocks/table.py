"""One sequence's block table (§4.1): logical KV blocks → physical blocks in a :class:`BlockPool`.

A sequence sees its KV cache as contiguous: token ``p`` lives in *logical* block ``p // B`` at
offset ``p % B`` (``B`` the block size). The block table records which *physical* block each
logical block is, so the physical blocks can sit anywhere in the pool. Blocks are allocated on
demand: a new one only when the last one is full, so at most ``B - 1`` slots of a sequence are
ever empty (:attr:`BlockTable.wasted_slots`).

This module does bookkeeping only; the K and V tensors live in :mod:`kvcourse.kv.cache`.
Sharing blocks between sequences is §5's business, and the table has the two steps it needs:
:meth:`BlockTable.fork` (a second table over the same blocks, one more reference each) and
:meth:`BlockTable.unshare_last_block` (copy-on-write: a private block in place of a shared, partly
filled last one). :meth:`BlockTable.append` refuses to write into a partly filled block that
another table also holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvcourse._checks import as_index, ceil_div, check_count
from kvcourse.blocks.errors import SharedBlockWriteError
from kvcourse.blocks.pool import BlockPool

__all__ = ["BlockTable", "BlockTableEntry", "SharedBlockWriteError"]


@dataclass(frozen=True)
class BlockTableEntry:
    """One row of a block table, for drawing: logical block ``logical`` is physical block
    ``physical`` and holds ``filled`` tokens (``block_size`` except possibly in the last row)."""

    logical: int
    physical: int
    filled: int


class BlockTable:
    """The logical → physical block map of one sequence, over a shared :class:`BlockPool`.

    Invariants, true after every call (including one that raised):

    * ``num_blocks == ceil(num_tokens / block_size)``: exactly the blocks the tokens need;
    * ``0 <= wasted_slots = capacity - num_tokens <= block_size - 1``;
    * the table holds one pool reference per block it lists.

    >>> pool = BlockPool(num_blocks=8, block_size=4, taken=[0, 2, 3, 5, 6])
    >>> table = BlockTable(pool)
    >>> table.append(7)  # prefill of a 7-token prompt: two blocks
    [1, 4]
    >>> table.append(1)  # the first generated token fills block 4's last slot
    []
    >>> table.append(1)  # the next one needs a third block
    [7]
    """

    def __init__(self, pool: BlockPool) -> None:
        if not isinstance(pool, BlockPool):
            raise TypeError(f"pool must be a BlockPool, got {pool!r}")
        self._pool = pool
        self._blocks: list[int] = []
        self._num_tokens = 0

    @classmethod
    def adopt(cls, pool: BlockPool, block_ids: Sequence[int]) -> BlockTable:
        """A table whose tokens fill the full blocks ``block_ids`` exactly (``len × block_size``
        tokens), taking over one pool reference the caller holds on each: a prompt's cached
        prefix (§8), which the table then extends with :meth:`append` like any other."""
        table = cls(pool)
        ids = [as_index(b, "block id") for b in block_ids]
        for block_id in ids:
            if pool.ref_count(block_id) < 1:
                raise ValueError(
                    f"block {block_id} is free: a table adopts only blocks its caller holds a "
                    f"reference on (take them from the prefix cache first)"
                )
        table._blocks = ids
        table._num_tokens = len(ids) * pool.block_size
        return table

    # ------------------------------------------------------------------ sizes

    @property
    def pool(self) -> BlockPool:
        """The pool the physical blocks come from."""
        return self._pool

    @property
    def block_size(self) -> int:
        """Token slots per block (the pool's)."""
        return self._pool.block_size

    @property
    def block_ids(self) -> tuple[int, ...]:
        """Physical block ids in logical order: ``block_ids[i]`` holds tokens ``i·B .. i·B+B-1``."""
        return tuple(self._blocks)

    @property
    def num_tokens(self) -> int:
        """How many tokens the sequence has stored."""
        return self._num_tokens

    @property
    def num_blocks(self) -> int:
        """How many physical blocks the table holds."""
        return len(self._blocks)

    @property
    def capacity(self) -> int:
        """Token slots in the table's blocks: ``num_blocks × block_size``."""
        return len(self._blocks) * self._pool.block_size

    @property
    def wasted_slots(self) -> int:
        """Allocated but empty slots (internal fragmentation), always at most ``block_size - 1``."""
        return self.capacity - self._num_tokens

    def __len__(self) -> int:
        return self._num_tokens

    def __repr__(self) -> str:
        return (
            f"BlockTable(blocks={self._blocks}, num_tokens={self._num_tokens}, "
            f"block_size={self._pool.block_size})"
        )

    # ------------------------------------------------------------------ queries

    def blocks_needed(self, num_tokens: int = 1) -> int:
        """How many new blocks :meth:`append` of ``num_tokens`` tokens would allocate.

        A scheduler asks this before appending, to know whether the pool can take the step.
        """
        num_tokens = check_count("num_tokens", num_tokens)
        size = self._pool.block_size
        total_blocks = ceil_div(self._num_tokens + num_tokens, size)
        return total_blocks - len(self._blocks)

    def slot_of(self, position: int) -> tuple[int, int]:
        """``(physical block, offset)`` where token ``position`` (0-based) of the sequence lives.

        Raises ``IndexError`` for a negative position or one at or past :attr:`num_tokens`.
        """
        # Only the public properties are read, so other views of a block table (the sharing
        # cache's SharedTableView) reuse this method as it is.
        position = as_index(position, "position")
        num_tokens = self.num_tokens
        if not 0 <= position < num_tokens:
            if num_tokens == 0:
                raise IndexError(f"position {position} is out of range: the sequence is empty")
            raise IndexError(
                f"position {position} is out of range: the sequence has {num_tokens} "
                f"tokens, at positions 0..{num_tokens - 1}"
            )
        logical, offset = divmod(position, self.block_size)
        return self.block_ids[logical], offset

    def entries(self) -> list[BlockTableEntry]:
        """The table as rows ``(logical, physical, filled)``, for printing and drawing."""
        size, num_tokens = self.block_size, self.num_tokens
        return [
            BlockTableEntry(i, block, min(size, num_tokens - i * size))
            for i, block in enumerate(self.block_ids)
        ]

    @property
    def last_block_shared(self) -> bool:
        """True when the last block is partly filled and other tables hold it too: the next
        append would write into their KV, so it must be copied first (copy-on-write, §5)."""
        return self.wasted_slots > 0 and self._pool.ref_count(self._blocks[-1]) > 1

    def under_referenced(self) -> tuple[int, ...]:
        """Blocks the table lists more often than the pool counts references to them, in logical
        order: blocks released behind the table's back. Empty while the books are right."""
        return tuple(
            block
            for block in dict.fromkeys(self._blocks)
            if self._pool.ref_count(block) < self._blocks.count(block)
        )

    # ------------------------------------------------------------------ changes

    def append(self, num_tokens: int = 1) -> list[int]:
        """Make room for ``num_tokens`` more tokens and return the newly allocated block ids.

        New tokens first fill the free slots of the last block; a new block is taken from the pool
        only when that one is full. All or nothing: if the pool has too few free blocks,
        :class:`~kvcourse.blocks.pool.OutOfBlocksError` is raised and the table and pool are
        unchanged. Raises :class:`SharedBlockWriteError` if the tokens would go into a partly
        filled last block that other tables also hold (copy it first, §5).
        """
        needed = self.blocks_needed(num_tokens)
        if num_tokens > 0 and self.last_block_shared:
            last = self._blocks[-1]
            raise SharedBlockWriteError(
                f"the last block ({last}) is shared by {self._pool.ref_count(last)} references; "
                f"appending would write into the other sequences' KV too. Copy the block first "
                f"(copy-on-write, §5), then append"
            )
        new_blocks = self._pool.allocate_many(needed)  # raises before anything changed
        self._blocks.extend(new_blocks)
        self._num_tokens += num_tokens
        return new_blocks

    def fork(self) -> BlockTable:
        """A new table over the same pool listing this table's blocks, in the same order, with
        the same token count; each block gains one reference (§5 fork). Nothing is allocated or
        copied, so the new table reads all of this one's KV at once.

        Raises ``RuntimeError``, changing nothing, if a block was released behind the table's back.
        """
        self._check_references()
        child = BlockTable(self._pool)
        for block in self._blocks:
            self._pool.share(block)
        child._blocks = list(self._blocks)
        child._num_tokens = self._num_tokens
        return child

    def unshare_last_block(self) -> tuple[int, int]:
        """Copy-on-write (§5): put a newly allocated block in place of the shared, partly filled
        last block and drop this table's reference to the shared one (its other holders keep it).

        Returns ``(old block, new block)``; the caller copies the ``num_tokens % block_size`` filled
        slots' K and V from the old block to the new one. Raises ``ValueError`` when there is
        nothing to copy (:attr:`last_block_shared` is False: the table is empty, its last block is
        full, or it holds that block alone) and :class:`~kvcourse.blocks.errors.OutOfBlocksError`
        when the pool has no free block; either way nothing changes.
        """
        if not self.last_block_shared:
            if not self._blocks:
                why = "the table is empty"
            elif self.wasted_slots == 0:
                why = f"the last block ({self._blocks[-1]}) is full; the next token opens a new one"
            else:
                why = f"no other table holds the last block ({self._blocks[-1]}); write in place"
            raise ValueError(f"nothing to copy on write: {why}")
        old = self._blocks[-1]
        new = self._pool.allocate()  # raises before anything changed
        self._pool.release(old)  # still held by the other sharers
        self._blocks[-1] = new
        return old, new

    def free(self) -> list[int]:
        """Drop this table's reference to each of its blocks and empty the table.

        Returns the blocks that went back on the pool's free list (those no other table holds).
        The table can be appended to again afterwards.
        """
        self._check_references()
        returned = [block for block in self._blocks if self._pool.release(block)]
        self._blocks = []
        self._num_tokens = 0
        return returned

    def _check_references(self) -> None:
        stale = self.under_referenced()
        if stale:
            raise RuntimeError(
                f"block {stale[0]} has fewer pool references than this table holds; it was "
                f"released behind the table's back. Release blocks through BlockTable.free()"
            )
