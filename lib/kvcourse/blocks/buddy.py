"""A buddy allocator over a contiguous arena of KV token slots (§3.2; exercise 2; assignment a1).

Before paging, a serving system (FasterTransformer, Orca) kept each request's KV cache as one
*contiguous* run of token slots. The vLLM paper assumes Orca carves those runs out of one big arena
with a **buddy allocator**:

* every block it hands out is a power of two long, and starts at a multiple of its own size;
* :meth:`BuddyAllocator.alloc` rounds the request up to a power of two, takes the smallest free
  block that is large enough and splits it in halves ("buddies") until it has the size wanted;
* :meth:`BuddyAllocator.free` gives the block back and merges it with its buddy — the other half
  of the block it was split from — for as long as that buddy is free too.

Rounding up wastes slots inside each block (*internal fragmentation*, exercise 2: 300 → 512);
free blocks that are not buddies never merge, so free memory can be plentiful in total but split
into pieces too small for the next request (*external fragmentation*, the 16-slot walk-through
of :mod:`kvcourse.blocks.buddy_demo`, which drives this allocator).

**Arenas whose size is not a power of two.** OPT-13B on an A100-40GB leaves 12,596 KV slots. The
allocator splits such an arena into its binary decomposition, largest first:
``12,596 = 8192 + 4096 + 256 + 32 + 16 + 4``. Each part is a *root* block that starts at a multiple
of its own size (every offset is a sum of larger powers of two), so buddies inside a root are found
as usual by ``offset XOR size``; roots themselves never merge with each other. A request larger
than the largest root (8192 here) can never be served, even from an empty arena.

**Placement.** Among the free blocks of the smallest sufficient size, the one at the lowest offset
is taken, so a run is the same on every machine.

:class:`ContiguousAllocator` is the interface a student's allocator implements in assignment a1;
the simulator of :mod:`kvcourse.serving` accepts any object that has it.

Assignment a1's tests switch off every function defined in this module while a student's code
runs, so the reference answers to its exercises (:func:`round_up_pow2`, :func:`rounding_waste`,
:func:`binary_decomposition`, :class:`BuddyAllocator`) must stay here.

>>> arena = BuddyAllocator(16)
>>> arena.alloc(3), arena.alloc(8), arena.free_blocks()
(0, 8, [(4, 4)])
>>> arena.free(0)
>>> arena.free_blocks()
[(0, 8)]
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from kvcourse._checks import as_index, check_positive_int

__all__ = [
    "EX2_REQUESTS",
    "BuddyAllocator",
    "BuddyBlock",
    "ContiguousAllocator",
    "RoundingWaste",
    "binary_decomposition",
    "round_up_pow2",
    "rounding_waste",
]


@runtime_checkable
class ContiguousAllocator(Protocol):
    """What a contiguous KV allocator must do for the §3 simulator (assignment a1).

    The arena is ``num_slots`` token slots at offsets ``0 .. num_slots − 1``; the allocator decides
    how many it sets aside for each request (a buddy allocator: the next power of two).

    * ``alloc(num_slots)`` returns the offset of a contiguous run of at least ``num_slots`` free
      slots, now allocated, or ``None`` when no free run is large enough (a normal outcome, not an
      error);
    * ``free(offset)`` gives back the run that ``alloc`` returned at ``offset``; an offset it did
      not return (or one already freed) raises ``ValueError`` and changes nothing;
    * ``free_slots()`` counts the slots not allocated;
    * ``free_blocks()`` lists the free runs as ``(offset, size)`` pairs sorted by offset.

    The simulator learns how many slots an allocation really took from how far ``free_slots()``
    fell, so rounding up shows as internal fragmentation without any further method.
    """

    def alloc(self, num_slots: int) -> int | None:
        """Allocate a contiguous run of at least ``num_slots`` slots; its offset, or ``None``."""
        ...

    def free(self, offset: int) -> None:
        """Free the run that :meth:`alloc` returned at ``offset``."""
        ...

    def free_slots(self) -> int:
        """How many slots of the arena are not allocated."""
        ...

    def free_blocks(self) -> list[tuple[int, int]]:
        """The free runs as ``(offset, size)``, sorted by offset."""
        ...


#: How a message about a bad arena size ends: two sizes the course uses.
_ARENA_EXAMPLE = "e.g. 16 (the §3 walk-through) or 12596 (OPT-13B on an A100-40GB)"

# ---------------------------------------------------------------------------- arithmetic


def round_up_pow2(num_slots: int) -> int:
    """The block size a buddy allocator gives a request of ``num_slots`` slots: the smallest power
    of two ≥ ``num_slots`` (300 → 512, 512 → 512, 1 → 1).

    Raises ``ValueError`` for zero or a negative count, ``TypeError`` for a non-integer.
    """
    num_slots = check_positive_int("num_slots", num_slots, "e.g. 300")
    return 1 << (num_slots - 1).bit_length()


def binary_decomposition(num_slots: int) -> list[tuple[int, int]]:
    """The root blocks ``(offset, size)`` of an arena of ``num_slots`` slots: one per set bit,
    largest first, so each starts at a multiple of its own size. 12,596 gives sizes
    8192, 4096, 256, 32, 16 and 4 at offsets 0, 8192, 12288, 12544, 12576 and 12592."""
    num_slots = check_positive_int("arena size", num_slots, _ARENA_EXAMPLE)
    roots = []
    offset = 0
    for bit in range(num_slots.bit_length() - 1, -1, -1):
        size = 1 << bit
        if num_slots & size:
            roots.append((offset, size))
            offset += size
    return roots


@dataclass(frozen=True)
class RoundingWaste:
    """What rounding up to powers of two costs a list of requests (exercise 2).

    ``waste[i] = allocated[i] − requested[i]`` slots are internal fragmentation: set aside for the
    request but never used by it. ``waste_fraction`` is their share of everything allocated.
    """

    requested: tuple[int, ...]
    allocated: tuple[int, ...]
    waste: tuple[int, ...]
    total_allocated: int
    total_waste: int
    waste_fraction: float


#: Exercise 2's three requests, in slots.
EX2_REQUESTS: tuple[int, ...] = (300, 600, 1100)


def rounding_waste(requests: Sequence[int] = EX2_REQUESTS) -> RoundingWaste:
    """Internal fragmentation of a buddy allocator on ``requests`` (slot counts), by arithmetic.

    Exercise 2: 300, 600, 1100 → 512, 1024, 2048 = 3584 allocated; waste 212 + 424 + 948 = 1584
    slots, 44 % of what was allocated.
    """
    if isinstance(requests, (str, bytes)) or not isinstance(requests, Sequence) or not requests:
        raise ValueError(
            f"requests must be a non-empty list of slot counts such as [300, 600, 1100], "
            f"got {requests!r}"
        )
    requested = tuple(check_positive_int("each request", n, "e.g. 300") for n in requests)
    allocated = tuple(round_up_pow2(n) for n in requested)
    waste = tuple(a - n for a, n in zip(allocated, requested, strict=True))
    total = sum(allocated)
    return RoundingWaste(requested, allocated, waste, total, sum(waste), sum(waste) / total)


# ---------------------------------------------------------------------------- the allocator


@dataclass(frozen=True)
class BuddyBlock:
    """One block of a buddy arena, for drawing: ``size`` slots from ``offset``; ``free`` tells
    whether it is on a free list. ``requested`` is what the request asked for (``None`` when free),
    so ``size − requested`` slots of an allocated block are internal fragmentation."""

    offset: int
    size: int
    free: bool
    requested: int | None = None


class BuddyAllocator:
    """A buddy allocator over ``num_slots`` contiguous token slots (any positive size).

    Invariants, true after every call (including one that raised):

    * every block — free or allocated — is a power of two long, starts at a multiple of its size
      and lies inside one root block of :func:`binary_decomposition`;
    * free and allocated blocks never overlap and together cover the arena exactly, so
      ``free_slots() + allocated_slots() == num_slots``;
    * no two free blocks are buddies of each other (a block whose buddy is free has been merged).

    :meth:`alloc` answers ``None`` when no free block is large enough; :meth:`free` raises
    ``ValueError`` for an offset that is not the start of an allocated block and then changes
    nothing.
    """

    def __init__(self, num_slots: int) -> None:
        self._num_slots = check_positive_int("num_slots", num_slots, _ARENA_EXAMPLE)
        self._roots = binary_decomposition(self._num_slots)
        self._root_offsets = [offset for offset, _ in self._roots]
        self._max_block = self._roots[0][1]
        # size -> sorted offsets of free blocks of that size; offset -> size for free blocks
        self._free_lists: dict[int, list[int]] = {}
        self._free_size: dict[int, int] = {}
        self._allocated: dict[int, int] = {}  # offset -> block size
        self._requested: dict[int, int] = {}  # offset -> slots asked for
        self._free_total = 0
        for offset, size in self._roots:
            self._push_free(offset, size)

    # ------------------------------------------------------------------ queries

    @property
    def num_slots(self) -> int:
        """The arena's size in token slots."""
        return self._num_slots

    @property
    def roots(self) -> tuple[tuple[int, int], ...]:
        """The root blocks ``(offset, size)``: the arena's binary decomposition, never merged."""
        return tuple(self._roots)

    @property
    def max_block(self) -> int:
        """The largest block this arena can ever hand out (its largest root)."""
        return self._max_block

    def free_slots(self) -> int:
        """How many slots are on free lists."""
        return self._free_total

    def allocated_slots(self) -> int:
        """How many slots are in allocated blocks, rounding included."""
        return self._num_slots - self._free_total

    def free_blocks(self) -> list[tuple[int, int]]:
        """The free blocks as ``(offset, size)``, sorted by offset."""
        return sorted(self._free_size.items())

    def allocated_blocks(self) -> list[tuple[int, int]]:
        """The allocated blocks as ``(offset, size)``, sorted by offset."""
        return sorted(self._allocated.items())

    def largest_free_block(self) -> int:
        """Size of the largest free block (0 when nothing is free): the biggest block — and so,
        after rounding, the biggest request — that :meth:`alloc` can serve right now."""
        sizes = [size for size, offsets in self._free_lists.items() if offsets]
        return max(sizes, default=0)

    def block_size(self, offset: int) -> int:
        """Size of the allocated block that starts at ``offset`` (``ValueError`` if none does)."""
        offset = as_index(offset, "offset")
        if offset not in self._allocated:
            raise ValueError(self._explain_bad_offset(offset, "has no allocated block"))
        return self._allocated[offset]

    def blocks(self) -> list[BuddyBlock]:
        """Every block, free and allocated, sorted by offset: the arena as a drawing sees it."""
        free = [BuddyBlock(o, s, True) for o, s in self._free_size.items()]
        used = [BuddyBlock(o, s, False, self._requested[o]) for o, s in self._allocated.items()]
        return sorted(free + used, key=lambda block: block.offset)

    def __repr__(self) -> str:
        return (
            f"BuddyAllocator({self._num_slots} slots: {self._free_total} free in "
            f"{len(self._free_size)} blocks, {len(self._allocated)} allocated)"
        )

    # ------------------------------------------------------------------ changes

    def alloc(self, num_slots: int) -> int | None:
        """Allocate a block of ``round_up_pow2(num_slots)`` slots and return its offset.

        Takes the smallest free block that is large enough (the lowest offset among equals) and
        splits it into buddies until it has the wanted size; the upper halves go on the free lists.
        Returns ``None``, changing nothing, when no free block is large enough — even if the free
        slots add up to enough (external fragmentation). ``num_slots`` must be a positive int.
        """
        size = round_up_pow2(num_slots)
        if size > self._max_block:
            return None
        found = size
        while found <= self._max_block and not self._free_lists.get(found):
            found <<= 1
        if found > self._max_block:
            return None
        offset = self._free_lists[found][0]
        self._pop_free(offset, found)
        while found > size:  # split: keep the lower half, free the upper half (its buddy)
            found >>= 1
            self._push_free(offset + found, found)
        self._allocated[offset] = size
        self._requested[offset] = int(num_slots)
        return offset

    def free(self, offset: int) -> None:
        """Free the block that :meth:`alloc` returned at ``offset`` and merge it with its buddy,
        then the merged block with its buddy, and so on, while the buddy is free and the merged
        block stays inside its root.

        Raises ``ValueError`` (changing nothing) when ``offset`` is outside the arena, inside an
        allocated block rather than at its start, or in free memory (a double free).
        """
        offset = as_index(offset, "offset")
        if offset not in self._allocated:
            raise ValueError(self._explain_bad_offset(offset, "cannot be freed"))
        size = self._allocated.pop(offset)
        del self._requested[offset]
        root_size = self._roots[bisect.bisect_right(self._root_offsets, offset) - 1][1]
        while size < root_size:
            buddy = offset ^ size
            if self._free_size.get(buddy) != size:
                break
            self._pop_free(buddy, size)
            offset = min(offset, buddy)
            size <<= 1
        self._push_free(offset, size)

    # ------------------------------------------------------------------ helpers

    def _push_free(self, offset: int, size: int) -> None:
        bisect.insort(self._free_lists.setdefault(size, []), offset)
        self._free_size[offset] = size
        self._free_total += size

    def _pop_free(self, offset: int, size: int) -> None:
        offsets = self._free_lists[size]
        del offsets[bisect.bisect_left(offsets, offset)]
        del self._free_size[offset]
        self._free_total -= size

    def _explain_bad_offset(self, offset: int, what: str) -> str:
        if not 0 <= offset < self._num_slots:
            return (
                f"offset {offset} {what}: it is outside the arena of {self._num_slots} slots "
                f"(offsets 0..{self._num_slots - 1}); pass an offset that alloc() returned"
            )
        for start, size in self._allocated.items():
            if start < offset < start + size:
                return (
                    f"offset {offset} {what}: it lies inside the block allocated at offset "
                    f"{start} ({size} slots); free the offset alloc() returned, {start}"
                )
        return (
            f"offset {offset} {what}: that memory is already free (a double free, or an offset "
            f"alloc() never returned); free each allocated offset exactly once"
        )
