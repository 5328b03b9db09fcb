"""Tests for kvcourse.serving (§3.3, §3.4): the five kinds of KV memory add up, the three
policies rank as the lecture says, runs are deterministic, the A100 figures land in their bands,
a student's allocator plugs in, and bad arguments are refused clearly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvcourse.blocks import BuddyAllocator
from kvcourse.serving import (
    A100_SLOTS,
    KINDS,
    AccountingResult,
    AllocatorContractError,
    IterationCost,
    OraclePolicy,
    PagedPolicy,
    ReserveMaxPolicy,
    a100_accounting,
    compare_policies,
    concurrency_ratios,
    default_policies,
    simulate,
)
from kvcourse.workloads import LengthDistribution, Request, generate_requests

# A small, fast, overloaded configuration: short requests (≤ 256 tokens), 1500 slots, 40 req/s.
SMALL = LengthDistribution("small", mean_prompt=20, mean_output=60, max_total=256)
SMALL_SLOTS = 1500
SMALL_MAX = 256


def small_requests(seed: int = 0, n: int = 400, rate: float = 40.0) -> list[Request]:
    return generate_requests(n, SMALL, rate=rate, seed=seed)


def small_policies(allocator=BuddyAllocator):
    return default_policies(allocator, max_len=SMALL_MAX)


@pytest.fixture(scope="module")
def small_results() -> dict[str, AccountingResult]:
    return compare_policies(small_requests(), small_policies(), num_slots=SMALL_SLOTS)


@pytest.fixture(scope="module")
def sharegpt_results() -> dict[str, AccountingResult]:
    return a100_accounting("sharegpt", rate=3.0)  # 1800 requests, seed 0


def table(results: dict[str, AccountingResult], title: str) -> str:
    lines = [title]
    for r in results.values():
        s = r.shares
        lines.append(
            f"  {r.label:20s} stored {s.stored:6.1%} reserved {s.reserved:6.1%} internal "
            f"{s.internal:6.1%} external {s.external:6.1%} free {s.free:6.1%} | running "
            f"{r.mean_running:5.2f} waiting {r.mean_waiting:7.1f} {r.throughput_rps:5.2f} req/s "
            f"| {r.num_requests} requests, {r.iterations}/{r.total_iterations} iterations, "
            f"{r.preemptions} preemptions"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------- a student's allocator


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


# ---------------------------------------------------------------------------- the accounting


def test_the_five_kinds_add_up_every_iteration(small_results):
    for name, r in small_results.items():
        t = r.timeline
        kinds = np.stack([getattr(t, kind) for kind in KINDS])
        assert (kinds >= 0).all(), name
        assert (kinds.sum(axis=0) == SMALL_SLOTS).all(), name
        assert len(t.time_s) == r.iterations > 50
        assert np.all(np.diff(t.time_s) > 0)
        assert math.isclose(sum(r.shares.as_dict().values()), 1.0, rel_tol=1e-12)
        assert math.isclose(r.shares.stored, t.stored.sum() / (SMALL_SLOTS * r.iterations))
        assert r.mean_running == pytest.approx(t.running.mean())


def test_each_policy_fills_the_kinds_it_should(small_results):
    max_r, oracle, paged = small_results["Max"], small_results["Oracle"], small_results["Paged"]
    t = max_r.timeline
    assert (t.stored + t.reserved + t.internal == t.running * SMALL_MAX).all()
    assert t.running.max() <= SMALL_SLOTS // SMALL_MAX
    t = paged.timeline
    assert (t.reserved == 0).all() and (t.external == 0).all()
    assert (t.internal <= t.running * 15).all()  # at most B - 1 empty slots per sequence
    t = oracle.timeline
    assert (t.reserved > 0).any() and (t.internal > 0).any()


def test_policies_rank_paged_over_oracle_over_max(small_results):
    print(table(small_results, "small config, 40 req/s, 1500 slots"))
    max_r, oracle, paged = small_results["Max"], small_results["Oracle"], small_results["Paged"]
    assert paged.shares.stored > oracle.shares.stored > max_r.shares.stored
    assert paged.mean_running > oracle.mean_running > max_r.mean_running
    assert paged.throughput_rps > oracle.throughput_rps > max_r.throughput_rps
    assert all(r.mean_waiting > 10 for r in small_results.values())  # overloaded, all three


def test_paged_preempts_when_overloaded(small_results):
    paged = small_results["Paged"]
    assert paged.preemptions > 0 and paged.recomputed_tokens > 0
    assert small_results["Oracle"].preemptions == 0 and small_results["Max"].preemptions == 0


def test_runs_are_deterministic_per_seed():
    first = compare_policies(small_requests(1), small_policies(), num_slots=SMALL_SLOTS)
    again = compare_policies(small_requests(1), small_policies(), num_slots=SMALL_SLOTS)
    other = compare_policies(small_requests(2), small_policies(), num_slots=SMALL_SLOTS)
    for name in first:
        assert first[name] == again[name]  # every field but the timeline
        for kind in (*KINDS, "time_s", "running", "waiting"):
            assert np.array_equal(
                getattr(first[name].timeline, kind), getattr(again[name].timeline, kind)
            )
    assert first["Paged"].summary() != other["Paged"].summary()


def test_iteration_cost_of_opt13b_on_an_a100():
    cost = IterationCost.for_gpu()
    assert cost.weights_s == pytest.approx(0.02752, rel=1e-3)
    assert cost.per_context_token_s == pytest.approx(0.878e-6, rel=1e-3)
    assert cost.per_new_token_s == pytest.approx(0.1646e-3, rel=1e-3)
    assert cost.seconds(12_000, 30) == pytest.approx(0.02752 + 12_000 * 0.878e-6, rel=1e-3)
    assert cost.seconds(0, 1000) == pytest.approx(0.1646, rel=1e-3)  # a long prefill: compute


# ---------------------------------------------------------------------------- the A100 figures


def test_a100_sharegpt_at_3_req_s_lands_in_the_lecture_bands(sharegpt_results):
    results = sharegpt_results
    ratios = concurrency_ratios(results)
    print(table(results, "OPT-13B / A100-40GB (12,596 slots), ShareGPT-like, 3 req/s, seed 0"))
    print(f"  paged/oracle {ratios['paged/oracle']:.2f}x, paged/max {ratios['paged/max']:.2f}x")
    assert A100_SLOTS == 12_596
    max_r, oracle, paged = results["Max"], results["Oracle"], results["Paged"]
    assert max_r.num_requests == 1800 and max_r.num_slots == 12_596
    # Seeds 0-4 give Max 20.4-22.2 %, Oracle 39.3-39.5 %, Paged 97.1-97.2 %, ratios 2.44-2.53x
    # and 4.37-4.67x. The bands hold those with room for other machines' NumPy, and hold the
    # lecture's ≈ 23 %, 39-40 %, > 90 %; the lecture's ratios (1.8x, 3x) sit below ours and the
    # paper's (2.2x, 4.3x) inside.
    assert 0.17 <= max_r.shares.stored <= 0.29
    assert max_r.shares.internal > 0.5  # most of Max's memory: reserved and never used
    assert 0.33 <= oracle.shares.stored <= 0.47
    assert paged.shares.stored > 0.90
    assert max_r.mean_running == 6.0  # ⌊12,596 / 2048⌋, always full when overloaded
    assert 1.5 <= ratios["paged/oracle"] <= 3.0
    assert 2.5 <= ratios["paged/max"] <= 5.5
    for r in results.values():  # overloaded: a queue all the time, everybody slower than 3 req/s
        assert r.mean_waiting > 10 and r.throughput_rps < 2.7


def test_alpaca_is_rate_bound_except_for_max():
    results = a100_accounting("alpaca", rate=30.0, num_requests=1500)
    ratios = concurrency_ratios(results)
    print(table(results, "OPT-13B / A100-40GB, Alpaca-like, 30 req/s, seed 0"))
    print(f"  paged/oracle {ratios['paged/oracle']:.2f}x, paged/max {ratios['paged/max']:.2f}x")
    max_r, oracle, paged = results["Max"], results["Oracle"], results["Paged"]
    for r in (oracle, paged):  # everything that arrives runs at once
        assert r.mean_waiting < 0.5
        assert r.throughput_rps == pytest.approx(30.0, rel=0.1)
    assert ratios["paged/oracle"] == pytest.approx(1.0, abs=0.02)
    assert max_r.mean_waiting > 100 and max_r.mean_running == 6.0  # memory-bound
    slow = a100_accounting("alpaca", rate=3.0, num_requests=300)
    print(table(slow, "OPT-13B / A100-40GB, Alpaca-like, 3 req/s, seed 0"))
    assert all(r.throughput_rps == pytest.approx(3.0, rel=0.15) for r in slow.values())


# ---------------------------------------------------------------------------- plugging in


def test_a_student_allocator_plugs_into_the_oracle_policy():
    requests = small_requests()
    mine = simulate(requests, OraclePolicy(FirstFit), num_slots=SMALL_SLOTS)
    buddy = simulate(requests, OraclePolicy(), num_slots=SMALL_SLOTS)
    assert mine.label == "Oracle + FirstFit" and buddy.label == "Oracle + buddy"
    assert (mine.timeline.internal == 0).all()  # exact sizes: no rounding
    assert mine.shares.stored > buddy.shares.stored
    # an empty instance works too, and is handed back empty so it can be used again
    instance = FirstFit(SMALL_SLOTS)
    once = simulate(requests, OraclePolicy(instance), num_slots=SMALL_SLOTS)
    assert instance.free_slots() == SMALL_SLOTS and not instance.used
    twice = simulate(requests, OraclePolicy(instance), num_slots=SMALL_SLOTS)
    assert once == twice and once.shares == mine.shares
    # the whole comparison runs on it
    results = compare_policies(requests, small_policies(FirstFit), num_slots=SMALL_SLOTS)
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
        simulate(small_requests(), OraclePolicy(allocator), num_slots=SMALL_SLOTS)


# ---------------------------------------------------------------------------- bad arguments


def test_bad_arguments_raise_clearly():
    requests = small_requests(n=50)
    with pytest.raises(ValueError, match="non-empty list"):
        simulate([], PagedPolicy())
    with pytest.raises(TypeError, match="MemoryPolicy"):
        simulate(requests, "paged")
    with pytest.raises(ValueError, match="num_slots must be positive"):
        simulate(requests, PagedPolicy(), num_slots=0)
    with pytest.raises(ValueError, match="window"):
        simulate(requests, PagedPolicy(), warmup_s=1e6)
    with pytest.raises(ValueError, match="rate="):
        simulate(generate_requests(5, SMALL, rate=None), PagedPolicy())
    with pytest.raises(TypeError, match="IterationCost"):
        simulate(requests, PagedPolicy(), cost=0.04)
    with pytest.raises(ValueError, match="output_len must be ints >= 1"):
        simulate([Request(0, 0.0, 5, 0), Request(1, 1.0, 5, 5)], PagedPolicy())
    with pytest.raises(ValueError, match="max_len"):
        ReserveMaxPolicy(max_len=0)
    with pytest.raises(ValueError, match="more than max_len 64"):
        simulate(requests, ReserveMaxPolicy(64), num_slots=SMALL_SLOTS)
    with pytest.raises(ValueError, match="exceeds the arena"):
        simulate(requests, ReserveMaxPolicy(), num_slots=SMALL_SLOTS)
    with pytest.raises(TypeError, match="ContiguousAllocator"):
        OraclePolicy(allocator=42)
    with pytest.raises(TypeError, match="factory returned"):
        simulate(requests, OraclePolicy(lambda n: "memory"), num_slots=SMALL_SLOTS)
    used = BuddyAllocator(SMALL_SLOTS)
    used.alloc(10)
    with pytest.raises(ValueError, match="start empty"):
        simulate(requests, OraclePolicy(used), num_slots=SMALL_SLOTS)
    with pytest.raises(ValueError, match="block_size"):
        PagedPolicy(block_size=0)
    with pytest.raises(ValueError, match="the pool holds only"):
        simulate(requests, PagedPolicy(), num_slots=100)
    with pytest.raises(ValueError, match="non-negative"):
        IterationCost(-1.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="fraction"):
        IterationCost.for_gpu(bandwidth_efficiency=1.5)
    with pytest.raises(ValueError, match="unknown workload"):
        a100_accounting("shakespeare")
    with pytest.raises(ValueError, match="lack"):
        concurrency_ratios({})
    with pytest.raises(ValueError, match="distinct names"):
        compare_policies(requests, [PagedPolicy(16), PagedPolicy(32)], num_slots=SMALL_SLOTS)


def test_a_request_that_can_never_fit_stops_the_run_with_a_reason():
    # 12 slots = roots of 8 and 4: a 10-slot request fits the arena's size but no buddy block.
    requests = [Request(0, 0.0, 5, 5), Request(1, 1.0, 2, 2)]
    with pytest.raises(RuntimeError, match="request 0 .* can never be admitted"):
        simulate(requests, OraclePolicy(), num_slots=12)
    instance = BuddyAllocator(12)
    with pytest.raises(RuntimeError):
        simulate(list(reversed(requests)), OraclePolicy(instance), num_slots=12)
    assert instance.free_slots() == 12  # handed back empty after the error
