"""Helpers for the visible test cells of assignment a3 (copy-on-write and fork): run a student's
block manager through the assignment's scenarios and read what it holds as plain values, so that
a test cell reads as the checks it makes.

* :func:`expect_held`, :func:`expect_shared` and :func:`expect_refusal`: the sequences' token
  counts and block tables, the pool's reference counts and ``cow_count``, and the errors the
  manager must raise, against the expected values the cell gives; :func:`shared_state` reads the
  same state, :func:`call_text` writes a call as the message shows it;
* :func:`forked`, :func:`write` and :func:`expect_write`: a prompt forked into samples, and an
  append that the pool has room for (running out is then the manager's mistake, and the message
  says so), checked with :func:`expect_shared`;
* :func:`parallel_sampling`, :func:`random_parents`, :func:`run_beams` and :func:`beam_search`:
  Ex 4's parallel sampling, beam search with given parent choices, and beam search over the tiny
  transformer on a private copy of the sharing cache, each read as plain counts.

Every check compares plain Python values (ints, lists, dicts of them), never an object the
student's code returned, and fails with the course's message: what was checked, what was
expected, what came back, and the hint the cell gives. Only the visible cells use these: a student
can rebind them before the visible tests run, so the hidden cells keep their own checks.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from kvcourse.assignment_checks.harness import FreshCopy
from kvcourse.assignment_checks.readers import block_tables, cow_count, manager_state
from kvcourse.assignment_checks.values import expect_equal, expect_error
from kvcourse.blocks import BlockPool, OutOfBlocksError

__all__ = [
    "BeamSearch",
    "Beams",
    "beam_search",
    "call_text",
    "expect_held",
    "expect_refusal",
    "expect_shared",
    "expect_write",
    "forked",
    "parallel_sampling",
    "random_parents",
    "run_beams",
    "shared_state",
    "write",
]

#: The state :func:`shared_state` reads: each sequence's block table, by id; the reference count
#: of every block of the pool; and ``cow_count``.
SharedState = tuple[dict[Hashable, list[int]], list[int], int]


# --------------------------------------------------------------------------- states and errors
def call_text(call: partial) -> str:
    """A call as messages show it: ``call_text(partial(manager.fork, 0, 1))`` is
    ``"fork(0, 1)"``."""
    name = getattr(call.func, "__name__", repr(call.func))
    args = [repr(a) for a in call.args] + [f"{k}={v!r}" for k, v in call.keywords.items()]
    return f"{name}({', '.join(args)})"


def expect_refusal(error: type[BaseException], call: partial, hint: str) -> None:
    """Run ``call`` (a ``partial`` of one of the manager's methods); fail unless it raises
    ``error``: "fork('nobody', 9): expected KeyError, but it returned. Hint: {hint}"."""
    expect_error(error, call, call_text(call), hint)


def expect_held(
    manager: object,
    expected: dict[Hashable, tuple[int, list[int]]],
    what: str,
    hint: str,
    *,
    free: tuple[BlockPool, int] | None = None,
) -> None:
    """Fail unless each sequence named in ``expected`` holds ``(num_tokens, block_ids)`` as given
    there, in that order: "{what}: expected (num_tokens, block_ids) of 'A' = (7, [1, 4]), got (7,
    [1, 5]). Hint: {hint}". With ``free=(pool, n)``, then fail unless the pool has ``n`` free
    blocks."""
    for seq_id, state in expected.items():
        expect_equal(
            manager_state(manager, seq_id, what),
            state,
            what,
            hint,
            label=f"(num_tokens, block_ids) of {seq_id!r} = ",
        )
    if free is not None:
        pool, count = free
        expect_equal(int(pool.num_free), count, what, hint, label="free blocks in the pool: ")


def shared_state(
    manager: object, pool: BlockPool, seq_ids: Sequence[Hashable], what: str
) -> SharedState:
    """The block tables of ``seq_ids`` (by id), the reference count of each of the pool's blocks
    and the manager's ``cow_count``, as plain ints."""
    tables = dict(zip(seq_ids, block_tables(manager, seq_ids, what), strict=True))
    refs = [int(pool.ref_count(b)) for b in range(pool.num_blocks)]
    return tables, refs, cow_count(manager, what)


