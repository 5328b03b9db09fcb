"""Tests for kvcourse.serving.schemes (§3.3): the three schemes are configured and checked as
the lecture describes, each fills the kinds of memory it should, and a student's allocator plugs
into the contiguous ones (and is caught when it breaks a promise)."""

from __future__ import annotations

import pytest

from kvcourse.blocks import BuddyAllocator
from kvcourse.serving import (
    A100_SLOTS,
    AllocatorContractError,
    MemoryScheme,
    OracleScheme,
    PagedScheme,
    ReserveMaxScheme,
    compare_schemes,
    default_schemes,
    simulate,
)
from kvcourse.serving.memory import ContiguousMemory, PagedMemory
from kvcourse.serving.schemes import check_scheme
from kvcourse.workloads import LengthDistribution, Request, generate_requests

# A small, fast, overloaded configuration: short requests (≤ 256 tokens), 1500 slots, 40 req/s.
SMALL = LengthDistribution("small", mean_prompt=20, mean_output=60, max_total=256)
SMALL_SLOTS = 1500
SMALL_MAX = 256


def small_requests(seed: int = 0, n: int = 400, rate: float = 40.0) -> list[Request]:
    return generate_requests(n, SMALL, rate=rate, seed=seed)


class FirstFit:
    """A student-style contiguous allocator: first fit over a sorted hole list, exact sizes (no
    rounding), holes coalesced on free. It implements ContiguousAllocator and nothing else."""

    def __init__(self, num_slots: int) -> None:
        self.holes: list[list[int]] = [[0, num_slots]]  # [offset, size], sorted by offset
        self.used: dict[int, int] = {}

    def alloc(self, num_slots: int) -> int | None:
        for hole in self.holes:
            if hole[1] >= num_slots:
                offset = hole[0]
                hole[0] += num_slots
                hole[1] -= num_slots
                self.holes = [h for h in self.holes if h[1] > 0]
                self.used[offset] = num_slots
                return offset
        return None

    def free(self, offset: int) -> None:
        if offset not in self.used:
            raise ValueError(f"offset {offset} is not allocated")
        size = self.used.pop(offset)
        self.holes.append([offset, size])
        self.holes.sort()
        merged = [self.holes[0]]
        for start, length in self.holes[1:]:
            if merged[-1][0] + merged[-1][1] == start:
                merged[-1][1] += length
            else:
                merged.append([start, length])
        self.holes = merged

    def free_slots(self) -> int:
        return sum(size for _, size in self.holes)

    def free_blocks(self) -> list[tuple[int, int]]:
        return [(offset, size) for offset, size in self.holes]


# ---------------------------------------------------------------------------- configuration


def test_names_labels_and_the_default_three():
    assert A100_SLOTS == 12_596
    schemes = default_schemes()
    assert [p.name for p in schemes] == ["Max", "Oracle", "Paged"]
    assert [p.label for p in schemes] == [
        "Max (reserve 2048)",
        "Oracle + buddy",
        "Paged (block 16)",
    ]
    assert repr(schemes[2]) == "PagedScheme('Paged (block 16)')"
    mine = default_schemes(FirstFit, max_len=512, block_size=32)
    assert [p.label for p in mine] == ["Max (reserve 512)", "Oracle + FirstFit", "Paged (block 32)"]
    assert mine[0].allocator is FirstFit and mine[1].allocator is FirstFit
    assert OracleScheme(FirstFit(64)).label == "Oracle + FirstFit"
    assert check_scheme(schemes[0]) is schemes[0]
    with pytest.raises(TypeError, match="MemoryScheme"):
        check_scheme("paged")


def test_each_scheme_starts_a_fresh_empty_memory_per_run():
    requests = small_requests(n=20)
    for scheme in default_schemes(max_len=SMALL_MAX):
        first = scheme.start_memory(SMALL_SLOTS, requests)
        again = scheme.start_memory(SMALL_SLOTS, requests)
        assert first is not again and first.allocated() == again.allocated() == 0
        kind = PagedMemory if isinstance(scheme, PagedScheme) else ContiguousMemory
        assert isinstance(first, kind)
    with pytest.raises(NotImplementedError):
        MemoryScheme().start_memory(SMALL_SLOTS, requests)


