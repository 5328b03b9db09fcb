"""The serving loop's preemption hooks: what it checks of them (kvcourse.serving.preemption_checks),
the primitives a hook calls (recompute, swap_out), and the check on scheduler classes."""

from __future__ import annotations

import pytest

from kvcourse.serving import (
    IterationCost,
    IterationScheduler,
    LiveRequest,
    PagedScheme,
    PreemptEarliest,
    PreemptionError,
    VllmPaperScheduler,
    check_scheduler_class,
    latency_rate_sweep,
    measure_latency,
)
from kvcourse.workloads import Request

UNIT = IterationCost(1.0, 0.0, 0.0)


def crowd() -> list[Request]:
    """Three requests of prompt 3, output 6 on 4 blocks of 4: at t = 1 one must be preempted."""
    return [Request(i, 0.0, 3, 6) for i in range(3)]


class Latest(IterationScheduler):
    """vLLM's two hooks written on the bare loop, as assignment a4 asks; subclasses break one
    promise each."""

    def choose_victim(self, needy: LiveRequest) -> LiveRequest:
        return max(self.running, key=lambda live: live.order)

    def preempt(self, victim: LiveRequest) -> None:
        self.running.remove(victim)
        self.memory.release(victim)
        self.preemptions += 1
        victim.preemptions += 1
        self.waiting.appendleft(victim)
        self.recompute(victim)


def run(scheduler: type[IterationScheduler], scheme=None) -> IterationScheduler:
    with scheduler(crowd(), scheme or PagedScheme(4), num_slots=16, cost=UNIT) as s:
        for _ in s:
            pass
    return s


def test_hooks_written_on_the_bare_loop_serve_like_vllms_scheduler():
    mine, vllm = run(Latest), run(VllmPaperScheduler)
    assert (mine.iterations, mine.preemptions, mine.recomputed_tokens, mine.time_s) == (
        vllm.iterations,
        vllm.preemptions,
        vllm.recomputed_tokens,
        vllm.time_s,
    )
    assert mine.preemptions > 0


def test_the_bare_loop_says_which_hook_is_missing():
    with pytest.raises(NotImplementedError, match="has no choose_victim"):
        run(IterationScheduler)

    class NoPreempt(IterationScheduler):
        choose_victim = Latest.choose_victim

    with pytest.raises(NotImplementedError, match="has no preempt"):
        run(NoPreempt)


class KeepsRunning(Latest):
    def preempt(self, victim):
        self.memory.release(victim)
        self.waiting.appendleft(victim)
        self.recompute(victim)


class KeepsBlocks(Latest):
    def preempt(self, victim):
        self.running.remove(victim)
        self.waiting.appendleft(victim)
        victim.new = True


class LosesIt(Latest):
    def preempt(self, victim):
        self.running.remove(victim)
        self.memory.release(victim)
        self.recompute(victim)


class QueuesTwice(Latest):
    def preempt(self, victim):
        super().preempt(victim)
        self.waiting.append(victim)


class NoWayBack(Latest):
    def preempt(self, victim):
        self.running.remove(victim)
        self.memory.release(victim)
        self.waiting.appendleft(victim)


class RemovesTwo(Latest):
    def preempt(self, victim):
        super().preempt(victim)
        self.running.pop(0)


@pytest.mark.parametrize(
    ("scheduler", "message"),
    [
        (KeepsRunning, r"take exactly the victim out of the running batch"),
        (RemovesTwo, r"the batch holds 1 requests, expected 2"),
        (KeepsBlocks, r"left the victim holding its GPU memory.*memory.release"),
        (LosesIt, r"put the victim back in the waiting queue, once"),
        (QueuesTwice, r"put the victim back in the waiting queue, once"),
        (NoWayBack, r"did not say how the victim comes back.*recompute"),
    ],
)
def test_a_broken_promise_of_preempt_fails_at_once_naming_the_request(scheduler, message):
    with pytest.raises(PreemptionError, match=rf"{scheduler.__name__}.preempt\(request 2\)"):
        run(scheduler)
    with pytest.raises(PreemptionError, match=message):
        run(scheduler)


