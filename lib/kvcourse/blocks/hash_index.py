"""Which blocks hold which cached prefix (§8): a block pool's map from block hashes to blocks.

A :class:`~kvcourse.blocks.pool.BlockPool` names a full block by its block hash (the chained hash
of :mod:`kvcourse.blocks.hashing`) and keeps this index to find a block by its name. The index
decides one question: what happens when a second block gets a hash that a block already holds,
because two requests computed the same prefix (both prefilled it before either was named, or the
second recomputed a block that a hit could not reach, such as the last block of a prompt that is a
whole number of blocks)?

* ``keep_duplicates=False``, the course's rule: the first block keeps the name and the second
  stays unnamed (:meth:`HashIndex.add` returns the first). When the first is evicted the prefix is
  gone from the cache, although the second block still holds the same KV;
* ``keep_duplicates=True``, vLLM v1's (release v0.33.0, ``vllm/v1/core/block_pool.py``,
  ``BlockHashToBlockMap``: "we currently don't de-duplicate the blocks in the cache"): both blocks
  are named. A lookup returns the earliest named block that still holds the hash
  (``get_one_block``), and evicting one block removes that block only (``pop(key, block_id)``), so
  the prefix stays cached while any copy does.

>>> index = HashIndex(keep_duplicates=True)
>>> index.add("h", 3), index.add("h", 5)  # block 5 computed the same prefix: named too
(3, 5)
>>> index.remove("h", 3)  # block 3 is evicted
>>> index.lookup("h"), len(index)
(5, 1)
>>> course = HashIndex()
>>> course.add("h", 3), course.add("h", 5)  # block 5 stays unnamed
(3, 3)
>>> course.remove("h", 3)
>>> course.lookup("h") is None
True
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

__all__ = ["Eviction", "HashIndex", "check_hash"]


@dataclass(frozen=True)
class Eviction:
    """A cached block handed out to someone else: block ``block_id`` lost ``block_hash``, so the
    prefix it held must be recomputed by the next request that needs it (unless, with
    ``keep_duplicates``, another block still holds it)."""

    block_id: int
    block_hash: Hashable


class HashIndex:
    """Block hash → the blocks that hold it: one per hash, or (``keep_duplicates``) every block
    named with it, the earliest first.

    Invariants: :meth:`lookup` returns a block whose hash was added and not removed, the earliest
    such; ``len`` counts the named blocks (with duplicates, more than the hashes); a block is named
    at most once under one hash. The index checks nothing about the blocks themselves: the pool
    does (a block holds one hash, only a used block is named).
    """

    def __init__(self, keep_duplicates: bool = False) -> None:
        if not isinstance(keep_duplicates, bool):
            raise TypeError(f"keep_duplicates must be True or False, got {keep_duplicates!r}")
        self._keep_duplicates = keep_duplicates
        self._first: dict[Hashable, int] = {}  # hash -> the earliest block named with it
        self._more: dict[Hashable, list[int]] = {}  # hash -> later blocks, in naming order
        self._count = 0

    @property
    def keep_duplicates(self) -> bool:
        """Whether a second block with a hash already held is named too (vLLM v1's rule)."""
        return self._keep_duplicates

    def __len__(self) -> int:
        return self._count

    def lookup(self, block_hash: Hashable) -> int | None:
        """The earliest named block that holds ``block_hash``, or ``None``."""
        return self._first.get(block_hash)

    def add(self, block_hash: Hashable, block_id: int) -> int:
        """Name ``block_id`` with ``block_hash`` if the rule allows; return the block a lookup of
        the hash now finds. That is ``block_id`` for a new hash; for a hash already held, the
        earlier block, with ``block_id`` left unnamed (course) or named as a duplicate (v1: the
        return value is then ``block_id``, which holds the name too)."""
        first = self._first.get(block_hash)
        if first is None:
            self._first[block_hash] = block_id
            self._count += 1
            return block_id
        if first == block_id or not self._keep_duplicates:
            return first
        more = self._more.setdefault(block_hash, [])
        if block_id not in more:
            more.append(block_id)
            self._count += 1
        return block_id

    def holds(self, block_hash: Hashable, block_id: int) -> bool:
        """Whether ``block_id`` is named with ``block_hash`` here (first or duplicate)."""
        return self._first.get(block_hash) == block_id or block_id in self._more.get(block_hash, ())

    def remove(self, block_hash: Hashable, block_id: int) -> None:
        """Drop ``block_id``'s name ``block_hash`` (an eviction); a duplicate, if any, becomes the
        block a lookup finds. ``KeyError`` if the block is not named with that hash."""
        more = self._more.get(block_hash)
        if self._first.get(block_hash) == block_id:
            if more:
                self._first[block_hash] = more.pop(0)
                if not more:
                    del self._more[block_hash]
            else:
                del self._first[block_hash]
        elif more and block_id in more:
            more.remove(block_id)
            if not more:
                del self._more[block_hash]
        else:
            raise KeyError(f"block {block_id} is not named {block_hash!r} in this index")
        self._count -= 1


def check_hash(block_hash: object) -> Hashable:
    """``block_hash`` if it can key the index (hashable, not ``None``); ``TypeError`` otherwise."""
    if block_hash is None:
        raise TypeError("a block hash must not be None (None means 'no hash'); pass an int or str")
    try:
        hash(block_hash)
    except TypeError:
        raise TypeError(
            f"a block hash must be hashable (an int, str, bytes or tuple of them), got "
            f"{block_hash!r} ({type(block_hash).__name__})"
        ) from None
    return block_hash
