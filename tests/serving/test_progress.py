"""Tests for kvcourse.serving.progress (§6.1, exercise 12): with first come, first served and the
latest-arrived request preempted, any workload whose largest request fits the pool completes and
the oldest running request is never preempted, whether victims are recomputed or swapped;
preempting the earliest instead preempts the oldest, over and over."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kvcourse.serving import (
    IterationCost,
    PagedScheme,
    PreemptEarliest,
    ProgressCheck,
    SwapCost,
    VllmPaperScheduler,
    check_progress,
    measure_latency,
)
from kvcourse.workloads import Request, sharegpt_like

UNIT = IterationCost(1.0, 0.0, 0.0)
LINK = SwapCost(copy_bytes=8, copies_per_block=2, bandwidth=8.0, per_copy_s=0.25)


def crowd() -> list[Request]:
    """An old long request (prompt 4, output 100) and a stream of 39 younger, shorter ones that
    together outgrow 32 blocks of 4 (128 slots)."""
    return [Request(0, 0.0, 4, 100), *[Request(i, 0.5 * i, 3, 20) for i in range(1, 40)]]


@st.composite
def paged_runs(draw):
    """A small workload, a pool that its largest request fits, and a recovery: recompute, or swap
    with a CPU pool from one block (most swaps fall back) to plenty."""
    n = draw(st.integers(1, 12))
    t, requests = 0.0, []
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.0, 0.5, 1.0, 3.0]))
        requests.append(Request(i, t, draw(st.integers(1, 16)), draw(st.integers(1, 16))))
    block = draw(st.sampled_from([1, 2, 4, 8]))
    longest = max(r.total_len for r in requests)
    slots = -(-longest // block) * block + draw(st.integers(0, 3)) * block
    recovery = draw(st.sampled_from(["recompute", "swap", "cheaper"]))
    cpu = None if recovery == "recompute" else draw(st.sampled_from([1, 2, 8, None]))
    scheme = PagedScheme(block, recovery=recovery, cpu_blocks=cpu, swap_cost=LINK)
    return requests, scheme, slots


@settings(deadline=None, max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(paged_runs())
def test_fcfs_and_preempting_the_latest_never_deadlocks(run):
    requests, scheme, num_slots = run
    cost = IterationCost(0.5, 0.01, 0.02)  # "cheaper" then sometimes swaps, sometimes not
    check = check_progress(requests, scheme, num_slots=num_slots, cost=cost)
    assert check.ok, check  # every request finished; the oldest running never preempted
    assert check.completed and not check.stopped and check.oldest_preempted == 0
    assert check.iterations <= sum(r.output_len for r in requests)
    event(f"{scheme.recovery}, preempted: {check.preemptions > 0}")


def test_the_check_on_a_crowd_for_both_recoveries():
    for scheme in (PagedScheme(4), PagedScheme(4, recovery="swap", swap_cost=LINK)):
        check = check_progress(crowd(), scheme, num_slots=128, cost=UNIT)
        assert isinstance(check, ProgressCheck) and check.scheduler == "VllmPaperScheduler"
        assert check.ok and check.preemptions > 0 and check.finished == 40
        assert check.most_preempted_id != 0  # the old request is never the one preempted


def test_preempting_the_earliest_preempts_the_oldest_again_and_again():
    latest = check_progress(crowd(), PagedScheme(4), num_slots=128, cost=UNIT)
    earliest = check_progress(
        crowd(), PagedScheme(4), scheduler=PreemptEarliest, num_slots=128, cost=UNIT
    )
    assert latest.ok and latest.preemptions > 0 and latest.most_preempted_id != 0
    assert earliest.scheduler == "PreemptEarliest" and not earliest.ok
    assert earliest.completed  # it keeps its tokens, so even it finishes in the end ...
    assert earliest.oldest_preempted >= 20  # ... but the oldest running is the usual victim
    assert earliest.most_preempted_id == 0 and earliest.most_preempted >= 8  # request 0: starved
    # Seen from request 0: never preempted by vLLM's rule, and done sooner.
    fair = measure_latency(crowd(), PagedScheme(4), num_slots=128, cost=UNIT)
    starved = measure_latency(
        crowd(), PagedScheme(4), num_slots=128, cost=UNIT, scheduler=PreemptEarliest
    )
    assert fair.times.preemptions[0] == 0 and starved.times.preemptions[0] >= 8
    assert starved.times.latency_s[0] > fair.times.latency_s[0]


def test_on_sharegpt_the_oldest_is_preempted_only_by_the_wrong_victim():
    requests = sharegpt_like(600, rate=3.0, seed=0)  # overloaded: hundreds of preemptions
    for scheme in (PagedScheme(), PagedScheme(recovery="swap")):
        vllm = check_progress(requests, scheme)
        assert vllm.ok and vllm.preemptions > 300
        wrong = check_progress(requests, scheme, scheduler=PreemptEarliest)
        assert wrong.completed and wrong.oldest_preempted == wrong.preemptions > 100
        assert wrong.most_preempted > 10 * vllm.most_preempted  # one old request, starved


def test_a_run_cut_off_at_max_iterations_says_so():
    check = check_progress(crowd(), PagedScheme(4), num_slots=128, cost=UNIT, max_iterations=5)
    assert check.stopped and not check.completed and not check.ok and check.iterations == 5


def test_bad_arguments_raise_clearly():
    with pytest.raises(TypeError, match="subclass of IterationScheduler"):
        check_progress(crowd(), PagedScheme(4), scheduler=object, num_slots=128)
    with pytest.raises(ValueError, match="max_iterations must be positive"):
        check_progress(crowd(), PagedScheme(4), num_slots=128, max_iterations=0)
    with pytest.raises(ValueError, match="non-empty list"):
        check_progress([], PagedScheme(4))
    assert issubclass(PreemptEarliest, VllmPaperScheduler)
