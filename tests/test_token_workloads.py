"""Seeded token workloads (kvcourse.token_workloads): their shapes, what they share, their seeds
and their argument checks."""

from __future__ import annotations

import pytest

from kvcourse.token_workloads import (
    TokenRequest,
    agent_branching_workload,
    few_shot_workload,
    multi_turn_workload,
    system_prompt_workload,
    workload_tokens,
)

ALL = (system_prompt_workload, few_shot_workload, multi_turn_workload, agent_branching_workload)


@pytest.mark.parametrize("make", ALL)
def test_seeded_and_well_formed(make):
    a, b, c = make(seed=1), make(seed=1), make(seed=2)
    assert a == b and a != c
    assert all(isinstance(r, TokenRequest) and r.prompt and r.answer for r in a)
    assert len({r.request_id for r in a}) == len(a)
    assert workload_tokens(a)[0] == sum(len(r.prompt) for r in a)


def test_system_prompts_are_shared_exactly():
    reqs = system_prompt_workload(20, num_system_prompts=2, system_len=50, seed=0)
    assert len({r.prompt[:50] for r in reqs}) == 2


def test_few_shot_prompts_are_a_header_and_whole_examples():
    reqs = few_shot_workload(10, num_examples=3, shots=3, header_len=30, seed=0)
    assert len({r.prompt[:30] for r in reqs}) == 1
    with pytest.raises(ValueError, match="cannot exceed"):
        few_shot_workload(shots=7, num_examples=6)


def test_each_turn_extends_its_conversation():
    reqs = {r.request_id: r for r in multi_turn_workload(3, 4, system_len=10, seed=0)}
    for c in range(3):
        for t in range(1, 4):
            before, now = reqs[f"c{c}t{t - 1}"], reqs[f"c{c}t{t}"]
            assert now.prompt[: len(before.sequence)] == before.sequence


def test_agent_steps_branch_from_earlier_sequences_at_any_position():
    reqs = agent_branching_workload(2, 12, system_len=20, seed=0)
    starts = {r.prompt[:20] for r in reqs}
    assert len(starts) == 1  # one shared system prompt
    seen = {0: [], 1: []}  # each task's earlier sequences
    for r in reqs:
        task = int(r.request_id.split("step")[0][4:])
        if seen[task]:  # a later step continues one of them, past the task description
            assert max(_lcp(r.prompt, s) for s in seen[task]) > 20 + 50
        seen[task].append(r.sequence)
    assert len(seen[0]) == len(seen[1]) == 12


def _lcp(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="positive"):
        system_prompt_workload(0)
    with pytest.raises(TypeError, match="pair"):
        multi_turn_workload(question_len=5)
    with pytest.raises(ValueError, match="low <= high"):
        agent_branching_workload(answer_len=(9, 3))
    with pytest.raises(TypeError, match="seed"):
        few_shot_workload(seed=1.5)
