"""The visible-cell helpers of assignment a1 (kvcourse.assignment_checks.buddy): each checks the
values it is given, reads a student's allocator as plain ints, and fails with what was expected,
what came back and the hint. Fast, no notebooks."""

from __future__ import annotations

import types

import pytest

from kvcourse import serving, workloads
from kvcourse.assignment_checks.buddy import (
    OracleRun,
    expect_alloc,
    expect_free,
    expect_refused_free,
    expect_shares,
    expect_state,
    expect_tokens,
    free_works,
    simulate_oracle,
)
from kvcourse.blocks import BuddyAllocator


class AlwaysEqual:
    """What a hostile student returns: equal to anything."""

    def __eq__(self, other):
        return True

    __hash__ = None


class Lying(BuddyAllocator):
    """A buddy allocator whose free_blocks() claims to equal anything."""

    def free_blocks(self):
        return AlwaysEqual()


class NoMerge:
    """A buddy allocator whose free never merges a block with its buddy."""

    def __init__(self, num_slots):
        self.free_list, self.sizes = {(0, num_slots)}, {}

    def alloc(self, num_slots):
        size = 1 << (num_slots - 1).bit_length()
        fits = sorted((block, offset) for offset, block in self.free_list if block >= size)
        if not fits:
            return None
        block, offset = fits[0]
        self.free_list.remove((offset, block))
        while block > size:
            block //= 2
            self.free_list.add((offset + block, block))
        self.sizes[offset] = size
        return offset

    def free(self, offset):
        self.free_list.add((offset, self.sizes.pop(offset)))

    def free_slots(self):
        return sum(size for _, size in self.free_list)

    def free_blocks(self):
        return sorted(self.free_list)


class NoSplit(BuddyAllocator):
    """Only ever hands out a free block of exactly the rounded size: never splits."""

    def alloc(self, num_slots):
        size = 1 << (num_slots - 1).bit_length()
        if all(block != size for _, block in self.free_blocks()):
            return None
        return super().alloc(num_slots)


class Miscounts(BuddyAllocator):
    """Right blocks, but free_slots() never moves."""

    def free_slots(self):
        return self.num_slots


def walked() -> BuddyAllocator:
    """The walk-through's arena after A (4), B (2) and C (4)."""
    arena = BuddyAllocator(16)
    for num_slots in (4, 2, 4):
        arena.alloc(num_slots)
    return arena


# ------------------------------------------------------------------------------------ expect_state
def test_expect_state_passes_the_right_state_and_names_both_values_when_wrong():
    arena = walked()
    expect_state(arena, 6, [(6, 2), (12, 4)], "after C", "h.")
    with pytest.raises(AssertionError) as caught:
        expect_state(arena, 8, [(6, 2), (12, 4)], "after C", "look at alloc.")
    assert str(caught.value) == (
        "after C: expected free_slots() = 8 and free_blocks() = [(6, 2), (12, 4)], got 6 and "
        "[(6, 2), (12, 4)]. Hint: look at alloc."
    )


def test_expect_state_without_free_compares_the_blocks_only():
    arena = Miscounts(16)
    expect_state(arena, None, [(0, 16)], "new", "h.")
    arena.alloc(4)
    expect_state(arena, None, [(4, 4), (8, 8)], "after alloc(4)", "h.")
    with pytest.raises(AssertionError, match=r"expected free_slots\(\) = 12 .*got 16 and"):
        expect_state(arena, 12, [(4, 4), (8, 8)], "after alloc(4)", "h.")
    with pytest.raises(AssertionError) as caught:
        expect_state(arena, None, [(0, 16)], "after alloc(4)", "free nothing.")
    assert str(caught.value) == (
        "after alloc(4): expected free_blocks() = [(0, 16)], got [(4, 4), (8, 8)]. Hint: free "
        "nothing."
    )


def test_expect_state_never_trusts_a_students_equality():
    with pytest.raises(AssertionError, match=r"after C: free_blocks\(\): expected a list of"):
        expect_state(Lying(16), 16, [(0, 16)], "after C", "h.")


