"""The 16-slot walk-through of §3.2: a buddy allocator runs out of contiguous memory with a third
of it free (external fragmentation).

A asks for 4 slots, B for 2 and C for 4; all fit. Then D asks for 6: ten slots are allocated and
six are free, but as a 2-slot block and a 4-slot block with C in between, so D fails.
:func:`buddy_walkthrough` replays such a script of allocations and frees and records the arena
after every step (:class:`WalkthroughStep`), for the lecture's table and for
:func:`kvcourse.viz.buddy.draw_buddy_walkthrough`. It runs on the library's
:class:`~kvcourse.blocks.buddy.BuddyAllocator` or on any
:class:`~kvcourse.blocks.buddy.ContiguousAllocator`, such as a student's from assignment a1.

The allocator itself is :mod:`kvcourse.blocks.buddy`; this module only drives it.

>>> steps = buddy_walkthrough()
>>> [step.description for step in steps[1:]]  # doctest: +NORMALIZE_WHITESPACE
['A asks for 4 slots: gets offset 0', 'B asks for 2 slots: gets offset 4',
 'C asks for 4 slots: gets offset 8', 'D asks for 6 slots: fails (6 free as 4 + 2)']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvcourse._checks import check_positive_int
from kvcourse.blocks.buddy import BuddyAllocator, ContiguousAllocator

__all__ = ["WALKTHROUGH_REQUESTS", "WalkthroughStep", "buddy_walkthrough"]

#: The 16-slot walk-through (§3.2): A asks for 4 slots, B for 2, C for 4 — all fit — and then D
#: asks for 6. Ten slots are allocated and 6 are free, but as a 2-slot block at offset 6 and a
#: 4-slot block at offset 12, with C in between; no free run is even 6 long (and the buddy
#: allocator would need an 8-slot block for D), so D fails.
WALKTHROUGH_REQUESTS: tuple[tuple[str, int | None], ...] = (("A", 4), ("B", 2), ("C", 4), ("D", 6))


@dataclass(frozen=True)
class WalkthroughStep:
    """The arena after one step of a walk-through, for drawing.

    ``action`` is ``"start"``, ``"alloc"`` or ``"free"``; ``name`` and ``slots`` say who asked for
    how much; ``offset`` is where the block went (``None`` when the allocation failed, and for
    ``"start"``); ``ok`` tells whether the step succeeded. ``blocks`` covers the arena as
    ``(offset, size, owner)`` with ``owner`` ``None`` for a free block.
    """

    action: str
    name: str | None
    slots: int | None
    offset: int | None
    ok: bool
    blocks: tuple[tuple[int, int, str | None], ...]
    free_slots: int
    largest_free_block: int

    @property
    def description(self) -> str:
        """One line for a caption, e.g. ``"D asks for 6 slots: fails (6 free as 4 + 2)"``."""
        if self.action == "start":
            return f"start: {self.free_slots} free slots"
        if self.action == "free":
            return f"{self.name} frees its block at offset {self.offset}"
        if self.ok:
            return f"{self.name} asks for {self.slots} slots: gets offset {self.offset}"
        sizes = sorted((size for _, size, owner in self.blocks if owner is None), reverse=True)
        pieces = " + ".join(str(size) for size in sizes) or "nothing"
        return (
            f"{self.name} asks for {self.slots} slots: fails ({self.free_slots} free as {pieces})"
        )


def buddy_walkthrough(
    num_slots: int = 16,
    steps: Sequence[tuple[str, int | None]] = WALKTHROUGH_REQUESTS,
    *,
    allocator: ContiguousAllocator | None = None,
) -> list[WalkthroughStep]:
    """Run a walk-through and return the arena's state after each step (first: the empty arena).

    Each step is ``(name, slots)``: allocate ``slots`` for ``name``; ``(name, None)`` frees
    ``name``'s block. The default is the lecture's 16-slot demo (:data:`WALKTHROUGH_REQUESTS`):
    A, B and C fit, D fails although 6 slots are free — as 4 + 2, apart.

    ``allocator`` lets a student's :class:`ContiguousAllocator` (an empty one over ``num_slots``
    slots) run the same steps; by default a new :class:`BuddyAllocator` does. Block sizes are read
    from how far ``free_slots()`` falls, so any allocator that keeps the protocol can be drawn.
    """
    arena = BuddyAllocator(num_slots) if allocator is None else allocator
    if not isinstance(arena, ContiguousAllocator):
        raise TypeError(
            f"allocator must implement ContiguousAllocator (alloc, free, free_slots, "
            f"free_blocks), got {arena!r}"
        )
    if arena.free_slots() != num_slots:
        raise ValueError(
            f"the allocator must start empty over {num_slots} slots, but free_slots() is "
            f"{arena.free_slots()}; pass a new allocator"
        )
    checked = []
    for step in steps:
        if not isinstance(step, tuple) or len(step) != 2 or not isinstance(step[0], str):
            raise ValueError(f"each step must be (name, slots) or (name, None), got {step!r}")
        checked.append((step[0], None if step[1] is None else check_positive_int("slots", step[1])))
    owned: dict[str, tuple[int, int]] = {}  # name -> (offset, size)

    def state(action: str, name: str | None, slots: int | None, offset: int | None, ok: bool):
        used = [(o, s, n) for n, (o, s) in owned.items()]
        free = [(o, s, None) for o, s in arena.free_blocks()]
        largest = max((s for _, s, _ in free), default=0)
        blocks = tuple(sorted(used + free, key=lambda block: block[0]))
        return WalkthroughStep(action, name, slots, offset, ok, blocks, arena.free_slots(), largest)

    states = [state("start", None, None, None, True)]
    for name, slots in checked:
        if slots is None:
            if name not in owned:
                raise ValueError(f"step frees {name!r}, which holds no block; allocate it first")
            offset = owned.pop(name)[0]
            arena.free(offset)
            states.append(state("free", name, None, offset, True))
            continue
        if name in owned:
            raise ValueError(f"{name!r} already holds a block; free it or use another name")
        before = arena.free_slots()
        offset = arena.alloc(slots)
        if offset is not None:
            owned[name] = (offset, before - arena.free_slots())
        states.append(state("alloc", name, slots, offset, offset is not None))
    return states
