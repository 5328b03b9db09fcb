"""Sharing KV blocks between sequences (§5): fork, append with copy-on-write, free.

Parallel sampling, beam search and shared system prompts all come down to the same three
operations on block tables (vLLM paper §4.4 and §5.2):

* **fork** ``(parent, child)``: the child's block table lists the parent's physical blocks, in the
  same order, and each of those blocks gets one more reference. Nothing is copied; the child can
  read all of the parent's KV at once.
* **append** ``(seq, n)``: make room for ``n`` new tokens. The new tokens first go into the free
  slots of the last block. If that block is *partly filled and shared* (reference count > 1),
  writing there would change the other sequences' KV too, so the sequence first gets its own copy:
  a new block is allocated, the filled slots are copied into it, and the shared block loses one
  reference (**copy-on-write**, like the page copy after a Unix ``fork()``). A *full* last block
  needs no copy: the next token goes into a newly allocated block. Blocks before the last are
  never written, so they stay shared for as long as the sequences live.
* **free** ``(seq)``: drop one reference to every block of the sequence; blocks whose count reaches
  0 go back to the pool's free list.

One sharer never copies: when the earlier writers have made their copies, the last one finds the
reference count down to 1 and writes in place. So ``n`` samples forked from a prompt whose last
block is partly filled make exactly ``n − 1`` copies (Ex 4), and none when the prompt fills its
last block exactly.

What is here:

* :class:`ForkAppendFree`: the interface a block manager with sharing provides (the piece a
  student builds in assignment a3), and nothing more: ``add_sequence``, ``fork``, ``append``,
  ``free``, and the read-only ``block_ids``, ``pool`` (for reference counts) and ``cow_count``.
* :class:`SharedBlockManager`: the reference implementation, bookkeeping only (no K/V), with a log
  of every copy-on-write (:class:`CopyOnWrite`). Each of its sequences is a
  :class:`~kvcourse.blocks.table.BlockTable` over the one pool; the manager adds the sequence ids,
  the all-or-nothing check of an append and the copy log.

K and V come in one layer up: :class:`~kvcourse.kv.sharing_cache.SharingPagedKVCache` is a paged KV
cache whose block tables come from any :class:`ForkAppendFree` manager, so fork and copy-on-write
act on real K/V there.

Every operation checks its arguments (unknown or freed sequence, an id already in use, a negative
token count, not enough free blocks) before it changes anything, so an error leaves the manager
and the pool exactly as they were.

>>> from kvcourse.blocks.pool import BlockPool
>>> manager = SharedBlockManager(BlockPool(num_blocks=16, block_size=16))
>>> manager.add_sequence("prompt")
>>> manager.append("prompt", 100)  # 6 full blocks and 4 tokens in a 7th
>>> manager.fork("prompt", "sample 1")
>>> manager.block_ids("sample 1") == manager.block_ids("prompt"), manager.pool.ref_count(6)
(True, 2)
>>> manager.append("prompt", 1)  # block 6 is shared and partly filled: copy it first
>>> manager.block_ids("prompt")[-1], manager.cow_count, manager.copied_tokens
(7, 1, 4)
>>> manager.append("sample 1", 1)  # block 6 now has one holder: written in place
>>> manager.block_ids("sample 1")[-1], manager.cow_count
(6, 1)
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from kvcourse._checks import as_index, check_count
from kvcourse.blocks.errors import OutOfBlocksError, UnknownSequenceError
from kvcourse.blocks.pool import BlockPool
from kvcourse.blocks.table import BlockTable, BlockTableEntry

__all__ = [
    "CopyOnWrite",
    "ForkAppendFree",
    "SharedBlockManager",
    "UnknownSequenceError",
    "check_manager",
]


# ---------------------------------------------------------------------------- the interface


@runtime_checkable
class ForkAppendFree(Protocol):
    """What a block manager with sharing must provide (assignment a3).

    Sequences are named by any hashable id (an int, a string). The manager keeps, for each live
    sequence, its block table (physical block ids in logical order) and its token count, and
    keeps the pool's reference counts equal to the number of block tables listing each block.
    """

    @property
    def pool(self) -> BlockPool:
        """The :class:`~kvcourse.blocks.pool.BlockPool` the blocks come from; its ``ref_count``
        tells how many block tables list a block."""
        ...

    @property
    def cow_count(self) -> int:
        """How many copy-on-writes :meth:`append` has made so far."""
        ...

    def add_sequence(self, seq_id: Hashable) -> None:
        """Start a new, empty sequence ``seq_id`` (then :meth:`append` its prompt)."""
        ...

    def fork(self, parent_id: Hashable, child_id: Hashable) -> None:
        """Create ``child_id`` sharing all of ``parent_id``'s blocks: same block ids, same token
        count, every block's reference count + 1, nothing copied."""
        ...

    def append(self, seq_id: Hashable, num_tokens: int = 1) -> None:
        """Make room for ``num_tokens`` more tokens, copying a shared, partly filled last block
        first (copy-on-write) and allocating new blocks as the last one fills."""
        ...

    def free(self, seq_id: Hashable) -> None:
        """Drop the sequence's reference to each of its blocks and forget the sequence."""
        ...

    def block_ids(self, seq_id: Hashable) -> Sequence[int]:
        """The sequence's physical block ids in logical order."""
        ...


