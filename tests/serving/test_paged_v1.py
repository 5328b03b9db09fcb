"""Tests for kvcourse.serving.paged_v1: vLLM v1's paged memory in the serving loop (release
v0.33.0) beside the course's (the 2023 paper's), on hand cases that pin each rule, and the loop's
invariants on random workloads (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvcourse.serving import (
    IterationCost,
    LiveRequest,
    PagedScheme,
    PagedV1Memory,
    PagedV1Scheme,
    VllmPaperScheduler,
    VllmV1Scheduler,
    check_progress,
)
from kvcourse.workloads import Request

UNIT = IterationCost(1.0, 0.0, 0.0)  # every iteration takes exactly one second


def ids(lives) -> list[int]:
    return [live.request.request_id for live in lives]


def test_v1_admits_for_the_prompt_only_and_finishes_what_the_course_preempts():
    """Two requests of prompt 3 and output 2 on 2 blocks of 4. vLLM v1 allocates slots for the
    tokens it computes now (vllm/v1/core/sched/scheduler.py, Scheduler.schedule ->
    KVCacheManager.allocate_slots with the prompt's tokens, v0.33.0), and writes a sampled
    token's KV when it is the next step's input: each request needs prompt + output - 1 = 4
    slots, one block, and both finish without a preemption (nano-vllm's BlockManager.can_allocate
    and may_append agree). The course reserves the first new token too and stores every token it
    generates: each needs 5 slots, and the later one is preempted."""
    requests = [Request(0, 0.0, 3, 2), Request(1, 0.0, 3, 2)]
    course = VllmPaperScheduler(requests, PagedScheme(4), num_slots=8, cost=UNIT)
    assert [it.stored for it in course] == [8, 5, 5]
    assert (course.preemptions, course.iterations, course.recomputed_tokens) == (1, 3, 4)
    v1 = VllmV1Scheduler(requests, PagedV1Scheme(4), num_slots=8, cost=UNIT)
    its = list(v1)
    assert [it.stored for it in its] == [6, 8]  # the prompts, then one token each
    assert [ids(it.finished) for it in its] == [[], [0, 1]]
    assert (v1.preemptions, v1.iterations) == (0, 2)


def test_v1_stores_a_generated_token_one_iteration_later():
    """A request of prompt 5 and output 4 on blocks of 4: v1 stores the prompt in the prefill,
    then one token per step, and never the last token it samples (its KV would be written by a
    step that never runs), so it finishes holding 8 tokens in 2 blocks; the course holds 9 in 3."""
    request = [Request(0, 0.0, 5, 4)]
    v1 = VllmV1Scheduler(request, PagedV1Scheme(4), num_slots=16, cost=UNIT)
    assert [(it.stored, it.internal) for it in v1] == [(5, 3), (6, 2), (7, 1), (8, 0)]
    course = VllmPaperScheduler(request, PagedScheme(4), num_slots=16, cost=UNIT)
    assert [(it.stored, it.internal) for it in course] == [(6, 2), (7, 1), (8, 0), (9, 3)]
    assert PagedV1Memory.unwritten_tokens == 1 and course.memory.unwritten_tokens == 0


def test_v1_preemption_keeps_the_victims_full_blocks_and_prefills_the_tail_again():
    """A of prompt 2 and B of prompt 3, output 4 each, on 3 blocks of 4. When A needs its second
    block, B (the latest-arrived) is preempted (Scheduler.schedule: self.running.pop(), then
    _preempt_request). v1 frees B's blocks (KVCacheManager.free, last block first) but its full
    block keeps its hash, and its partly filled last block, which holds none, goes to the head of
    the free queue (BlockPool.free_blocks), so A takes that one. B comes back with a prefix-cache
    hit on its own first block (get_computed_blocks) and prefills 2 of its 6 tokens; the paper
    recomputes all of them."""
    requests = [Request(0, 0.0, 2, 4), Request(1, 0.0, 3, 4)]
    v1 = VllmV1Scheduler(requests, PagedV1Scheme(4), num_slots=12, cost=UNIT)
    its = list(v1)
    assert [ids(it.preempted) for it in its] == [[], [], [], [1], []]
    readmitted = its[4]
    assert ids(readmitted.admitted) == [1] and readmitted.new_tokens == 2
    assert (v1.preemptions, v1.recomputed_tokens, v1.reprefilled_tokens) == (1, 6, 2)
    assert v1.memory.hit_tokens == 4
    course = VllmPaperScheduler(requests, PagedScheme(4), num_slots=12, cost=UNIT)
    list(course)
    assert (course.preemptions, course.recomputed_tokens) == (1, 5)


def test_a_victims_block_evicted_before_it_returns_is_prefilled_again():
    """A of prompt 2 and B of prompt 6, output 4 each, on 3 blocks of 4. B is preempted holding
    two full blocks; both stay cached, its last block first in the free queue (freed tail first,
    evicted first), and A's new block evicts it. B comes back with a hit on its first block
    only and prefills 5 of its 9 tokens again."""
    requests = [Request(0, 0.0, 2, 4), Request(1, 0.0, 6, 4)]
    v1 = VllmV1Scheduler(requests, PagedV1Scheme(4), num_slots=12, cost=UNIT)
    its = list(v1)
    assert ids(its[3].preempted) == [1] and ids(its[4].admitted) == [1]
    assert its[4].new_tokens == 5
    assert (v1.recomputed_tokens, v1.reprefilled_tokens, v1.memory.hit_tokens) == (9, 5, 4)
    assert v1.memory.pool.num_evictions >= 1


def test_every_copy_of_a_shared_full_block_keeps_its_name():
    """Three 4-token prompts that are exactly the shared prefix (blocks of 4), outputs 1, 3 and
    2, on a pool of 3 blocks. A hit stops a token short of the prompt, so each prefill computes a
    copy of the prefix block of its own, and vLLM v0.33.0 names every copy (BlockHashToBlockMap):
    when the first request finishes, its copy stays cached beside the others. The run then takes
    3 iterations, as vLLM's own BlockPool and scheduler give on the same requests; with only one
    copy named it took 4."""
    requests = [Request(0, 0.0, 4, 1), Request(1, 0.0, 4, 3), Request(2, 0.0, 4, 2)]
    run = VllmV1Scheduler(requests, PagedV1Scheme(4, shared_prefix=4), num_slots=12, cost=UNIT)
    iterations = list(run)
    assert [ids(it.admitted) for it in iterations] == [[0, 1, 2], [], [2]]
    assert len(iterations) == 3


def test_bad_arguments_are_refused_clearly():
    requests = [Request(0, 0.0, 3, 2)]
    with pytest.raises(TypeError, match="pass a PagedV1Scheme"):
        VllmV1Scheduler(requests, PagedScheme(4), num_slots=8)
    with pytest.raises(TypeError, match="block_size must be an int"):
        PagedV1Scheme(4.0)
    with pytest.raises(TypeError, match="non-empty str"):
        PagedV1Scheme(4, name="")
    with pytest.raises(ValueError, match="needs 9 slots but the pool holds only 8"):
        PagedV1Scheme(4).start_memory(8, [Request(0, 0.0, 6, 4)])
    memory = PagedV1Scheme(4).start_memory(8, [Request(0, 0.0, 5, 4)])  # 8 slots: it fits
    live = LiveRequest(requests[0])
    with pytest.raises(ValueError, match="holds no blocks"):
        memory.release(live)


@st.composite
def v1_runs(draw):
    """A small workload and a v1 memory that each of its requests fits alone."""
    n = draw(st.integers(1, 10))
    t, requests = 0.0, []
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.0, 0.5, 1.0, 3.0]))
        requests.append(Request(i, t, draw(st.integers(1, 12)), draw(st.integers(1, 12))))
    block = draw(st.sampled_from([1, 2, 4, 8]))
    longest = max(r.total_len - 1 for r in requests)
    slots = -(-longest // block) * block + draw(st.integers(0, 24))
    return requests, PagedV1Scheme(block), slots


@settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(v1_runs())
def test_on_any_workload_every_request_finishes_and_the_books_balance(run):
    """The loop's invariants under v1's memory: the five kinds add up, nothing is reserved, each
    running request holds prompt + generated - 1 tokens in exactly the blocks they need, a hit
    never exceeds what the victim had stored, and the model's work is each request's prompt and
    all but its last token plus what re-admitted victims prefilled again."""
    requests, scheme, num_slots = run
    scheduler = VllmV1Scheduler(requests, scheme, num_slots=num_slots, cost=UNIT)
    memory, size = scheduler.memory, scheme.block_size
    finished, new_tokens = [], 0
    for it in scheduler:
        kinds = (it.stored, it.reserved, it.internal, it.external, it.free)
        assert min(kinds) >= 0 and sum(kinds) == num_slots
        assert it.reserved == 0 and it.external == 0
        served = [*scheduler.running, *it.finished]  # finished ones left the batch after step 5
        assert it.stored == sum(live.prompt + live.done - 1 for live in served)
        for live in scheduler.running:
            assert live.table.num_blocks == -(-(live.prompt + live.done - 1) // size)
        for live in it.admitted:
            assert live.cached_tokens <= (live.prompt + live.done - 2) // size * size
            assert live.cached_tokens == 0 or live.preemptions > 0
        assert all(live.table is None for live in scheduler.waiting)
        new_tokens += it.new_tokens
        finished += ids(it.finished)
    assert sorted(finished) == list(range(len(requests)))
    assert memory.allocated() == 0 and memory.pool.num_free == memory.pool.num_blocks
    work = sum(r.prompt_len + r.output_len - 1 for r in requests)
    assert new_tokens == work + scheduler.reprefilled_tokens - scheduler.preemptions
    assert scheduler.reprefilled_tokens + memory.hit_tokens == scheduler.recomputed_tokens
    progress = check_progress(requests, scheme, scheduler=VllmV1Scheduler, num_slots=num_slots)
    assert progress.ok and progress.oldest_preempted == 0
