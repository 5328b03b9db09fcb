"""The free-block queue of a :class:`~kvcourse.blocks.pool.BlockPool` (§4.1, and §8's eviction).

A pool hands out free blocks in *eviction order*: the block at the head of the queue is the next
one :meth:`~kvcourse.blocks.pool.BlockPool.allocate` takes, and a block that goes free joins the
tail. When a free block still holds a cached prefix (§8), handing it out evicts that prefix, so
the head is the least recently used block: the order is **LRU**.

Prefix caching also needs to take a block out of the *middle* of the queue, when a new request
finds the prefix it holds and revives it. A heap or a sorted list would make that O(log n) or
O(n); a doubly linked list does each operation in O(1):

* :meth:`FreeBlockQueue.popleft` takes the head (the block to hand out next);
* :meth:`FreeBlockQueue.append` puts a block at the tail (it was just freed: evict it last);
* :meth:`FreeBlockQueue.appendleft` puts a block at the head (a freed block that holds nothing
  worth keeping, handed out first: vLLM v1's rule for blocks without a hash, v0.33.0
  ``BlockPool.free_blocks``);
* :meth:`FreeBlockQueue.remove` unlinks a block wherever it is (a revived cached block).

The links are two plain lists indexed by block id, ``next`` and ``prev``, with one extra entry
(index ``num_blocks``) as a *sentinel*: the list is a ring through the sentinel, so the head is
``next[sentinel]``, the tail ``prev[sentinel]``, and an empty queue is the sentinel linked to
itself. No block needs a special case for being first or last. A block that is not in the queue
has ``next == prev == -1``.

This is bookkeeping only, like the rest of :mod:`kvcourse.blocks`: block ids, no K or V.

>>> queue = FreeBlockQueue(5, [0, 1, 2, 3])
>>> queue.popleft(), queue.popleft()
(0, 1)
>>> queue.append(0)  # block 0 goes free again: it joins the tail
>>> queue.remove(3)  # block 3 is revived from the middle
>>> list(queue)
[2, 0]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from kvcourse._checks import as_index, check_positive_int

__all__ = ["FreeBlockQueue"]

_OUT = -1  # the link value of a block that is not in the queue


class FreeBlockQueue:
    """The free blocks of a pool of ``num_blocks``, in the order they will be handed out.

    ``initial`` lists the blocks that start in the queue, head first (a pool passes its free
    blocks in ascending id, so a fresh pool hands out 0, 1, 2, ...).

    Invariants, true after every call (including one that raised):

    * following ``next`` from the sentinel visits each queued block once and comes back to the
      sentinel after ``len(queue)`` steps; ``prev`` is the same walk backwards;
    * a block is in the queue exactly when its links are not ``-1``, so no block is queued twice.

    Every operation is O(1) except iterating, which is O(length).
    """

    def __init__(self, num_blocks: int, initial: Iterable[int] = ()) -> None:
        num_blocks = check_positive_int("num_blocks", num_blocks)
        self._num_blocks = num_blocks
        self._sentinel = num_blocks
        self._next = [_OUT] * num_blocks + [num_blocks]
        self._prev = [_OUT] * num_blocks + [num_blocks]
        self._length = 0
        for block_id in initial:
            self.append(block_id)

    # ------------------------------------------------------------------ queries

    def __len__(self) -> int:
        return self._length

    def __contains__(self, block_id: object) -> bool:
        try:
            block_id = as_index(block_id)
        except TypeError:
            return False
        return 0 <= block_id < self._num_blocks and self._next[block_id] != _OUT

    def __iter__(self) -> Iterator[int]:
        """The queued blocks from head to tail: the order :meth:`popleft` will take them."""
        block_id = self._next[self._sentinel]
        while block_id != self._sentinel:
            yield block_id
            block_id = self._next[block_id]

    def __repr__(self) -> str:
        return f"FreeBlockQueue(head→tail {list(self)})"

    @property
    def head(self) -> int | None:
        """The block :meth:`popleft` would take next, or ``None`` when the queue is empty."""
        head = self._next[self._sentinel]
        return None if head == self._sentinel else head

    # ------------------------------------------------------------------ changes

    def popleft(self) -> int:
        """Take the head block (the next to hand out) off the queue and return it.

        Raises ``IndexError`` when the queue is empty.
        """
        head = self._next[self._sentinel]
        if head == self._sentinel:
            raise IndexError("the free-block queue is empty: no block is free")
        self._unlink(head)
        return head

    def append(self, block_id: int) -> None:
        """Put ``block_id`` at the tail: it was freed last, so it is handed out last.

        Raises ``ValueError`` (changing nothing) if it is already queued or does not exist.
        """
        block_id = self._check(block_id)
        if self._next[block_id] != _OUT:
            raise ValueError(f"block {block_id} is already in the free queue; queue it once")
        tail = self._prev[self._sentinel]
        self._next[tail] = block_id
        self._prev[block_id] = tail
        self._next[block_id] = self._sentinel
        self._prev[self._sentinel] = block_id
        self._length += 1

    def appendleft(self, block_id: int) -> None:
        """Put ``block_id`` at the head: it is handed out next, before every block already queued.

        Raises ``ValueError`` (changing nothing) if it is already queued or does not exist.
        """
        block_id = self._check(block_id)
        if self._next[block_id] != _OUT:
            raise ValueError(f"block {block_id} is already in the free queue; queue it once")
        head = self._next[self._sentinel]
        self._prev[head] = block_id
        self._next[block_id] = head
        self._prev[block_id] = self._sentinel
        self._next[self._sentinel] = block_id
        self._length += 1

    def remove(self, block_id: int) -> None:
        """Unlink ``block_id`` from wherever it is in the queue, in O(1).

        Raises ``ValueError`` (changing nothing) if it is not queued.
        """
        block_id = self._check(block_id)
        if self._next[block_id] == _OUT:
            raise ValueError(f"block {block_id} is not in the free queue, so it cannot be removed")
        self._unlink(block_id)

    # ------------------------------------------------------------------ checks

    def check_links(self) -> None:
        """Raise ``AssertionError`` unless the invariants hold (for tests; O(num_blocks))."""
        forward, backward = [], []  # both walks stop after num_blocks + 1 steps, even on a cycle
        block_id = self._next[self._sentinel]
        while block_id != self._sentinel and len(forward) <= self._num_blocks:
            forward.append(block_id)
            block_id = self._next[block_id]
        block_id = self._prev[self._sentinel]
        while block_id != self._sentinel and len(backward) <= self._num_blocks:
            backward.append(block_id)
            block_id = self._prev[block_id]
        queued = set(forward)
        linked = {
            b for b in range(self._num_blocks) if self._next[b] != _OUT or self._prev[b] != _OUT
        }
        problems = [
            (len(forward) != self._length, "the walk from the head does not match the length"),
            (len(queued) != len(forward), "a block is queued twice"),
            (backward[::-1] != forward, "the prev links do not retrace the next links"),
            (linked != queued, "a block has links but is not queued, or the other way round"),
        ]
        for broken, message in problems:
            if broken:
                raise AssertionError(f"free queue broken: {message}; head to tail: {forward}")

    # ------------------------------------------------------------------ helpers

    def _unlink(self, block_id: int) -> None:
        before, after = self._prev[block_id], self._next[block_id]
        self._next[before] = after
        self._prev[after] = before
        self._next[block_id] = self._prev[block_id] = _OUT
        self._length -= 1

    def _check(self, block_id: object) -> int:
        block_id = as_index(block_id)
        if not 0 <= block_id < self._num_blocks:
            raise ValueError(
                f"block {block_id} does not exist: the queue holds ids 0..{self._num_blocks - 1}"
            )
        return block_id
