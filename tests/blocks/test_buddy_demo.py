"""Tests for kvcourse.blocks.buddy_demo (§3.2): the 16-slot walk-through on the buddy allocator, on
a student's allocator, and its errors."""

from __future__ import annotations

import pytest

from kvcourse.blocks import WALKTHROUGH_REQUESTS, BuddyAllocator, buddy_walkthrough


def test_16_slot_walkthrough_a_b_c_fit_and_d_fails_with_6_free_as_4_plus_2():
    assert WALKTHROUGH_REQUESTS == (("A", 4), ("B", 2), ("C", 4), ("D", 6))
    steps = buddy_walkthrough()
    assert [s.action for s in steps] == ["start", "alloc", "alloc", "alloc", "alloc"]
    assert steps[0].blocks == ((0, 16, None),)
    assert [(s.name, s.ok, s.offset) for s in steps[1:]] == [
        ("A", True, 0),
        ("B", True, 4),
        ("C", True, 8),
        ("D", False, None),
    ]
    final = steps[-1]
    assert final.blocks == ((0, 4, "A"), (4, 2, "B"), (6, 2, None), (8, 4, "C"), (12, 4, None))
    assert int(final.free_slots) == 6
    free_sizes = sorted((size for _, size, owner in final.blocks if owner is None), reverse=True)
    assert free_sizes == [4, 2]
    assert final.largest_free_block == 4  # less than D's 6 (and the 8 a buddy would round it to)
    assert final.description == "D asks for 6 slots: fails (6 free as 4 + 2)"
    assert steps[1].description == "A asks for 4 slots: gets offset 0"


def test_walkthrough_with_frees_merges_back():
    steps = buddy_walkthrough(16, [*WALKTHROUGH_REQUESTS, ("C", None), ("D", 6)])
    assert steps[5].action == "free" and steps[5].offset == 8
    assert steps[5].blocks == ((0, 4, "A"), (4, 2, "B"), (6, 2, None), (8, 8, None))
    assert steps[6].ok and steps[6].offset == 8
    assert "frees" in steps[5].description


def test_walkthrough_rejects_bad_steps_and_allocators():
    with pytest.raises(ValueError, match="holds no block"):
        buddy_walkthrough(16, [("A", None)])
    with pytest.raises(ValueError, match="already holds"):
        buddy_walkthrough(16, [("A", 2), ("A", 2)])
    with pytest.raises(ValueError, match=r"\(name, slots\)"):
        buddy_walkthrough(16, [("A",)])
    used = BuddyAllocator(16)
    used.alloc(4)
    with pytest.raises(ValueError, match="start empty"):
        buddy_walkthrough(16, allocator=used)
    with pytest.raises(TypeError, match="ContiguousAllocator"):
        buddy_walkthrough(16, allocator=object())


def test_walkthrough_runs_any_contiguous_allocator():
    class FirstFit:
        """A contiguous allocator without rounding: each request gets exactly its slots."""

        def __init__(self, num_slots):
            self.runs = [(0, num_slots)]  # free (offset, size), sorted
            self.used = {}

        def alloc(self, num_slots):
            for i, (offset, size) in enumerate(self.runs):
                if size >= num_slots:
                    rest = [(offset + num_slots, size - num_slots)] if size > num_slots else []
                    self.runs[i : i + 1] = rest
                    self.used[offset] = num_slots
                    return offset
            return None

        def free(self, offset):  # no merging of neighbours: the walk-through frees nothing
            self.runs = sorted([*self.runs, (offset, self.used.pop(offset))])

        def free_slots(self):
            return sum(size for _, size in self.runs)

        def free_blocks(self):
            return list(self.runs)

    steps = buddy_walkthrough(16, allocator=FirstFit(16))
    assert [(s.name, s.ok, s.offset) for s in steps[1:]] == [
        ("A", True, 0),
        ("B", True, 4),
        ("C", True, 6),
        ("D", True, 10),  # no rounding: 6 slots are left, in one run
    ]
    assert steps[-1].blocks == ((0, 4, "A"), (4, 2, "B"), (6, 4, "C"), (10, 6, "D"))


def test_walkthrough_refuses_bad_slot_counts():
    with pytest.raises(ValueError, match="slots must be positive, got 0"):
        buddy_walkthrough(16, [("A", 0)])
    with pytest.raises(TypeError, match="slots must be an int"):
        buddy_walkthrough(16, [("A", 2.5)])