# ------------------------------------------------------------------------------------ expect_alloc
def test_expect_alloc_checks_the_offset_returned():
    arena = BuddyAllocator(16)
    expect_alloc(arena, 4, 0, "A", "h.")
    expect_alloc(arena, 16, None, "too large", "h.")
    with pytest.raises(AssertionError) as caught:
        expect_alloc(arena, 2, 8, "the walk-through, B", "split the 4 at offset 4.")
    assert str(caught.value) == (
        "the walk-through, B: expected alloc(2) to return 8, got 4. Hint: split the 4 at offset 4."
    )
    with pytest.raises(AssertionError, match="expected alloc.8. to return None, got 8"):
        expect_alloc(arena, 8, None, "D", "h.")


def test_expect_alloc_wants_an_int_or_none():
    class Floats(BuddyAllocator):
        def alloc(self, num_slots):
            return 0.0

    with pytest.raises(AssertionError, match=r"A: alloc\(4\): expected an int or None, got 0.0"):
        expect_alloc(Floats(16), 4, 0, "A", "h.")


# -------------------------------------------------------------------------------- frees, refused
def test_expect_free_frees_then_checks_the_blocks_and_their_total():
    arena = walked()
    expect_free(arena, 4, [(4, 4), (12, 4)], "B leaves", "h.")
    arena = NoMerge(16)
    arena.alloc(8)
    with pytest.raises(AssertionError) as caught:
        expect_free(arena, 0, [(0, 16)], "D leaves", "merge with the buddy.")
    assert str(caught.value).startswith("D leaves, after free(0): expected free_slots() = 16 and")
    assert str(caught.value).endswith("Hint: merge with the buddy.")


def test_expect_free_lets_the_students_error_through():
    with pytest.raises(ValueError):
        expect_free(BuddyAllocator(16), 4, [(0, 16)], "a stray free", "h.")


def test_expect_refused_free_wants_value_error_and_nothing_changed():
    arena = BuddyAllocator(16)
    arena.alloc(4)
    expect_refused_free(arena, 2, 12, [(4, 4), (8, 8)], "an offset inside the block", "h.")

    class Trusting(BuddyAllocator):
        def free(self, offset):  # any offset: the arena is whole again
            self.__init__(self.num_slots)

    arena = Trusting(16)
    arena.alloc(4)
    with pytest.raises(AssertionError) as caught:
        expect_refused_free(arena, 4, 12, [(4, 4), (8, 8)], "an offset in free memory", "check.")
    assert str(caught.value) == (
        "free(4), an offset in free memory: expected ValueError, but it returned. Hint: check."
    )

    class Careless(BuddyAllocator):
        def free(self, offset):  # changes the arena, then refuses
            super().free(0)
            raise ValueError(offset)

    arena = Careless(16)
    arena.alloc(4)
    with pytest.raises(AssertionError) as caught:
        expect_refused_free(arena, 4, 12, [(4, 4), (8, 8)], "an offset in free memory", "check.")
    assert str(caught.value) == (
        "free(4), an offset in free memory, raised but changed the arena: expected free_slots() = "
        "12 and free_blocks() = [(4, 4), (8, 8)], got 16 and [(0, 16)]. Hint: check."
    )


def test_expect_refused_free_lets_another_error_through():
    class KeyErrors(BuddyAllocator):
        def free(self, offset):
            raise KeyError(offset)

    with pytest.raises(KeyError):
        expect_refused_free(KeyErrors(16), 0, None, [(0, 16)], "a double free", "h.")


def test_free_works_says_whether_free_is_ready():
    arena = BuddyAllocator(16)
    for num_slots in (8, 4, 2):
        arena.alloc(num_slots)
    assert free_works(arena, 0, 10, [(0, 8), (14, 2)])

    class NotYet(BuddyAllocator):
        def free(self, offset):
            return buddy_free(self, offset)  # noqa: F821 (not written yet)

    arena = NotYet(16)
    arena.alloc(8)
    assert not free_works(arena, 0, 16, [(0, 16)])
    arena = NoMerge(16)
    arena.alloc(8)
    assert not free_works(arena, 0, 16, [(0, 16)])  # it works, but leaves other blocks


