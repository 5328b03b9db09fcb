"""The pool of physical KV blocks (§4.1), with reference counts for sharing (§5) and room for a
prefix cache (§8): block hashes, free-but-cached blocks and eviction.

PagedAttention cuts the KV-cache memory into ``num_blocks`` equal *physical blocks*, each holding
the keys and values of ``block_size`` tokens (its *slots*). :class:`BlockPool` is the bookkeeping
for those blocks and nothing else: which ones are free, how many block tables point at each used
one, and which cached prefix (if any) each one holds. It stores no K or V itself;
:mod:`kvcourse.kv.cache` keeps the tensors, indexed by the block ids handed out here.

It is the §2 physical memory renamed: frame → physical block, page-table entry → block-table
entry. The three operations map onto the lecture's words:

* :meth:`BlockPool.allocate` takes the block at the head of the free queue (reference count
  0 → 1);
* :meth:`BlockPool.share` lets one more block table point at a used block (count + 1; §5 fork);
* :meth:`BlockPool.release` drops one reference; at 0 the block joins the tail of the free queue
  (:meth:`BlockPool.release_many` releases a sequence's blocks in one call, first to evict first).

**Eviction order.** The free blocks wait in a queue
(:class:`~kvcourse.blocks.free_queue.FreeBlockQueue`): a fresh pool queues them in ascending id,
so it hands out 0, 1, 2, ...; a block that goes free joins the tail, so it is handed out after
every block that was free before it. The head is thus the least recently used free block (LRU).
Ids stay deterministic, but after a release they are no longer "lowest id first". (vLLM v1
puts a freed block that holds no hash at the head instead: the option ``uncached_first``.)

**Cached blocks (§8).** A full block can be given a *block hash*
(:meth:`BlockPool.set_block_hash`), the key a prefix cache computes from the tokens it holds.
When such a block goes free it keeps its contents and its hash: it is *free but cached*. A later
request with the same prefix finds it (:meth:`BlockPool.cached_block`) and takes it back out of
the middle of the queue (:meth:`BlockPool.touch`) instead of recomputing it. Only when
:meth:`BlockPool.allocate` hands it out to someone else is the hash dropped: the block is
*evicted*, counted in :attr:`BlockPool.num_evictions` and listed in
:attr:`BlockPool.last_evictions`. (A second block computing a prefix already held stays unnamed;
vLLM v1 names it too: the option ``keep_duplicates``.)

Every method checks its arguments before it changes anything, so an error leaves the pool exactly
as it was. Every operation is O(1), except the queries that list blocks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable

from kvcourse._checks import as_index, check_count, check_positive_int
from kvcourse.blocks.errors import (
    OutOfBlocksError,
    check_taken,
    free_block_message,
    out_of_blocks_message,
)
from kvcourse.blocks.free_queue import FreeBlockQueue
from kvcourse.blocks.hash_index import Eviction, HashIndex, check_hash

__all__ = ["BlockPool", "Eviction", "OutOfBlocksError", "as_index"]


class BlockPool:
    """``num_blocks`` physical blocks of ``block_size`` token slots: a free queue, reference counts
    and block hashes.

    A block is *used* while at least one block table (or, for ``taken`` blocks, some sequence
    outside this demo) holds it, and *free* otherwise. Free blocks are handed out from the head of
    a queue in eviction order (least recently freed first; a fresh pool in ascending id), so a
    demo gives the same block ids every time.

    Invariants, true after every call (including one that raised):

    * no block is both free and used: a block is in the free queue exactly when its reference
      count is 0, and it is there once;
    * reference counts are never negative, and a used block's count is the number of references to
      it (one per block table that lists it);
    * ``num_free + num_used == num_blocks``;
    * a block holds at most one hash, and the lookup is exact: ``cached_block(h)`` is a block
      whose ``block_hash`` is ``h``, and a hash names one block only (unless
      ``keep_duplicates``: then every block whose hash is ``h`` is named, and ``cached_block(h)``
      is the earliest named); ``num_cached_free`` counts the free blocks that have a hash;
    * a block loses its hash only when :meth:`allocate` hands it out (an eviction), never while it
      is referenced.

    ``taken`` lists blocks that are already in use when the pool is created (each with one
    reference), as in §4's demo where other requests hold part of the memory. They can be released
    like any other used block.

    Two rules of vLLM v1 (release v0.33.0, ``vllm/v1/core/block_pool.py``) are options, off in
    the course's pool: ``uncached_first`` puts a freed block that holds no hash at the head of the
    free queue, reused before any cached block is evicted (``BlockPool.free_blocks``, since vLLM
    pull request 42656 of 2026); ``keep_duplicates`` names a block with a hash another block
    already holds (``BlockHashToBlockMap``), so evicting one copy keeps the prefix cached.

    >>> pool = BlockPool(num_blocks=8, block_size=4, taken=[0, 2, 3, 5, 6])
    >>> pool.allocate(), pool.allocate(), pool.num_free
    (1, 4, 1)
    >>> pool.release(1)  # block 1 joins the tail of the free queue, behind block 7
    True
    >>> pool.free_queue(), pool.free_block_ids()
    ((7, 1), (1, 7))
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        *,
        taken: Iterable[int] = (),
        uncached_first: bool = False,
        keep_duplicates: bool = False,
    ) -> None:
        num_blocks = check_positive_int("num_blocks", num_blocks, "e.g. 64")
        block_size = check_positive_int(
            "block_size", block_size, "e.g. 16 (vLLM's default, the paper's and v1's)"
        )
        if not isinstance(uncached_first, bool):
            raise TypeError(f"uncached_first must be True or False, got {uncached_first!r}")
        taken_ids = check_taken(taken, num_blocks)
        self._num_blocks = num_blocks
        self._block_size = block_size
        self._ref_count = [0] * num_blocks
        for block_id in taken_ids:
            self._ref_count[block_id] = 1
        initial = (b for b in range(num_blocks) if self._ref_count[b] == 0)
        self._free = FreeBlockQueue(num_blocks, initial)  # ascending id at the start
        self._hash: list[Hashable | None] = [None] * num_blocks
        self._index = HashIndex(keep_duplicates)  # block hash -> the block(s) that hold it
        self._uncached_first = uncached_first
        self._num_cached_free = 0
        self._num_evictions = 0
        self._last_evictions: tuple[Eviction, ...] = ()

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
        """How many blocks are in the free queue (cached or not)."""
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

    def ref_counts(self) -> tuple[int, ...]:
        """Every block's reference count, by block id: the whole pool at one glance."""
        return tuple(self._ref_count)

    def is_free(self, block_id: int) -> bool:
        """True when block ``block_id`` is in the free queue (reference count 0)."""
        return self._ref_count[self._check_id(block_id)] == 0

    def free_block_ids(self) -> tuple[int, ...]:
        """The free block ids in ascending order: *which* blocks are free (see :meth:`free_queue`
        for the order :meth:`allocate` takes them in)."""
        return tuple(sorted(self._free))

    def free_queue(self) -> tuple[int, ...]:
        """The free block ids in the order :meth:`allocate` will hand them out (head first): the
        eviction order. A fresh pool lists them in ascending id; a released block joins the end.
        """
        return tuple(self._free)

    def used_block_ids(self) -> tuple[int, ...]:
        """The used block ids in ascending order."""
        return tuple(b for b, count in enumerate(self._ref_count) if count > 0)

    # ------------------------------------------------------------------ cache queries (§8)

    @property
    def num_cached(self) -> int:
        """How many blocks hold a block hash, used or free."""
        return len(self._index)

    @property
    def num_cached_free(self) -> int:
        """How many free blocks still hold a block hash: a request with that prefix can
        :meth:`touch` them back, and :meth:`allocate` evicts them when it reaches them."""
        return self._num_cached_free

    @property
    def num_evictions(self) -> int:
        """How many times :meth:`allocate` has handed out a cached block, dropping its hash."""
        return self._num_evictions

    @property
    def last_evictions(self) -> tuple[Eviction, ...]:
        """The evictions made by the latest successful :meth:`allocate` or :meth:`allocate_many`
        (empty if it took only blocks without a hash)."""
        return self._last_evictions

    def block_hash(self, block_id: int) -> Hashable | None:
        """The hash of the prefix block ``block_id`` holds, or ``None`` if it holds none."""
        return self._hash[self._check_id(block_id)]

    def cached_block(self, block_hash: Hashable) -> int | None:
        """The block (used, or free but cached) that holds ``block_hash``, or ``None`` (a miss);
        with ``keep_duplicates``, the earliest named of the blocks that hold it."""
        return self._index.lookup(check_hash(block_hash))

    # ------------------------------------------------------------------ changes

    def allocate(self) -> int:
        """Take the block at the head of the free queue, give it one reference and return its id.

        If that block still holds a hash, the hash is dropped (an eviction: see
        :attr:`last_evictions`). Raises :class:`OutOfBlocksError` (a ``MemoryError``) when every
        block is in use.
        """
        if not self._free:
            raise OutOfBlocksError(out_of_blocks_message(self, 1))
        block_id, eviction = self._take()
        self._last_evictions = () if eviction is None else (eviction,)
        return block_id

    def allocate_many(self, count: int) -> list[int]:
        """Allocate ``count`` blocks at once, all or nothing, in free-queue order.

        Raises :class:`OutOfBlocksError` without taking any block when fewer than ``count`` are
        free, so a caller never has to give back half an allocation.
        """
        count = check_count("count", count)
        if count > len(self._free):
            raise OutOfBlocksError(out_of_blocks_message(self, count))
        taken = [self._take() for _ in range(count)]
        self._last_evictions = tuple(e for _, e in taken if e is not None)
        return [block_id for block_id, _ in taken]

    def allocate_block(self, block_id: int) -> int:
        """Take the free block ``block_id`` wherever it is in the free queue (a cache that picks
        its own victim, LFU for instance, instead of the queue's LRU head); as :meth:`allocate`
        otherwise: one reference, and its hash evicted if it held one. ``ValueError`` for a used
        block."""
        block_id = self._check_id(block_id)
        if self._ref_count[block_id] != 0:
            raise ValueError(f"block {block_id} is in use; allocate_block takes a free block")
        self._free.remove(block_id)
        eviction = self._fill(block_id)
        self._last_evictions = () if eviction is None else (eviction,)
        return block_id

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
        the block joined the tail of the free queue, False while others still hold it.

        A block with a hash keeps it when it goes free (free but cached). With
        ``uncached_first`` a block without a hash joins the head of the queue instead. Releasing
        a free block (a double free) raises ``ValueError`` and changes nothing.
        """
        return bool(self._drop([self._check_used(block_id, "release")]))

    def release_many(self, block_ids: Iterable[int]) -> list[int]:
        """Drop one reference to each of ``block_ids``, given in eviction priority (the block to
        evict first first: a sequence's blocks last block first, as vLLM v1 frees them), and return
        those that went free, in that order. They join the tail of the queue in that order; with
        ``uncached_first`` those without a hash go to the head as a group, the first given at
        the very head (vLLM v1, v0.33.0 ``BlockPool.free_blocks``: ``prepend_n``). All or
        nothing: ``ValueError``, changing nothing, if a block would lose more references than
        it has.
        """
        if isinstance(block_ids, (str, bytes)) or not isinstance(block_ids, Iterable):
            raise TypeError(f"block_ids must be a list of block ids, got {block_ids!r}")
        ids = [self._check_id(b) for b in block_ids]
        for block_id, drops in Counter(ids).items():
            if drops > self._ref_count[block_id]:
                self._check_used(block_id, "release")  # a free block: the double-free message
                raise ValueError(
                    f"cannot release block {block_id} {drops} times: it has only "
                    f"{self._ref_count[block_id]} references; release it once per reference"
                )
        return self._drop(ids)

    def set_block_hash(self, block_id: int, block_hash: Hashable) -> int:
        """Record that used block ``block_id`` holds the prefix named ``block_hash`` and return the
        block that now caches that hash.

        That is ``block_id`` itself, unless another block already holds ``block_hash`` (two
        requests computed the same prefix): then nothing changes, the earlier block is returned,
        and ``block_id`` stays without a hash — or, with ``keep_duplicates`` (vLLM v1),
        ``block_id`` is named too and returned. Setting a block's own hash again is a no-op.
        Raises ``ValueError`` (changing nothing) for a free block, or one that already holds a
        different hash; ``TypeError`` for ``None`` or an unhashable value.
        """
        block_id = self._check_used(block_id, "hash")
        block_hash = check_hash(block_hash)
        own = self._hash[block_id]
        if own is not None and own != block_hash:
            raise ValueError(
                f"block {block_id} already holds hash {self._hash[block_id]!r}; a full block's "
                f"contents do not change, so it cannot get a second hash {block_hash!r}"
            )
        holder = self._index.add(block_hash, block_id)
        if holder == block_id:
            self._hash[block_id] = block_hash
        return holder

    def touch(self, block_hash: Hashable) -> int:
        """A cache hit: take one reference to the block that holds ``block_hash`` and return it.

        A free but cached block comes out of the free queue (wherever it is, in O(1)) with count
        1: it is *revived*, its KV still there. A used one gets one more reference, as
        :meth:`share` would give it. Raises ``ValueError`` when no block holds the hash (a miss:
        ask :meth:`cached_block` first).
        """
        block_id = self._index.lookup(check_hash(block_hash))
        if block_id is None:
            raise ValueError(
                f"no block holds hash {block_hash!r} (a cache miss, or it was evicted); check "
                f"cached_block() first and allocate() a new block on a miss"
            )
        if self._ref_count[block_id] == 0:
            self._free.remove(block_id)
            self._num_cached_free -= 1
        self._ref_count[block_id] += 1
        return block_id

    # ------------------------------------------------------------------ helpers

    def __repr__(self) -> str:
        return (
            f"BlockPool({self._num_blocks} blocks x {self._block_size} slots: "
            f"{self.num_free} free, {self.num_used} used)"
        )

    def _take(self) -> tuple[int, Eviction | None]:
        """Pop the head of a non-empty free queue, evicting its hash; reference count 1."""
        block_id = self._free.popleft()
        return block_id, self._fill(block_id)

    def _drop(self, ids: list[int]) -> list[int]:
        """One reference less on each of ``ids`` (checked); the blocks freed, queued by the rule."""
        freed, first = [], []
        for block_id in ids:
            self._ref_count[block_id] -= 1
            if self._ref_count[block_id] == 0:
                freed.append(block_id)
                if self._hash[block_id] is not None:
                    self._num_cached_free += 1
                    self._free.append(block_id)
                elif self._uncached_first:
                    first.append(block_id)
                else:
                    self._free.append(block_id)
        for block_id in reversed(first):
            self._free.appendleft(block_id)
        return freed

    def _fill(self, block_id: int) -> Eviction | None:
        """A block just taken out of the free queue: one reference, its hash (if any) evicted."""
        self._ref_count[block_id] = 1
        old_hash = self._hash[block_id]
        if old_hash is None:
            return None
        self._hash[block_id] = None
        self._index.remove(old_hash, block_id)
        self._num_cached_free -= 1
        self._num_evictions += 1
        return Eviction(block_id, old_hash)

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
            raise ValueError(free_block_message(block_id, action))
        return block_id
