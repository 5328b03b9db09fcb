"""Seeded request streams with real token ids, for comparing prefix caches token by token (the
page *Beyond block prefixes*).

:mod:`kvcourse.workloads` draws only lengths; a prefix cache needs the tokens themselves, since
what two requests share is decided by their ids. Each generator here returns a list of
:class:`TokenRequest` (a prompt and the answer generated for it), in arrival order, built from
random token ids (``numpy.random.default_rng(seed)``, ids in ``[1000, 32000)``, so that
unrelated segments almost never share a first token). A length given as ``(low, high)`` is drawn
uniformly from ``low`` to ``high``, both included. The four shapes, from the most regular to the
least:

* :func:`system_prompt_workload`: every prompt starts with one of a few fixed system prompts,
  then a question of its own; what is shared ends where the system prompt ends;
* :func:`few_shot_workload`: a fixed header, then ``shots`` worked examples drawn in order from a
  small pool, then the question; two prompts share the header and the examples up to the first
  one they drew differently, which ends anywhere;
* :func:`multi_turn_workload`: conversations of several turns, interleaved; turn ``t``'s prompt
  is turn ``t - 1``'s prompt, its answer and a new question, so each turn can reuse everything
  its conversation said so far, up to a token position that falls anywhere;
* :func:`agent_branching_workload`: agent tasks that branch: each step takes an earlier step's
  sequence (prompt and answer), cuts it at a random token position (a retry, a backtrack, another
  branch of reasoning) and continues from there with a new observation.

>>> reqs = multi_turn_workload(2, 3, seed=0)
>>> len(reqs), all(isinstance(t, int) for r in reqs for t in r.prompt + r.answer)
(6, True)
>>> first, second = (r for r in reqs if r.request_id in ("c0t0", "c0t1"))
>>> second.prompt[: len(first.prompt) + len(first.answer)] == first.prompt + first.answer
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvcourse._checks import check_count, check_positive_int, is_int

__all__ = [
    "TokenRequest",
    "agent_branching_workload",
    "few_shot_workload",
    "multi_turn_workload",
    "system_prompt_workload",
    "workload_tokens",
]

#: Token ids are drawn from ``[LOW_TOKEN, HIGH_TOKEN)``.
LOW_TOKEN, HIGH_TOKEN = 1000, 32000


@dataclass(frozen=True)
class TokenRequest:
    """One request of a token workload: its ``request_id``, its ``prompt`` and the ``answer``
    the model generated for it (token ids)."""

    request_id: object
    prompt: tuple[int, ...]
    answer: tuple[int, ...]

    @property
    def sequence(self) -> tuple[int, ...]:
        """Prompt then answer: what a finished request leaves behind."""
        return self.prompt + self.answer


def workload_tokens(workload: list[TokenRequest]) -> tuple[int, int]:
    """``(prompt tokens, answer tokens)`` summed over a workload."""
    return sum(len(r.prompt) for r in workload), sum(len(r.answer) for r in workload)


def system_prompt_workload(
    num_requests: int = 120,
    *,
    num_system_prompts: int = 2,
    system_len: int = 600,
    question_len: tuple[int, int] = (20, 120),
    answer_len: tuple[int, int] = (20, 200),
    seed: int = 0,
) -> list[TokenRequest]:
    """``num_requests`` prompts, each one of ``num_system_prompts`` fixed ``system_len``-token
    system prompts (chosen at random) followed by a question of its own."""
    num_requests = check_positive_int("num_requests", num_requests, "e.g. 120")
    num_system_prompts = check_positive_int("num_system_prompts", num_system_prompts, "e.g. 2")
    system_len = check_count("system_len", system_len)
    q, a = _check_range("question_len", question_len), _check_range("answer_len", answer_len)
    rng = _rng(seed)
    systems = [_segment(rng, system_len) for _ in range(num_system_prompts)]
    out = []
    for i in range(num_requests):
        system = systems[int(rng.integers(num_system_prompts))]
        prompt = system + _segment(rng, _draw(rng, q))
        out.append(TokenRequest(i, prompt, _segment(rng, _draw(rng, a))))
    return out


def few_shot_workload(
    num_requests: int = 120,
    *,
    num_examples: int = 6,
    shots: int = 3,
    header_len: int = 100,
    example_len: tuple[int, int] = (40, 160),
    question_len: tuple[int, int] = (20, 80),
    answer_len: tuple[int, int] = (10, 60),
    seed: int = 0,
) -> list[TokenRequest]:
    """``num_requests`` prompts: a fixed ``header_len``-token header, ``shots`` different worked
    examples drawn in order from a pool of ``num_examples``, then a question of its own."""
    num_requests = check_positive_int("num_requests", num_requests, "e.g. 120")
    num_examples = check_positive_int("num_examples", num_examples, "e.g. 6")
    shots = check_count("shots", shots)
    if shots > num_examples:
        raise ValueError(f"shots ({shots}) cannot exceed num_examples ({num_examples})")
    header_len = check_count("header_len", header_len)
    e = _check_range("example_len", example_len)
    q, a = _check_range("question_len", question_len), _check_range("answer_len", answer_len)
    rng = _rng(seed)
    header = _segment(rng, header_len)
    examples = [_segment(rng, _draw(rng, e)) for _ in range(num_examples)]
    out = []
    for i in range(num_requests):
        chosen = rng.choice(num_examples, size=shots, replace=False)
        prompt = header + sum((examples[int(k)] for k in chosen), ())
        prompt += _segment(rng, _draw(rng, q))
        out.append(TokenRequest(i, prompt, _segment(rng, _draw(rng, a))))
    return out


def multi_turn_workload(
    num_conversations: int = 24,
    turns: int = 5,
    *,
    system_len: int = 0,
    question_len: tuple[int, int] = (10, 60),
    answer_len: tuple[int, int] = (20, 150),
    seed: int = 0,
) -> list[TokenRequest]:
    """``num_conversations`` conversations of ``turns`` turns, interleaved at random (each
    conversation's turns in order); turn ``t``'s prompt is turn ``t - 1``'s prompt and answer
    followed by a new question. ``system_len`` tokens of one shared system prompt open every
    conversation (0: none). Request ids are ``"c{conversation}t{turn}"``."""
    num_conversations = check_positive_int("num_conversations", num_conversations, "e.g. 24")
    turns = check_positive_int("turns", turns, "e.g. 6")
    system_len = check_count("system_len", system_len)
    q, a = _check_range("question_len", question_len), _check_range("answer_len", answer_len)
    rng = _rng(seed)
    order = rng.permutation(np.repeat(np.arange(num_conversations), turns))
    system = _segment(rng, system_len)
    said = [system] * num_conversations  # what each conversation holds so far
    turn = [0] * num_conversations
    out = []
    for c in (int(x) for x in order):
        prompt = said[c] + _segment(rng, _draw(rng, q))
        answer = _segment(rng, _draw(rng, a))
        out.append(TokenRequest(f"c{c}t{turn[c]}", prompt, answer))
        said[c] = prompt + answer
        turn[c] += 1
    return out


def agent_branching_workload(
    num_tasks: int = 6,
    steps_per_task: int = 20,
    *,
    system_len: int = 300,
    task_len: tuple[int, int] = (50, 150),
    observation_len: tuple[int, int] = (8, 48),
    answer_len: tuple[int, int] = (8, 48),
    seed: int = 0,
) -> list[TokenRequest]:
    """``num_tasks`` agent tasks of ``steps_per_task`` steps, interleaved at random. A task opens
    with a shared ``system_len``-token system prompt and a task description of its own; each
    step picks one of the task's earlier sequences (prompt and answer) at random, cuts it at a
    random token position after the task description, and appends a new observation; its answer
    is the step's action. Request ids are ``"task{k}step{s}"``."""
    num_tasks = check_positive_int("num_tasks", num_tasks, "e.g. 6")
    steps = check_positive_int("steps_per_task", steps_per_task, "e.g. 20")
    system_len = check_count("system_len", system_len)
    t = _check_range("task_len", task_len)
    o, a = _check_range("observation_len", observation_len), _check_range("answer_len", answer_len)
    rng = _rng(seed)
    system = _segment(rng, system_len)
    roots = [system + _segment(rng, _draw(rng, t)) for _ in range(num_tasks)]
    seqs: list[list[tuple[int, ...]]] = [[r] for r in roots]
    done = [0] * num_tasks
    out = []
    for k in (int(x) for x in rng.permutation(np.repeat(np.arange(num_tasks), steps))):
        base = seqs[k][int(rng.integers(len(seqs[k])))]
        cut = int(rng.integers(len(roots[k]), len(base) + 1))
        prompt = base[:cut] + _segment(rng, _draw(rng, o))
        answer = _segment(rng, _draw(rng, a))
        out.append(TokenRequest(f"task{k}step{done[k]}", prompt, answer))
        seqs[k].append(prompt + answer)
        done[k] += 1
    return out


def _rng(seed: object) -> np.random.Generator:
    if not is_int(seed):
        raise TypeError(f"seed must be an int, got {seed!r}")
    return np.random.default_rng(int(seed))


def _segment(rng: np.random.Generator, length: int) -> tuple[int, ...]:
    return tuple(int(x) for x in rng.integers(LOW_TOKEN, HIGH_TOKEN, size=length))


def _draw(rng: np.random.Generator, bounds: tuple[int, int]) -> int:
    return int(rng.integers(bounds[0], bounds[1] + 1))


def _check_range(name: str, bounds: object) -> tuple[int, int]:
    """``(low, high)`` token counts with ``1 <= low <= high``."""
    if not isinstance(bounds, tuple) or len(bounds) != 2 or not all(map(is_int, bounds)):
        raise TypeError(f"{name} must be a pair of ints (low, high), got {bounds!r}")
    low, high = int(bounds[0]), int(bounds[1])
    if not 1 <= low <= high:
        raise ValueError(f"{name} must satisfy 1 <= low <= high, got {bounds!r}")
    return low, high