def test_recompute_and_swap_out_refuse_a_victim_that_still_holds_memory():
    class RecomputesFirst(Latest):
        def preempt(self, victim):
            self.recompute(victim)

    class SwapsFirst(Latest):
        def preempt(self, victim):
            self.swap_out(victim)

    with pytest.raises(PreemptionError, match=r"recompute\(request 2\).*after memory.release"):
        run(RecomputesFirst)
    with pytest.raises(PreemptionError, match=r"swap_out\(request 2\).*after memory.release"):
        run(SwapsFirst, PagedScheme(4, recovery="swap"))


def test_a_second_release_of_the_same_victim_is_refused():
    class ReleasesTwice(Latest):
        def preempt(self, victim):
            self.memory.release(victim)
            super().preempt(victim)

    with pytest.raises(ValueError, match="holds no blocks.*once"):
        run(ReleasesTwice)


def test_swap_out_without_a_cpu_pool_returns_false_and_changes_nothing():
    seen = []

    class TriesToSwap(Latest):
        def preempt(self, victim):
            self.running.remove(victim)
            self.memory.release(victim)
            self.preemptions += 1
            self.waiting.appendleft(victim)
            seen.append(self.swap_out(victim))
            self.recompute(victim)

    s = run(TriesToSwap)  # recovery "recompute": the scheme keeps no CPU pool
    assert seen and not any(seen)
    assert s.swap_fallbacks == len(seen) and s.swap_outs == 0 and s.swap_s == 0.0
    assert s.recomputations == s.preemptions == len(seen)


def test_swapping_hooks_on_the_bare_loop_match_vllms_swap_recovery():
    class Swaps(Latest):
        def preempt(self, victim):
            self.running.remove(victim)
            self.memory.release(victim)
            self.preemptions += 1
            victim.preemptions += 1
            self.waiting.appendleft(victim)
            if not self.swap_out(victim):
                self.recompute(victim)

    scheme = PagedScheme(4, recovery="swap")
    mine, vllm = run(Swaps, scheme), run(VllmPaperScheduler, scheme)
    assert mine.swap_outs == vllm.swap_outs > 0
    assert (mine.swapped_in_blocks, mine.swap_s, mine.time_s) == (
        vllm.swapped_in_blocks,
        vllm.swap_s,
        vllm.time_s,
    )


def test_scheduler_classes_are_checked_before_a_run():
    assert check_scheduler_class(VllmPaperScheduler) is VllmPaperScheduler
    assert check_scheduler_class(Latest) is Latest
    for bad in (
        object,
        VllmPaperScheduler(crowd(), PagedScheme(4), num_slots=16),
        "VllmPaperScheduler",
    ):
        with pytest.raises(TypeError, match="subclass of IterationScheduler"):
            check_scheduler_class(bad)
    with pytest.raises(TypeError, match="does not define choose_victim"):
        check_scheduler_class(IterationScheduler)
    with pytest.raises(TypeError, match="does not define choose_victim"):
        measure_latency(crowd(), PagedScheme(4), num_slots=16, scheduler=IterationScheduler)


def test_the_latency_sweep_runs_the_scheduler_it_is_given():
    args = dict(rates=(3.0,), schemes=[PagedScheme()], num_requests=300, seed=1, num_slots=3000)
    vllm = latency_rate_sweep(**args)
    same = latency_rate_sweep(**args, scheduler=Latest)
    other = latency_rate_sweep(**args, scheduler=PreemptEarliest)
    assert same.latencies("Paged") == vllm.latencies("Paged")
    assert other.latencies("Paged") != vllm.latencies("Paged")
    with pytest.raises(TypeError, match="subclass of IterationScheduler"):
        latency_rate_sweep(**args, scheduler=object)