# -------------------------------------------------------------------------------------- Part 6
REQUESTS = workloads.sharegpt_like(60, rate=3.0, seed=0)
HINTS = {"promise_hint": "keep promises.", "split_hint": "split.", "merge_hint": "merge."}


def test_expect_tokens_checks_the_tests_own_requests():
    tokens = (sum(r.prompt_len for r in REQUESTS), sum(r.output_len for r in REQUESTS))
    expect_tokens(REQUESTS, tokens)
    with pytest.raises(AssertionError, match=r"hold \(\d+, \d+\) .* not \(1, 2\): .*instructor"):
        expect_tokens(REQUESTS, (1, 2))


def test_simulate_oracle_reads_the_run_as_plain_values():
    run = simulate_oracle(serving, BuddyAllocator, REQUESTS, num_slots=8192, **HINTS)
    direct = serving.simulate(REQUESTS, serving.OracleScheme(BuddyAllocator), num_slots=8192)
    assert isinstance(run, OracleRun)
    assert run.shares == {kind: getattr(direct.shares, kind) for kind in serving.KINDS}
    assert (run.mean_running, run.completed) == (direct.mean_running, direct.completed)
    assert type(run.completed) is int and type(run.mean_running) is float


@pytest.mark.parametrize(
    ("allocator", "says"),
    [
        (NoMerge, r"your allocator has its 2048 free slots as \[\(0, 512\), .*\], not as one "
         r"block \[\(0, 2048\)\]. Hint: merge.$"),
        (NoSplit, r"your allocator holds the whole arena as one free block, and yet refused the "
         r"request. Hint: split.$"),
        (Miscounts, r"^the simulator caught your allocator breaking a promise: .*Hint: keep "
         r"promises.$"),
    ],
)  # fmt: skip
def test_simulate_oracle_says_why_the_run_stopped_and_where_to_look(allocator, says):
    with pytest.raises(AssertionError, match=says) as caught:
        simulate_oracle(serving, allocator, REQUESTS, num_slots=2048, **HINTS)
    if allocator is not Miscounts:
        assert str(caught.value).startswith("the simulator stopped: Oracle")


def test_simulate_oracle_shows_four_free_blocks_and_counts_the_others():
    def simulate(requests, scheme, num_slots):
        arena = scheme(num_slots)
        offsets = [arena.alloc(1) for _ in range(7)]
        for offset in offsets:
            arena.free(offset)
        raise RuntimeError("request 3 can never be admitted; clip the workload")

    fake = types.SimpleNamespace(
        simulate=simulate,
        OracleScheme=lambda allocator: allocator,
        AllocatorContractError=serving.AllocatorContractError,
    )
    with pytest.raises(AssertionError) as caught:
        simulate_oracle(fake, NoMerge, [], num_slots=16, **HINTS)
    assert str(caught.value) == (
        "the simulator stopped: request 3 can never be admitted. With every request's block freed "
        "again, your allocator has its 16 free slots as [(0, 1), (1, 1), (2, 1), (3, 1)] and 5 "
        "more, not as one block [(0, 16)]. Hint: merge."
    )


def test_simulate_oracle_lets_other_errors_through():
    class Unwritten(BuddyAllocator):
        def alloc(self, num_slots):
            raise NotImplementedError

    with pytest.raises(NotImplementedError):
        simulate_oracle(serving, Unwritten, REQUESTS, num_slots=8192, **HINTS)


def test_expect_shares_prints_both_and_fails_at_the_first_difference(capsys):
    expected = {"stored": 0.5, "free": 0.25}
    expect_shares({"stored": 0.5, "free": 0.25, "reserved": 0.1}, expected, "Oracle", "h.")
    assert capsys.readouterr().out.splitlines() == [
        "Oracle",
        "                        yours  library",
        "              stored   50.00%   50.00%",
        "                free   25.00%   25.00%",
    ]
    with pytest.raises(AssertionError) as caught:
        expect_shares({"stored": 0.5, "free": 0.2}, expected, "Oracle", "place it lower.")
    assert str(caught.value) == (
        "Oracle: the free share is 0.200000; with the library's buddy allocator it is 0.250000. "
        "Hint: place it lower."
    )
