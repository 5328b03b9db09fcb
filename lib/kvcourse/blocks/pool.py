"""The pool of physical KV blocks (§4.1), with reference counts for sharing (§5).

PagedAttention cuts the KV-cache memory into ``num_blocks`` equal *physical blocks*, each holding
the keys and values of ``block_size`` tokens (its *slots*). :class:`BlockPool` is the bookkeeping
for those blocks and nothing else: which ones are free, and how many block tables point at each
used one. It stores no K or V itself; :mod:`kvcourse.kv.cache` keeps the tensors, indexed by the
block ids handed out here.

It is the §2 physical memory renamed: frame → physical block, page-table entry → block-table
entry. The three operations map onto the lecture's words:

* :meth:`BlockPool.allocate` takes a block off the free list (reference count 0 → 1);
* :meth:`BlockPool.share` lets one more block table point at a used block (count + 1; §5 fork);
* :meth:`BlockPool.release` drops one reference; at 0 the block goes back on the free list.

Every method checks its arguments before it changes anything, so an error leaves the pool exactly
as it was.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from kvcourse._checks import as_index, check_count, check_positive_int
from kvcourse.blocks.errors import OutOfBlocksError

__all__ = ["BlockPool", "OutOfBlocksError", "as_index"]


class BlockPool:
    """``num_blocks`` physical blocks of ``block_size`` token slots: a free list and refcounts.

    A block is *used* while at least one block table (or, for ``taken`` blocks, some sequence
    outside this demo) holds it, and *free* otherwise. Free blocks are handed out lowest id first,
    so a demo gives the same block ids every time.

    Invariants, true after every call (including one that raised):

    * no block is both free and used: a block is on the free list exactly when its reference count
      is 0;
    * reference counts are never negative, and a used block's count is the number of references to
      it (one per block table that lists it);
    * ``num_free + num_used == num_blocks``.

    ``taken`` lists blocks that are already in use when the pool is created (each with one
    reference), as in §4's demo where other requests hold part of the memory. They can be released
    like any other used block.

    >>> pool = BlockPool(num_blocks=8, block_size=4, taken=[0, 2, 3, 5, 6])
    >>> pool.allocate(), pool.allocate(), pool.num_free
    (1, 4, 1)
    """

    def __init__(self, num_blocks: int, block_size: int, *, taken: Iterable[int] = ()) -> None:
        num_blocks = check_positive_int("num_blocks", num_blocks, "e.g. 64")
        block_size = check_positive_int("block_size", block_size, "e.g. 16 (vLLM's default)")
        if isinstance(taken, (str, bytes)) or not isinstance(taken, Iterable):
            raise TypeError(f"taken must be a list of block ids, got {taken!r}")
        taken_ids = [as_index(b, "each id in taken") for b in taken]
        for block_id in taken_ids:
            if not 0 <= block_id < num_blocks:
                raise ValueError(
                    f"taken block {block_id} does not exist: a pool of {num_blocks} blocks has "
                    f"ids 0..{num_blocks - 1}"
                )
        if len(set(taken_ids)) != len(taken_ids):
            duplicates = sorted({b for b in taken_ids if taken_ids.count(b) > 1})
            raise ValueError(f"taken lists blocks {duplicates} more than once; list each once")
        self._num_blocks = num_blocks
        self._block_size = block_size
        self._ref_count = [0] * num_blocks
        for block_id in taken_ids:
            self._ref_count[block_id] = 1
        self._free = [b for b in range(num_blocks) if self._ref_count[b] == 0]  # a min-heap
        heapq.heapify(self._free)

    # ------------------------------------------------------------------ sizes

    @property
    def num_blocks(self) -> int:
        """How many physical blocks the pool has in all."""
        return self._num_blocks

    @property
    def block_size(self) -> int:
        """Token slots per block (the lecture's B)."""
        return self._block_size

    @property
    def num_free(self) -> int:
        """How many blocks are on the free list."""
        return len(self._free)

    @property
    def num_used(self) -> int:
        """How many blocks are held by at least one reference (``num_blocks - num_free``)."""
        return self._num_blocks - len(self._free)

    @property
    def usage(self) -> float:
        """Fraction of blocks in use, from 0.0 (all free) to 1.0 (full)."""
        return self.num_used / self._num_blocks

    # ------------------------------------------------------------------ queries

    def ref_count(self, block_id: int) -> int:
        """How many references block ``block_id`` has; 0 means it is free."""
        return self._ref_count[self._check_id(block_id)]

    def is_free(self, block_id: int) -> bool:
        """True when block ``block_id`` is on the free list (reference count 0)."""
        return self._ref_count[self._check_id(block_id)] == 0

    def free_block_ids(self) -> tuple[int, ...]:
        """The free block ids in ascending order (the order :meth:`allocate` hands them out)."""
        return tuple(sorted(self._free))

    def used_block_ids(self) -> tuple[int, ...]:
        """The used block ids in ascending order."""
        return tuple(b for b, count in enumerate(self._ref_count) if count > 0)

    # ------------------------------------------------------------------ changes

    def allocate(self) -> int:
        """Take the lowest free block, give it one reference and return its id.

        Raises :class:`OutOfBlocksError` (a ``MemoryError``) when every block is in use.
        """
        if not self._free:
            raise OutOfBlocksError(self._out_of_blocks_message(1))
        block_id = heapq.heappop(self._free)
        self._ref_count[block_id] = 1
        return block_id

    def allocate_many(self, count: int) -> list[int]:
        """Allocate ``count`` blocks at once, all or nothing.

        Raises :class:`OutOfBlocksError` without taking any block when fewer than ``count`` are
        free, so a caller never has to give back half an allocation.
        """
        count = check_count("count", count)
        if count > len(self._free):
            raise OutOfBlocksError(self._out_of_blocks_message(count))
        return [self.allocate() for _ in range(count)]

    def share(self, block_id: int) -> int:
        """Add one reference to a used block (one more block table points at it) and return the
        new count. §5 uses it when a fork lets a child sequence read its parent's blocks.

        Only a used block can be shared: a free block holds nothing worth pointing at.
        """
        block_id = self._check_used(block_id, "share")
        self._ref_count[block_id] += 1
        return self._ref_count[block_id]

    def release(self, block_id: int) -> bool:
        """Drop one reference to a used block. Returns True when that was the last reference and
        the block went back on the free list, False while others still hold it.

        Releasing a free block (a double free) raises ``ValueError`` and changes nothing.
        """
        block_id = self._check_used(block_id, "release")
        self._ref_count[block_id] -= 1
        if self._ref_count[block_id] == 0:
            heapq.heappush(self._free, block_id)
            return True
        return False

    # ------------------------------------------------------------------ helpers

    def __repr__(self) -> str:
        return (
            f"BlockPool({self._num_blocks} blocks x {self._block_size} slots: "
            f"{self.num_free} free, {self.num_used} used)"
        )

    def _out_of_blocks_message(self, needed: int) -> str:
        return (
            f"out of KV blocks: needed {needed} but only {self.num_free} of the pool's "
            f"{self._num_blocks} blocks (block size {self._block_size}) are free; free a finished "
            f"sequence or preempt a running one (§6), or create a pool with more blocks"
        )

    def _check_id(self, block_id: object) -> int:
        block_id = as_index(block_id)
        if not 0 <= block_id < self._num_blocks:
            raise ValueError(
                f"block {block_id} does not exist: this pool has ids 0..{self._num_blocks - 1}"
            )
        return block_id

    def _check_used(self, block_id: object, action: str) -> int:
        block_id = self._check_id(block_id)
        if self._ref_count[block_id] == 0:
            if action == "release":
                raise ValueError(
                    f"cannot release block {block_id}: it is already free (reference count 0), "
                    f"so this would be a double free; release a block once per reference you hold"
                )
            raise ValueError(
                f"cannot {action} block {block_id}: it is free (reference count 0); only a block "
                f"that some sequence holds can be shared, so allocate() it first"
            )
        return block_id