def test_bad_configurations_are_refused():
    requests = small_requests(n=50)
    with pytest.raises(ValueError, match="max_len must be positive"):
        ReserveMaxScheme(max_len=0)
    with pytest.raises(TypeError, match="max_len must be an int"):
        ReserveMaxScheme(max_len=1.5)
    with pytest.raises(ValueError, match="block_size must be positive"):
        PagedScheme(block_size=0)
    with pytest.raises(TypeError, match="ContiguousAllocator"):
        OracleScheme(allocator=42)
    with pytest.raises(TypeError, match="ReserveMaxScheme: allocator"):
        ReserveMaxScheme(allocator=42)
    with pytest.raises(ValueError, match="more than max_len 64"):
        ReserveMaxScheme(64).start_memory(SMALL_SLOTS, requests)
    with pytest.raises(ValueError, match="exceeds the arena"):
        ReserveMaxScheme().start_memory(SMALL_SLOTS, requests)
    with pytest.raises(ValueError, match="more than the whole arena of 100"):
        OracleScheme().start_memory(100, requests)
    with pytest.raises(ValueError, match="the pool holds only 96"):
        PagedScheme().start_memory(100, requests)
    with pytest.raises(TypeError, match="factory returned"):
        OracleScheme(lambda n: "memory").start_memory(SMALL_SLOTS, requests)
    used = BuddyAllocator(SMALL_SLOTS)
    used.alloc(10)
    with pytest.raises(ValueError, match="start empty"):
        OracleScheme(used).start_memory(SMALL_SLOTS, requests)


# ---------------------------------------------------------------------------- the kinds they fill


@pytest.fixture(scope="module")
def small_results():
    return compare_schemes(
        small_requests(), default_schemes(max_len=SMALL_MAX), num_slots=SMALL_SLOTS
    )


def test_each_scheme_fills_the_kinds_it_should(small_results):
    max_r, oracle, paged = small_results["Max"], small_results["Oracle"], small_results["Paged"]
    t = max_r.timeline
    assert (t.stored + t.reserved + t.internal == t.running * SMALL_MAX).all()
    assert t.running.max() <= SMALL_SLOTS // SMALL_MAX
    t = paged.timeline
    assert (t.reserved == 0).all() and (t.external == 0).all()
    assert (t.internal <= t.running * 15).all()  # at most B - 1 empty slots per sequence
    assert (t.free >= SMALL_SLOTS % 16).all()  # the slots that make no whole block
    t = oracle.timeline
    assert (t.reserved > 0).any() and (t.internal > 0).any() and (t.external > 0).any()


def test_only_paged_preempts(small_results):
    paged = small_results["Paged"]
    assert paged.preemptions > 0 and paged.recomputed_tokens > 0
    assert small_results["Oracle"].preemptions == 0 and small_results["Max"].preemptions == 0


# ---------------------------------------------------------------------------- a student's allocator


def test_a_student_allocator_plugs_into_the_oracle_scheme():
    requests = small_requests()
    mine = simulate(requests, OracleScheme(FirstFit), num_slots=SMALL_SLOTS)
    buddy = simulate(requests, OracleScheme(), num_slots=SMALL_SLOTS)
    assert mine.label == "Oracle + FirstFit" and buddy.label == "Oracle + buddy"
    assert (mine.timeline.internal == 0).all()  # exact sizes: no rounding
    assert mine.shares.stored > buddy.shares.stored
    # an empty instance works too, and is handed back empty so it can be used again
    instance = FirstFit(SMALL_SLOTS)
    once = simulate(requests, OracleScheme(instance), num_slots=SMALL_SLOTS)
    assert instance.free_slots() == SMALL_SLOTS and not instance.used
    twice = simulate(requests, OracleScheme(instance), num_slots=SMALL_SLOTS)
    assert once == twice and once.shares == mine.shares
    # the whole comparison runs on it
    schemes = default_schemes(FirstFit, max_len=SMALL_MAX)
    results = compare_schemes(requests, schemes, num_slots=SMALL_SLOTS)
    assert results["Paged"].shares.stored > results["Oracle"].shares.stored


class Overlapping(FirstFit):
    def alloc(self, num_slots):
        offset = super().alloc(num_slots)
        return None if offset is None else 0


class TakesNothing(FirstFit):
    def free_slots(self):
        return SMALL_SLOTS


class FreeLeaks(FirstFit):
    def free(self, offset):
        self.used.pop(offset)


@pytest.mark.parametrize(
    ("allocator", "message"),
    [
        (Overlapping, "overlapping the run still allocated at offset 0"),
        (TakesNothing, "fell by only 0"),
        (FreeLeaks, "must grow by exactly"),
    ],
)
def test_a_broken_allocator_is_named_clearly(allocator, message):
    with pytest.raises(AllocatorContractError, match=message):
        simulate(small_requests(), OracleScheme(allocator), num_slots=SMALL_SLOTS)


def test_a_request_that_can_never_fit_stops_the_run_with_a_reason():
    # 12 slots = roots of 8 and 4: a 10-slot request fits the arena's size but no buddy block.
    requests = [Request(0, 0.0, 5, 5), Request(1, 1.0, 2, 2)]
    with pytest.raises(RuntimeError, match="request 0 .* can never be admitted"):
        simulate(requests, OracleScheme(), num_slots=12)
    instance = BuddyAllocator(12)
    with pytest.raises(RuntimeError):
        simulate(list(reversed(requests)), OracleScheme(instance), num_slots=12)
    assert instance.free_slots() == 12  # handed back empty after the error