def check_manager(manager: object, pool: BlockPool | None = None) -> ForkAppendFree:
    """Return ``manager`` if it provides the :class:`ForkAppendFree` interface (and uses ``pool``,
    when one is given); raise ``TypeError`` naming what is missing otherwise.

    The drivers in :mod:`kvcourse.generation` call it on whatever block manager they are given, so a
    student's class that lacks a method fails with a message, not with an ``AttributeError`` deep
    inside a simulation.
    """
    needed = ("pool", "cow_count", "add_sequence", "fork", "append", "free", "block_ids")
    missing = [name for name in needed if not hasattr(manager, name)]
    if missing:
        raise TypeError(
            f"{type(manager).__name__} is not a block manager with sharing: it lacks "
            f"{', '.join(missing)}. It needs add_sequence, fork, append, free, block_ids and the "
            f"attributes pool and cow_count (see kvcourse.blocks.sharing.ForkAppendFree)"
        )
    if pool is not None and manager.pool is not pool:  # type: ignore[attr-defined]
        raise ValueError(
            f"{type(manager).__name__}.pool is not the pool it was meant to manage; build the "
            f"manager over the same BlockPool"
        )
    return manager  # type: ignore[return-value]


# ---------------------------------------------------------------------------- records


@dataclass(frozen=True)
class CopyOnWrite:
    """One copy-on-write: before writing, sequence ``seq_id`` copied the ``tokens`` filled slots
    of the shared block ``source`` into its new block ``target``, and let go of ``source``."""

    seq_id: Hashable
    source: int
    target: int
    tokens: int


# ---------------------------------------------------------------------------- the reference manager


