"""Tests for kvcourse.blocks.buddy (§3.2, exercise 2, assignment a1): rounding, arenas whose size is
not a power of two, clear errors, and the allocator's invariants under random alloc/free sequences.
The 16-slot walk-through (kvcourse.blocks.buddy_demo) is tested in test_buddy_demo.py."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kvcourse.blocks import (
    EX2_REQUESTS,
    BuddyAllocator,
    BuddyBlock,
    ContiguousAllocator,
    binary_decomposition,
    round_up_pow2,
    rounding_waste,
)

#: The 16-slot walk-through's first three requests (A, B and C), which all fit.
ABC = (4, 2, 4)


def state(arena: BuddyAllocator) -> tuple:
    """Everything observable about an arena, for 'an error changed nothing' checks."""
    return (
        tuple(arena.free_blocks()),
        tuple(arena.allocated_blocks()),
        arena.free_slots(),
        tuple(arena.blocks()),
    )


# ---------------------------------------------------------------------------- arithmetic


def test_round_up_pow2():
    sizes = (1, 2, 3, 4, 5, 300, 512, 513, 1100)
    assert [round_up_pow2(n) for n in sizes] == [1, 2, 4, 4, 8, 512, 512, 1024, 2048]
    with pytest.raises(ValueError, match="positive"):
        round_up_pow2(0)
    with pytest.raises(TypeError):
        round_up_pow2(2.5)


def test_exercise_2_rounding_waste():
    waste = rounding_waste()
    assert EX2_REQUESTS == (300, 600, 1100)
    assert waste.allocated == (512, 1024, 2048)
    assert int(waste.total_allocated) == 3584
    assert waste.waste == (212, 424, 948)
    assert int(waste.total_waste) == 1584
    assert round(waste.waste_fraction * 100) == 44


def test_exercise_2_through_the_allocator():
    arena = BuddyAllocator(4096)
    offsets = [arena.alloc(n) for n in EX2_REQUESTS]
    assert None not in offsets
    assert [arena.block_size(o) for o in offsets] == [512, 1024, 2048]
    assert arena.allocated_slots() == 3584
    assert arena.free_slots() == 512


def test_rounding_waste_rejects_bad_lists():
    with pytest.raises(ValueError, match="non-empty list"):
        rounding_waste([])
    with pytest.raises(ValueError, match="positive"):
        rounding_waste([300, 0])


def test_binary_decomposition_of_the_a100_arena():
    assert binary_decomposition(12596) == [
        (0, 8192),
        (8192, 4096),
        (12288, 256),
        (12544, 32),
        (12576, 16),
        (12592, 4),
    ]
    assert binary_decomposition(16) == [(0, 16)]


@given(st.integers(1, 1 << 20))
def test_binary_decomposition_tiles_the_arena_with_aligned_roots(n):
    roots = binary_decomposition(n)
    offset = 0
    for start, size in roots:
        assert start == offset and size & (size - 1) == 0 and start % size == 0
        offset += size
    assert offset == n
    assert [s for _, s in roots] == sorted((s for _, s in roots), reverse=True)


# ---------------------------------------------------------------------------- the allocator


def test_buddy_allocator_is_a_contiguous_allocator():
    assert isinstance(BuddyAllocator(16), ContiguousAllocator)
    assert not isinstance(object(), ContiguousAllocator)


def test_alloc_splits_and_free_merges_back():
    arena = BuddyAllocator(16)
    assert arena.alloc(3) == 0  # rounded to 4: 16 -> 8 + 8 -> 4 + 4
    assert arena.free_blocks() == [(4, 4), (8, 8)]
    assert arena.alloc(1) == 4  # the 4 at offset 4 splits into 2 + 2, then 1 + 1
    assert arena.free_blocks() == [(5, 1), (6, 2), (8, 8)]
    arena.free(0)
    assert arena.free_blocks() == [(0, 4), (5, 1), (6, 2), (8, 8)]  # 0's buddy (4) is in use
    arena.free(4)  # 4 + 5 -> 2; + 6 -> 4; + 0 -> 8; + 8 -> 16
    assert arena.free_blocks() == [(0, 16)]
    assert arena.free_slots() == 16 and arena.allocated_slots() == 0
    assert "16 free" in repr(arena)


def test_blocks_show_the_requested_size():
    arena = BuddyAllocator(16)
    arena.alloc(3)
    assert arena.blocks() == [
        BuddyBlock(0, 4, False, 3),
        BuddyBlock(4, 4, True),
        BuddyBlock(8, 8, True),
    ]


def test_alloc_returns_none_when_nothing_large_enough_and_changes_nothing():
    arena = BuddyAllocator(16)
    for slots in ABC:
        assert arena.alloc(slots) is not None, slots
    before = state(arena)
    assert arena.alloc(6) is None
    assert arena.alloc(100) is None
    assert state(arena) == before


def test_alloc_rejects_non_positive_and_non_integer_sizes():
    arena = BuddyAllocator(16)
    before = state(arena)
    with pytest.raises(ValueError, match="positive"):
        arena.alloc(0)
    with pytest.raises(ValueError, match="positive"):
        arena.alloc(-3)
    with pytest.raises(TypeError):
        arena.alloc(2.0)
    with pytest.raises(TypeError):
        arena.alloc(True)
    assert state(arena) == before


def test_non_power_of_two_arena_uses_roots_that_never_merge():
    arena = BuddyAllocator(12596)
    assert arena.roots[0] == (0, 8192) and arena.max_block == 8192
    assert arena.alloc(8192) == 0
    assert arena.alloc(3000) == 8192  # rounded to 4096: the second root
    assert arena.alloc(300) is None  # 308 slots free, but no block of 512
    assert arena.free_slots() == 308
    assert arena.alloc(256) == 12288
    arena.free(0)
    arena.free(8192)
    arena.free(12288)
    assert arena.free_blocks() == binary_decomposition(12596)  # back to roots, not merged further

    small = BuddyAllocator(12)  # 8 + 4
    assert small.alloc(9) is None  # larger than the largest root, even when empty
    assert small.alloc(4) == 8  # the 4-slot root fits exactly; the 8 stays whole
    assert small.alloc(8) == 0
    small.free(0)
    small.free(8)
    assert small.free_blocks() == [(0, 8), (8, 4)]


def test_invalid_frees_raise_clearly_and_change_nothing():
    arena = BuddyAllocator(16)
    a = arena.alloc(4)
    b = arena.alloc(2)
    before = state(arena)
    with pytest.raises(ValueError, match="outside the arena of 16 slots"):
        arena.free(16)
    with pytest.raises(ValueError, match="outside the arena"):
        arena.free(-1)
    with pytest.raises(ValueError, match="inside the block allocated at offset 0"):
        arena.free(a + 1)
    with pytest.raises(ValueError, match="already free"):
        arena.free(8)
    with pytest.raises(TypeError):
        arena.free("0")
    assert state(arena) == before
    arena.free(b)
    after_free = state(arena)
    with pytest.raises(ValueError, match="double free"):
        arena.free(b)
    assert state(arena) == after_free
    with pytest.raises(ValueError, match="has no allocated block"):
        arena.block_size(b)


def test_constructor_rejects_bad_sizes():
    with pytest.raises(ValueError, match="num_slots must be positive, got 0; pass e.g. 16"):
        BuddyAllocator(0)
    with pytest.raises(TypeError, match="num_slots must be an int"):
        BuddyAllocator(16.0)
    with pytest.raises(ValueError, match="arena size must be positive, got -4"):
        binary_decomposition(-4)


def test_the_exercise_references_are_defined_in_the_buddy_module():
    """Assignment a1's tests switch off every function whose ``__module__`` is
    kvcourse.blocks.buddy while a student's code runs; the references to its exercises must be
    among them, or a submission could call them unnoticed."""
    for reference in (round_up_pow2, rounding_waste, binary_decomposition, BuddyAllocator.alloc):
        assert reference.__module__ == "kvcourse.blocks.buddy", reference


# ---------------------------------------------------------------------------- invariants


def check_invariants(arena: BuddyAllocator) -> None:
    n = arena.num_slots
    roots = arena.roots
    free = arena.free_blocks()
    used = arena.allocated_blocks()
    covered = sorted(free + used)
    position = 0
    for offset, size in covered:  # no overlaps, no gaps: the blocks tile the arena
        assert offset == position, (offset, position, covered)
        assert size > 0 and size & (size - 1) == 0 and offset % size == 0
        root = next((o, s) for o, s in roots if o <= offset < o + s)
        assert offset + size <= root[0] + root[1]  # inside one root
        position += size
    assert position == n
    assert arena.free_slots() + arena.allocated_slots() == n
    assert arena.free_slots() == sum(size for _, size in free)
    free_set = set(free)
    for offset, size in free:  # no two free buddies of the same size left unmerged
        root = next((o, s) for o, s in roots if o <= offset < o + s)
        if size < root[1]:
            assert (offset ^ size, size) not in free_set, (offset, size, free)
    assert arena.largest_free_block() == max((s for _, s in free), default=0)


class BuddyMachine(RuleBasedStateMachine):
    """Random allocations, frees and invalid frees on one arena, against a model of what is live."""

    @initialize(num_slots=st.integers(1, 300))
    def setup(self, num_slots):
        self.arena = BuddyAllocator(num_slots)
        self.live: dict[int, int] = {}  # offset -> requested slots

    @rule(slots=st.integers(1, 80))
    def alloc(self, slots):
        before = state(self.arena)
        largest = self.arena.largest_free_block()
        offset = self.arena.alloc(slots)
        if offset is None:
            assert round_up_pow2(slots) > largest
            assert state(self.arena) == before
            return
        assert offset not in self.live
        size = self.arena.block_size(offset)
        assert size == round_up_pow2(slots)
        assert self.arena.free_slots() == before[2] - size
        self.live[offset] = slots

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def free(self, data):
        offset = data.draw(st.sampled_from(sorted(self.live)))
        size = self.arena.block_size(offset)
        before = self.arena.free_slots()
        self.arena.free(offset)  # always succeeds for an offset alloc() returned
        del self.live[offset]
        assert self.arena.free_slots() == before + size

    @rule(offset=st.integers(-3, 310))
    def invalid_free(self, offset):
        if offset in self.live:
            return
        before = state(self.arena)
        with pytest.raises(ValueError):
            self.arena.free(offset)
        assert state(self.arena) == before

    @invariant()
    def holds(self):
        if hasattr(self, "arena"):
            check_invariants(self.arena)
            assert sorted(self.live) == [o for o, _ in self.arena.allocated_blocks()]


TestBuddyMachine = BuddyMachine.TestCase
TestBuddyMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


@given(st.lists(st.integers(1, 64), max_size=30), st.integers(1, 256))
@settings(deadline=None)
def test_freeing_everything_returns_the_roots(sizes, num_slots):
    arena = BuddyAllocator(num_slots)
    offsets = [o for o in (arena.alloc(n) for n in sizes) if o is not None]
    for offset in reversed(offsets[::2]):
        arena.free(offset)
    for offset in offsets[1::2]:
        arena.free(offset)
    assert arena.free_blocks() == binary_decomposition(num_slots)
