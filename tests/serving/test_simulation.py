"""Tests for kvcourse.serving.simulation (§3.3, §3.4): the five kinds of KV memory add up, the
three schemes rank as the lecture says, runs are deterministic, the A100 figures land in their
bands, and bad arguments are refused clearly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvcourse.serving import (
    A100_SLOTS,
    KINDS,
    AccountingResult,
    IterationCost,
    PagedScheme,
    ReserveMaxScheme,
    VllmPaperScheduler,
    a100_accounting,
    compare_schemes,
    concurrency_ratios,
    default_schemes,
    simulate,
)
from kvcourse.workloads import LengthDistribution, Request, generate_requests

# A small, fast, overloaded configuration: short requests (≤ 256 tokens), 1500 slots, 40 req/s.
SMALL = LengthDistribution("small", mean_prompt=20, mean_output=60, max_total=256)
SMALL_SLOTS = 1500
SMALL_MAX = 256


def small_requests(seed: int = 0, n: int = 400, rate: float = 40.0) -> list[Request]:
    return generate_requests(n, SMALL, rate=rate, seed=seed)


def small_schemes():
    return default_schemes(max_len=SMALL_MAX)


@pytest.fixture(scope="module")
def small_results() -> dict[str, AccountingResult]:
    return compare_schemes(small_requests(), small_schemes(), num_slots=SMALL_SLOTS)


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
        columns = ["scheme", *KINDS, "running", "waiting", "throughput_rps", "preemptions"]
        assert list(r.summary()) == columns


def test_schemes_rank_paged_over_oracle_over_max(small_results):
    print(table(small_results, "small config, 40 req/s, 1500 slots"))
    max_r, oracle, paged = small_results["Max"], small_results["Oracle"], small_results["Paged"]
    assert paged.shares.stored > oracle.shares.stored > max_r.shares.stored
    assert paged.mean_running > oracle.mean_running > max_r.mean_running
    assert paged.throughput_rps > oracle.throughput_rps > max_r.throughput_rps
    assert all(r.mean_waiting > 10 for r in small_results.values())  # overloaded, all three


def test_the_result_counts_what_the_scheduler_did():
    requests = small_requests()
    result = simulate(requests, PagedScheme(), num_slots=SMALL_SLOTS)
    horizon = max(r.arrival_s for r in requests)
    run = VllmPaperScheduler(requests, PagedScheme(), num_slots=SMALL_SLOTS, horizon_s=horizon)
    iterations = list(run)
    assert result.total_iterations == len(iterations) == run.iterations
    assert (result.preemptions, result.recomputed_tokens) == (
        run.preemptions,
        run.recomputed_tokens,
    )
    measured = [it for it in iterations if it.time_s >= 0.2 * horizon]
    assert result.iterations == len(measured)
    assert result.completed == sum(len(it.finished) for it in measured)
    assert result.window_s == pytest.approx(sum(it.duration_s for it in measured))
    assert result.rate == pytest.approx(40.0, rel=0.15)


def test_with_no_warmup_and_a_late_horizon_every_request_completes():
    requests = small_requests(n=100)
    result = simulate(
        requests, ReserveMaxScheme(SMALL_MAX), num_slots=SMALL_SLOTS, warmup_s=0, horizon_s=1e6
    )
    assert result.completed == 100 and result.iterations == result.total_iterations
    assert result.timeline.waiting[-1] == 0


def test_runs_are_deterministic_per_seed():
    first = compare_schemes(small_requests(1), small_schemes(), num_slots=SMALL_SLOTS)
    again = compare_schemes(small_requests(1), small_schemes(), num_slots=SMALL_SLOTS)
    other = compare_schemes(small_requests(2), small_schemes(), num_slots=SMALL_SLOTS)
    for name in first:
        assert first[name] == again[name]  # every field but the timeline
        for kind in (*KINDS, "time_s", "running", "waiting"):
            assert np.array_equal(
                getattr(first[name].timeline, kind), getattr(again[name].timeline, kind)
            )
    assert first["Paged"].summary() != other["Paged"].summary()


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


def test_a100_accounting_takes_a_distribution_and_schemes():
    results = a100_accounting(SMALL, rate=40.0, num_requests=200, schemes=[PagedScheme(32)])
    assert list(results) == ["Paged"] and results["Paged"].label == "Paged (block 32)"
    assert results["Paged"].num_slots == A100_SLOTS


# ---------------------------------------------------------------------------- bad arguments


def test_bad_arguments_raise_clearly():
    requests = small_requests(n=50)
    with pytest.raises(ValueError, match="non-empty list"):
        simulate([], PagedScheme())
    with pytest.raises(TypeError, match="only workloads.Request"):
        simulate([1, 2], PagedScheme())
    with pytest.raises(TypeError, match="MemoryScheme"):
        simulate(requests, "paged")
    with pytest.raises(ValueError, match="num_slots must be positive"):
        simulate(requests, PagedScheme(), num_slots=0)
    with pytest.raises(ValueError, match="window"):
        simulate(requests, PagedScheme(), warmup_s=1e6)
    with pytest.raises(ValueError, match="window"):  # checked before the requests are fitted
        simulate(requests, PagedScheme(), warmup_s=1e6, num_slots=10)
    with pytest.raises(ValueError, match="rate="):
        simulate(generate_requests(5, SMALL, rate=None), PagedScheme())
    with pytest.raises(ValueError, match="finite, non-negative"):
        simulate(requests, PagedScheme(), horizon_s=-1)
    with pytest.raises(TypeError, match="number of seconds"):
        simulate(requests, PagedScheme(), warmup_s="1")
    with pytest.raises(TypeError, match="IterationCost"):
        simulate(requests, PagedScheme(), cost=0.04)
    with pytest.raises(ValueError, match="output_len must be ints >= 1"):
        simulate([Request(0, 0.0, 5, 0), Request(1, 1.0, 5, 5)], PagedScheme())
    with pytest.raises(ValueError, match="output_len must be ints >= 1"):
        simulate([Request(0, 0.0, 5.0, 3), Request(1, 1.0, 5, 5)], PagedScheme())
    with pytest.raises(ValueError, match="arrival_s must be finite"):
        simulate([Request(0, math.nan, 5, 3), Request(1, 1.0, 5, 5)], PagedScheme())
    with pytest.raises(ValueError, match="arrival_s must be >= 0"):
        simulate([Request(0, -1.0, 5, 3), Request(1, 1.0, 5, 5)], PagedScheme())
    with pytest.raises(ValueError, match="more than max_len 64"):
        simulate(requests, ReserveMaxScheme(64), num_slots=SMALL_SLOTS)
    with pytest.raises(ValueError, match="the pool holds only"):
        simulate(requests, PagedScheme(), num_slots=100)
    with pytest.raises(ValueError, match="no iteration started"):
        simulate(
            [Request(0, 0.0, 5, 3), Request(1, 1.0, 5, 5)],
            PagedScheme(),
            cost=IterationCost(5.0, 0.0, 0.0),
            warmup_s=0.5,
        )
    with pytest.raises(ValueError, match="unknown workload"):
        a100_accounting("shakespeare")
    with pytest.raises(TypeError, match="name or a LengthDistribution"):
        a100_accounting(3)
    with pytest.raises(ValueError, match="lack"):
        concurrency_ratios({})
    with pytest.raises(ValueError, match="distinct names"):
        compare_schemes(requests, [PagedScheme(16), PagedScheme(32)], num_slots=SMALL_SLOTS)
    with pytest.raises(ValueError, match="non-empty list of MemoryScheme"):
        compare_schemes(requests, PagedScheme(), num_slots=SMALL_SLOTS)