class SharedBlockManager:
    """The reference block manager with sharing: fork, append with copy-on-write, free.

    Bookkeeping only (block ids and counts);
    :class:`~kvcourse.kv.sharing_cache.SharingPagedKVCache` puts K and V behind it.
    Each sequence is a :class:`~kvcourse.blocks.table.BlockTable` over :attr:`pool`: fork is
    :meth:`BlockTable.fork <kvcourse.blocks.table.BlockTable.fork>`, copy-on-write is
    :meth:`BlockTable.unshare_last_block <kvcourse.blocks.table.BlockTable.unshare_last_block>`.

    Invariants, true after every call (including one that raised):

    * each block's pool reference count equals the number of live sequences whose block table
      lists it (counting ``taken`` blocks and other holders of the pool separately);
    * each sequence holds exactly ``ceil(num_tokens / block_size)`` blocks;
    * at most one holder of a partly filled block has written into it since it was shared: only
      the last block of a sequence is ever written, and only when the writer holds it alone.

    Besides the :class:`ForkAppendFree` interface it offers the queries the book draws with
    (:meth:`num_tokens`, :meth:`entries`, :meth:`holders`, :meth:`blocks_needed`) and the copy log
    (:attr:`copied_tokens`, :attr:`cow_events`).
    """

    def __init__(self, pool: BlockPool) -> None:
        if not isinstance(pool, BlockPool):
            raise TypeError(f"pool must be a BlockPool, got {pool!r}")
        self._pool = pool
        self._seqs: dict[Hashable, BlockTable] = {}
        self._freed: set[Hashable] = set()
        self._events: list[CopyOnWrite] = []
        self._copied_tokens = 0

    # ------------------------------------------------------------------ read-only queries

    @property
    def pool(self) -> BlockPool:
        """The block pool; ``pool.ref_count(b)`` is how many sequences list block ``b``."""
        return self._pool

    @property
    def block_size(self) -> int:
        """Token slots per block (the pool's B)."""
        return self._pool.block_size

    @property
    def cow_count(self) -> int:
        """How many copy-on-writes :meth:`append` has made."""
        return len(self._events)

    @property
    def copied_tokens(self) -> int:
        """Token slots copied by copy-on-write: the filled slots of each copied block, summed.

        (A GPU copy kernel moves whole blocks; ``cow_count × block_size`` counts that way.)
        """
        return self._copied_tokens

    @property
    def cow_events(self) -> tuple[CopyOnWrite, ...]:
        """Every copy-on-write so far, oldest first."""
        return tuple(self._events)

    @property
    def seq_ids(self) -> tuple[Hashable, ...]:
        """The live sequences, in the order they were created."""
        return tuple(self._seqs)

    def __contains__(self, seq_id: object) -> bool:
        return isinstance(seq_id, Hashable) and seq_id in self._seqs

    def __len__(self) -> int:
        return len(self._seqs)

    def __repr__(self) -> str:
        return (
            f"SharedBlockManager({len(self._seqs)} sequences, {self._pool.num_used} of "
            f"{self._pool.num_blocks} blocks used, {self.cow_count} copy-on-writes)"
        )

    def block_ids(self, seq_id: Hashable) -> tuple[int, ...]:
        """The sequence's physical block ids in logical order."""
        return self._get(seq_id, "read").block_ids

    def num_tokens(self, seq_id: Hashable) -> int:
        """How many tokens the sequence holds."""
        return self._get(seq_id, "read").num_tokens

    def entries(self, seq_id: Hashable) -> list[BlockTableEntry]:
        """The sequence's block table as rows ``(logical, physical, filled)``, for drawing."""
        return self._get(seq_id, "read").entries()

    def holders(self, block_id: int) -> tuple[Hashable, ...]:
        """The live sequences whose block table lists ``block_id``, in creation order."""
        block_id = as_index(block_id)
        return tuple(s for s, table in self._seqs.items() if block_id in table.block_ids)

    def blocks_needed(self, seq_id: Hashable, num_tokens: int = 1) -> int:
        """How many free blocks :meth:`append` of ``num_tokens`` would take right now: new blocks
        for the tokens that do not fit, plus one if the last block must be copied first."""
        table = self._get(seq_id, "append to")
        num_tokens = check_count("num_tokens", num_tokens)
        return sum(self._plan(table, num_tokens))

    # ------------------------------------------------------------------ the three operations

    def add_sequence(self, seq_id: Hashable) -> None:
        """Start a new, empty sequence ``seq_id``; :meth:`append` its prompt next.

        Raises ``ValueError`` if ``seq_id`` is live already (pick a new id, or free it first).
        """
        self._check_new(seq_id)
        self._seqs[seq_id] = BlockTable(self._pool)
        self._freed.discard(seq_id)

    def fork(self, parent_id: Hashable, child_id: Hashable) -> None:
        """Create ``child_id`` as a copy of ``parent_id`` that shares all its blocks.

        The child's block table lists the parent's blocks and each of them gains one reference;
        no K or V is copied. Raises ``UnknownSequenceError`` for a parent that does not exist (or
        was freed) and ``ValueError`` for a child id that is live already.
        """
        parent = self._get(parent_id, "fork")
        self._check_new(child_id)
        stale = parent.under_referenced()  # a table lists a block once, so: a free block
        if stale:
            raise RuntimeError(
                f"block {stale[0]} of sequence {parent_id!r} is free in the pool; it was "
                f"released behind the manager's back. Release blocks only through free()"
            )
        self._seqs[child_id] = parent.fork()
        self._freed.discard(child_id)

    def append(self, seq_id: Hashable, num_tokens: int = 1) -> None:
        """Make room for ``num_tokens`` more tokens of ``seq_id``.

        If the last block is partly filled and shared, copy-on-write first: allocate a block,
        copy the filled slots (counted in :attr:`copied_tokens`), release the shared block and
        put the copy in its place. Then fill the last block and allocate new ones as needed.
        All or nothing: :class:`~kvcourse.blocks.pool.OutOfBlocksError` (too few free blocks for
        the copy and the new blocks together) leaves everything unchanged.
        """
        table = self._get(seq_id, "append to")
        num_tokens = check_count("num_tokens", num_tokens)
        copy, new_blocks = self._plan(table, num_tokens)
        if copy + new_blocks > self._pool.num_free:
            raise OutOfBlocksError(
                f"appending {num_tokens} tokens to sequence {seq_id!r} needs "
                f"{copy + new_blocks} free blocks ({new_blocks} new"
                f"{', 1 to copy the shared last block' if copy else ''}) but only "
                f"{self._pool.num_free} of {self._pool.num_blocks} are free; free a finished "
                f"sequence (or preempt one, §6) first"
            )
        if copy:
            source, target = table.unshare_last_block()
            filled = table.num_tokens % self._pool.block_size
            self._events.append(CopyOnWrite(seq_id, source, target, filled))
            self._copied_tokens += filled
        table.append(num_tokens)  # the room was checked above, so this cannot fail

    def free(self, seq_id: Hashable) -> None:
        """Drop ``seq_id``'s reference to each of its blocks and forget the sequence.

        Blocks nobody else lists return to the pool's free list; shared ones just lose one
        reference. Freeing a sequence twice raises ``UnknownSequenceError`` and changes nothing.
        """
        table = self._get(seq_id, "free")
        stale = table.under_referenced()
        if stale:
            raise RuntimeError(
                f"block {stale[0]} has fewer pool references than sequence {seq_id!r} holds; "
                f"it was released behind the manager's back. Release blocks only through "
                f"free()"
            )
        table.free()
        del self._seqs[seq_id]
        self._freed.add(seq_id)

    # ------------------------------------------------------------------ helpers

    def _plan(self, table: BlockTable, num_tokens: int) -> tuple[int, int]:
        """(1 if the last block must be copied first else 0, new blocks for the tokens)."""
        if num_tokens == 0:
            return 0, 0
        return int(table.last_block_shared), table.blocks_needed(num_tokens)

    def _get(self, seq_id: object, action: str) -> BlockTable:
        if isinstance(seq_id, Hashable) and seq_id in self._seqs:
            return self._seqs[seq_id]
        if isinstance(seq_id, Hashable) and seq_id in self._freed:
            raise UnknownSequenceError(
                f"cannot {action} sequence {seq_id!r}: it has been freed already (a double free "
                f"or a use after free); fork or add a sequence again before using its id"
            )
        known = ", ".join(repr(s) for s in list(self._seqs)[:10]) or "none"
        raise UnknownSequenceError(
            f"cannot {action} sequence {seq_id!r}: no such sequence (live sequences: {known}); "
            f"create it with add_sequence() or fork() first"
        )

    def _check_new(self, seq_id: object) -> None:
        if not isinstance(seq_id, Hashable):
            raise TypeError(f"a sequence id must be hashable (an int or a str), got {seq_id!r}")
        if seq_id in self._seqs:
            raise ValueError(
                f"sequence {seq_id!r} already exists; pick a new id, or free({seq_id!r}) first"
            )