def expect_shared(
    manager: object, pool: BlockPool, expected: SharedState, what: str, hint: str
) -> None:
    """Fail unless :func:`shared_state` of the sequences ``expected`` names is ``expected``:
    "{what}: expected (block tables, reference counts of blocks 0..4, cow_count) = ({0: [0, 2], 1:
    [0, 1]}, [2, 1, 1, 0, 0], 1), got ({0: [0, 1], 1: [0, 1]}, [2, 2, 0, 0, 0], 0) (not as
    expected: block tables, reference counts, cow_count). Hint: {hint}"."""
    got = shared_state(manager, pool, list(expected[0]), what)
    if not got == expected:
        parts = ("block tables", "reference counts", "cow_count")
        differ = ", ".join(p for p, g, e in zip(parts, got, expected, strict=True) if not g == e)
        raise AssertionError(
            f"{what}: expected (block tables, reference counts of blocks 0..{pool.num_blocks - 1}"
            f", cow_count) = {expected}, got {got} (not as expected: {differ}). Hint: {hint}"
        )


# ----------------------------------------------------------------------------------- scenarios
def forked(
    manager_class: type, pool: BlockPool, prompt_len: int, seq_ids: Sequence[Hashable]
) -> Any:
    """A new ``manager_class(pool)`` in which ``seq_ids[0]`` holds a prompt of ``prompt_len``
    tokens (``add_sequence``, then ``append``) and each other id is a fork of it, in order."""
    manager = manager_class(pool)
    parent, *children = seq_ids
    manager.add_sequence(parent)
    manager.append(parent, prompt_len)
    for child in children:
        manager.fork(parent, child)
    return manager


def write(
    manager: object, pool: BlockPool, seq_id: Hashable, count: int, what: str, hint: str
) -> None:
    """``manager.append(seq_id, count)`` where the pool has the blocks it needs: if it raises
    ``OutOfBlocksError`` all the same, fail saying how many blocks were free (and their reference
    counts), and give ``hint``."""
    free, refs = pool.num_free, [pool.ref_count(b) for b in range(pool.num_blocks)]
    try:
        manager.append(seq_id, count)
    except OutOfBlocksError:
        raise AssertionError(
            f"{what}: append({seq_id!r}, {count}) raised OutOfBlocksError, but {free} of the "
            f"pool's blocks were free (reference counts {refs}), enough for it. Hint: {hint}"
        ) from None


def expect_write(
    manager: object,
    pool: BlockPool,
    seq_id: Hashable,
    expected: SharedState,
    what: str,
    hint: str,
) -> None:
    """:func:`write` one token to ``seq_id``, then :func:`expect_shared` ``expected``."""
    write(manager, pool, seq_id, 1, what, hint)
    expect_shared(manager, pool, expected, what, hint)


