"""Tests for kvcourse.serving.memory (§3.3): a run's KV memory — contiguous runs checked against
the allocator's promises, PagedAttention's blocks taken only when the last one is full."""

from __future__ import annotations

import pytest

from kvcourse.blocks import BuddyAllocator
from kvcourse.serving import AllocatorContractError, LiveRequest
from kvcourse.serving.memory import ContiguousMemory, PagedMemory
from kvcourse.workloads import Request


def live(prompt: int, output: int, request_id: int = 0) -> LiveRequest:
    return LiveRequest(Request(request_id, 0.0, prompt, output))


def test_a_live_request_starts_fresh_and_is_compared_by_identity():
    a = live(5, 7)
    assert (a.prompt, a.output, a.final, a.done, a.new) == (5, 7, 12, 0, True)
    assert (a.offset, a.size, a.table) == (-1, 0, None)
    assert a == a and a != live(5, 7)


# ---------------------------------------------------------------------------- contiguous


def test_contiguous_memory_reserves_max_len_or_the_final_length():
    oracle = ContiguousMemory(BuddyAllocator(64), 64, None)
    request = live(5, 7)  # final length 12 → a buddy block of 16
    assert oracle.need(request) == 12
    assert oracle.admit(request)
    assert (request.offset, request.size, oracle.allocated()) == (0, 16, 16)
    assert oracle.split_allocated(stored=6, final=12, allocated=16) == (6, 4)
    assert oracle.grow([request], 0) == 1  # everything was reserved on admission
    oracle.release(request)
    assert (request.offset, request.size, oracle.allocated()) == (-1, 0, 0)
    most = ContiguousMemory(BuddyAllocator(64), 64, 32)
    assert most.need(request) == 32
    assert most.admit(live(1, 1)) and most.admit(live(1, 1)) and not most.admit(live(1, 1))


class Scripted:
    """An allocator that answers what the test tells it to: ``alloc`` returns ``offset`` and takes
    ``taken`` slots, ``free`` gives back ``given_back`` (default: ``taken``)."""

    def __init__(self, num_slots: int, offset, taken: int, given_back: int | None = None):
        self.num_free = num_slots
        self.offset, self.taken = offset, taken
        self.given_back = taken if given_back is None else given_back

    def alloc(self, num_slots):
        self.num_free -= self.taken
        return self.offset

    def free(self, offset):
        self.num_free += self.given_back

    def free_slots(self):
        return self.num_free

    def free_blocks(self):
        return []


@pytest.mark.parametrize(
    ("offset", "taken", "message"),
    [
        (None, 4, "returned None but free_slots\\(\\) changed"),
        (1.5, 8, "must be an int"),
        (0, 4, "fell by only 4"),
        (60, 8, "does not fit in the arena of 64 slots"),
        (-8, 8, "does not fit"),
    ],
)
def test_a_broken_alloc_is_named(offset, taken, message):
    memory = ContiguousMemory(Scripted(64, offset, taken), 64, 8)
    with pytest.raises(AllocatorContractError, match=message):
        memory.admit(live(3, 3))


def test_overlapping_runs_are_caught_on_either_side():
    memory = ContiguousMemory(Scripted(64, 8, 8), 64, 8)
    assert memory.admit(live(3, 3))
    memory._allocator.offset = 4  # a run of 8 from 4 ends inside the run at 8
    with pytest.raises(AllocatorContractError, match="overlapping the run still allocated at off"):
        memory.admit(live(3, 3))
    memory._allocator.offset = 12  # starts inside it
    with pytest.raises(AllocatorContractError, match="inside the run of 8 slots"):
        memory.admit(live(3, 3))


def test_a_free_that_gives_back_the_wrong_amount_is_named():
    memory = ContiguousMemory(Scripted(64, 0, 8, given_back=4), 64, 8)
    request = live(3, 3)
    assert memory.admit(request)
    with pytest.raises(AllocatorContractError, match="must grow by exactly 8"):
        memory.release(request)


# ---------------------------------------------------------------------------- paged


def test_paged_memory_admits_the_prompt_and_first_token_and_grows_block_by_block():
    memory = PagedMemory(num_slots=18, block_size=4)  # 4 blocks; 2 slots are not a block
    a, b = live(3, 10, 0), live(7, 10, 1)
    assert memory.need(a) == 4 and memory.need(b) == 8
    assert memory.admit(a) and memory.admit(b)  # 1 + 2 blocks
    assert memory.allocated() == 12
    a.done, b.done = 1, 1  # each stored its prefill and first token: 4 and 8 tokens
    running = [a, b]
    assert memory.grow(running, 0) == 1  # a takes the last block; b finds none
    assert memory.allocated() == 16
    assert memory.split_allocated(stored=12, final=0, allocated=16) == (0, 4)
    memory.release(a)
    assert a.table is None and memory.allocated() == 8  # all of a's blocks at once
    assert memory.grow(running, 1) == 2
    assert not memory.admit(live(20, 1))


def test_paged_memory_needs_a_block_only_at_block_boundaries():
    memory = PagedMemory(num_slots=8, block_size=4)
    a = live(2, 10)
    assert memory.admit(a)  # the prompt and the first token: 3 tokens, one block
    a.done = 1  # 3 tokens stored: the 4th still fits the first block
    assert memory.grow([a], 0) == 1 and memory.allocated() == 4
    a.done = 2  # 4 stored, the block is full: the 5th takes a second one
    assert memory.grow([a], 0) == 1 and memory.allocated() == 8
    a.done = 6  # 8 stored, both full, and the pool is empty
    assert memory.grow([a], 0) == 0