def parallel_sampling(
    manager_class: type,
    prompt_len: int,
    ns: Sequence[int],
    tokens_each: int,
    block_size: int,
    hint: str,
) -> tuple[list[int], list[int]]:
    """Ex 4 for each sample count ``n`` in ``ns``, in order: ``n`` samples fork from one prompt
    (sequence 0 and its forks 1 .. n - 1) and append one token each per step, in order, for
    ``tokens_each`` steps, on a new pool with room for a copy per sample; then every sample is
    freed. Returns the ``cow_count`` of each run and the blocks each left in use. Running out of
    blocks fails with ``hint``, as :func:`write` does."""
    copies, left = [], []
    for n in ns:
        blocks = n * -(-(prompt_len + tokens_each) // block_size) + n
        pool = BlockPool(blocks, block_size)
        manager = forked(manager_class, pool, prompt_len, list(range(n)))
        what = f"Ex 4, prompt {prompt_len}, n = {n}"
        for _ in range(tokens_each):
            for sample in range(n):
                write(manager, pool, sample, 1, what, hint)
        copies.append(cow_count(manager, what))
        for sample in range(n):
            manager.free(sample)
        left.append(int(pool.num_used))
    return copies, left


def random_parents(k: int, steps: int, seed: int) -> list[tuple[int, ...]]:
    """Parent choices for :func:`run_beams`: at step 0 every beam forks from the prompt; at each
    later step each new beam picks a parent with ``random.Random(seed)`` (sorted per step)."""
    rng = random.Random(seed)
    later = [tuple(sorted(rng.randrange(k) for _ in range(k))) for _ in range(steps - 1)]
    return [(0,) * k, *later]


@dataclass(frozen=True)
class Beams:
    """What :func:`run_beams` saw: the copy-on-writes of each step, the blocks in use after each
    step, and the blocks still in use after every beam was freed."""

    copies: list[int]
    used: list[int]
    leaked: int


def run_beams(
    manager_class: type,
    parents: Sequence[Sequence[int]],
    prompt_len: int,
    block_size: int,
    hint: str,
) -> Beams:
    """Beam search with given parent choices on a ``manager_class`` over a pool with room for a
    copy per beam: sequence 0 holds the prompt; at each step the ``k`` new beams fork from the
    parents chosen (``parents[step][i]`` indexes the live beams), the old beams are freed and each
    new beam appends one token. Running out of blocks fails with ``hint``."""
    k = len(parents[0])
    pool = BlockPool(k * -(-(prompt_len + len(parents)) // block_size) + k + 1, block_size)
    manager = forked(manager_class, pool, prompt_len, [0])
    live, next_id, copies, used = [0], 1, [], []
    for step in parents:
        before = cow_count(manager, "beam search")
        children = list(range(next_id, next_id + k))
        next_id += k
        for child, parent in zip(children, step, strict=True):
            manager.fork(live[parent], child)
        for old in live:
            manager.free(old)
        for child in children:
            try:
                manager.append(child, 1)
            except OutOfBlocksError:
                raise AssertionError(
                    f"beam search, step {len(copies)}: append({child}, 1) ran out of blocks; "
                    f"the pool has room for a copy per beam. After the steps before, the blocks "
                    f"used were {used}. Hint: {hint}"
                ) from None
        live = children
        copies.append(cow_count(manager, "beam search") - before)
        used.append(int(pool.num_used))
    for seq_id in live:
        manager.free(seq_id)
    return Beams(copies, used, int(pool.num_used))


# ------------------------------------------------------------------ the tiny transformer, shared
@dataclass(frozen=True)
class BeamSearch:
    """What :func:`beam_search` saw: the final beams' tokens (best first), the manager's
    ``cow_count``, the K/V rows the cache copied, and the blocks still in use after the end."""

    beams: list[list[int]]
    cows: int
    copied: int
    leaked: int


def beam_search(
    fresh: FreshCopy,
    model: Any,
    manager_class: type,
    prompt: Sequence[int],
    *,
    k: int,
    steps: int,
    block_size: int,
    hint: str,
) -> BeamSearch:
    """Beam search of width ``k`` for ``steps`` tokens after ``prompt``, on the sharing paged
    cache of ``fresh`` (a :func:`fresh_copy` of ``kvcourse.kv``; ``model`` is one of its copy's
    models) over a ``manager_class``, with blocks of ``block_size`` and room for a copy per beam.
    Ties between proposals go to the older beam, then the smaller token. Running out of blocks
    fails with ``hint``."""
    import torch  # only the Part 6 tests use this helper

    if not isinstance(fresh, FreshCopy):
        raise TypeError(f"beam_search runs on a fresh_copy of kvcourse.kv, not {fresh!r}")
    pool = BlockPool(k * -(-(len(prompt) + steps) // block_size) + k + 1, block_size)
    manager = manager_class(pool)
    cache = fresh.kv.SharingPagedKVCache.for_model(model, pool, manager=manager)
    cache.add_sequence(0)
    logits = model.forward({0: list(prompt)}, cache)[0][-1]
    live = [(0, (), 0.0, logits)]  # (sequence id, tokens so far, log-probability, last logits)
    next_id = 1
    for _ in range(steps):
        proposals = []
        for index, (_, _, score, last) in enumerate(live):
            top = torch.topk(torch.log_softmax(last, dim=-1), k)
            for logp, token in zip(top.values.tolist(), top.indices.tolist(), strict=True):
                proposals.append((score + logp, index, token))
        proposals.sort(key=lambda p: (-p[0], p[1], p[2]))
        children = []
        for score, index, token in proposals[:k]:
            cache.fork_sequence(live[index][0], next_id)
            children.append((next_id, live[index][1] + (token,), score))
            next_id += 1
        for seq_id, *_ in live:
            cache.free_sequence(seq_id)
        try:
            out = model.forward({seq_id: [tokens[-1]] for seq_id, tokens, _ in children}, cache)
        except OutOfBlocksError:
            raise AssertionError(
                f"beam search, step {len(children[0][1])}: the cache's append on your manager ran "
                f"out of blocks ({pool.num_used} of {pool.num_blocks} used); the pool has room for "
                f"a copy per beam. Hint: {hint}"
            ) from None
        live = [(seq_id, tokens, score, out[seq_id][-1]) for seq_id, tokens, score in children]
    cows = cow_count(manager, "after the beam search")
    for seq_id, *_ in live:
        cache.free_sequence(seq_id)
    beams = [list(tokens) for _, tokens, _, _ in live]
    return BeamSearch(beams, cows, int(cache.copied_slots), int(pool.num_used))
