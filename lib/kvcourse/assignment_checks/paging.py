"""Helpers for the visible test cells of assignment a2 (block tables and blockwise attention): run
a student's block table, attention and paged cache through the assignment's scenarios and read
what they did as plain values, so that a test cell reads as the checks it makes.

* :func:`expect_table`, :func:`expect_append`, :func:`expect_append_among` and
  :func:`expect_slots`: a block table's state, the blocks an ``append`` allocated and
  ``slot_of``'s answers, against the expected values the cell gives;
* :func:`paged_inputs`, :func:`gathered_attention` and :func:`expect_attention`: random paged K/V,
  attention over the gathered keys (the test's reference formula) and the comparison of a result
  with it;
* :func:`table_problem` and :func:`paged_decode`: the tiny transformer decoding on a private copy
  of the paged cache with the student's table and attention, beside a contiguous cache.

Every check compares plain Python values (ints, lists, floats), never an object the student's code
returned, and fails with the course's message: what was checked, what was expected, what came
back, and the hint the cell gives. Only the visible cells use these: a student can rebind them
before the visible tests run, so the hidden cells keep their own checks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kvcourse.assignment_checks.harness import FreshCopy, switched_off
from kvcourse.assignment_checks.readers import table_state
from kvcourse.assignment_checks.values import as_int_list, expect_equal
from kvcourse.blocks import BlockPool

__all__ = [
    "PagedDecode",
    "expect_append",
    "expect_append_among",
    "expect_attention",
    "expect_slots",
    "expect_table",
    "gathered_attention",
    "paged_decode",
    "paged_inputs",
    "table_problem",
]


# ------------------------------------------------------------------------------ Part 1: the table
def expect_table(
    table: object,
    expected: tuple[int, list[int], int],
    what: str,
    hint: str,
    *,
    free: tuple[BlockPool, int] | None = None,
) -> None:
    """Fail unless the table's ``(num_tokens, block_ids, wasted_slots)`` is ``expected``: "{what}:
    expected (num_tokens, block_ids, wasted_slots) = {expected}, got {state}. Hint: {hint}". With
    ``free=(pool, n)``, then fail unless the pool has ``n`` free blocks."""
    expect_equal(
        table_state(table, what),
        expected,
        what,
        hint,
        label="(num_tokens, block_ids, wasted_slots) = ",
    )
    if free is not None:
        pool, count = free
        expect_equal(int(pool.num_free), count, what, hint, label="free blocks in the pool: ")


def _append(table: object, args: Sequence[int], what: str) -> tuple[str, list[int]]:
    """``table.append(*args)`` and the block ids it returned, as plain ints."""
    call = f"append({', '.join(map(repr, args))})"
    new = as_int_list(table.append(*args), f"{what}: {call}", "a list of int block ids")
    return call, new


def expect_append(
    table: object, args: Sequence[int], expected: list[int], what: str, hint: str
) -> list[int]:
    """Call ``table.append(*args)``; fail unless it returns the block ids ``expected``: "{what}:
    expected append(7) to allocate the blocks [1, 4], got [1, 5]. Hint: {hint}"."""
    call, new = _append(table, args, what)
    expect_equal(new, expected, what, hint, label=f"{call} to allocate the blocks ")
    return new


def expect_append_among(
    table: object, args: Sequence[int], count: int, among: list[int], what: str, hint: str
) -> list[int]:
    """Call ``table.append(*args)``; fail unless it returns ``count`` different block ids, all in
    ``among`` (in any order, as after a ``free`` whose release order is the student's). Returns
    the ids."""
    call, new = _append(table, args, what)
    if not (len(new) == count and len(set(new)) == count and set(new) <= set(among)):
        raise AssertionError(
            f"{what}: expected {call} to allocate {count} different blocks of {among}, in any "
            f"order, got {new}. Hint: {hint}"
        )
    return new


def expect_slots(table: object, expected: Sequence[tuple[int, int]], hint: str) -> None:
    """Fail unless ``table.slot_of(p)`` is the pair ``expected[p]`` for every position ``p``:
    "slot_of(5): expected (4, 1), got (4, 5). Hint: {hint}". The answer must be a tuple of two
    numbers."""
    for position, pair in enumerate(expected):
        got = table.slot_of(position)
        assert isinstance(got, tuple) and len(got) == 2, (
            f"slot_of({position}): expected a pair (physical block, offset), got {got!r}"
        )
        expect_equal((int(got[0]), int(got[1])), tuple(pair), f"slot_of({position})", hint)


# -------------------------------------------------------------------- Part 3b: blockwise attention
def paged_inputs(
    generator: Any, q_heads: int, kv_heads: int, *, num_blocks: int, block_size: int, head_dim: int
) -> tuple[Any, Any, Any]:
    """``(q, k_blocks, v_blocks)``: a random float64 query ``[q_heads, head_dim]`` and random
    blocks ``[num_blocks, block_size, kv_heads, head_dim]`` of keys, then of values, drawn from
    ``generator`` in that order."""
    import torch  # only the attention tests use this helper

    def draw(*shape: int) -> Any:
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    q = draw(q_heads, head_dim)
    k_blocks = draw(num_blocks, block_size, kv_heads, head_dim)
    v_blocks = draw(num_blocks, block_size, kv_heads, head_dim)
    return q, k_blocks, v_blocks


def gathered_attention(
    q: Any, k_blocks: Any, v_blocks: Any, block_ids: Sequence[int], seq_len: int, scale: float
) -> Any:
    """The test's reference: ``softmax(q K^T * scale) V`` over the sequence's first ``seq_len``
    tokens, gathered into one array first (query head ``h`` reads KV head
    ``h // (q_heads // kv_heads)``)."""
    import torch  # only the attention tests use this helper

    q_heads, head_dim = q.shape
    block_size, kv_heads = k_blocks.shape[1], k_blocks.shape[2]
    used = list(block_ids)[: -(-seq_len // block_size)]
    group = q_heads // kv_heads
    k = k_blocks[used].reshape(-1, kv_heads, head_dim)[:seq_len].repeat_interleave(group, dim=1)
    v = v_blocks[used].reshape(-1, kv_heads, head_dim)[:seq_len].repeat_interleave(group, dim=1)
    weights = torch.softmax(torch.einsum("hd,lhd->hl", q, k) * scale, dim=-1)
    return torch.einsum("hl,lhd->hd", weights, v)


def expect_attention(got: object, expected: Any, what: str, hint: str, *, tol: float) -> None:
    """Fail unless ``got`` is a float64 ``torch.Tensor`` of ``expected``'s shape (one row per query
    head) that differs from ``expected`` by at most ``tol`` anywhere (NaN never passes): "{what}:
    your result differs from softmax(q K^T * scale) V over the gathered keys and values by up to
    {gap} (allowed: {tol}). Hint: {hint}"."""
    import torch  # only the attention tests use this helper

    assert type(got) is torch.Tensor and got.dtype == torch.float64, (
        f"{what}: expected a float64 torch.Tensor, got {got!r}"
    )
    shape = tuple(expected.shape)
    assert tuple(got.shape) == shape, (
        f"{what}: expected shape {shape}, one row per query head, got {tuple(got.shape)}"
    )
    gap = float((got - expected).abs().max())
    assert gap <= tol, (
        f"{what}: your result differs from softmax(q K^T * scale) V over the gathered keys and "
        f"values by up to {gap:.3g} (allowed: {tol:g}). Hint: {hint}"
    )


# ------------------------------------------------------------- Part 4: the tiny transformer, paged
def table_problem(cache: object) -> str | None:
    """The first entry of the block tables in a paged ``cache`` that is not as Part 1 says (too
    many or too few blocks for the tokens, or a ``slot_of`` that disagrees with ``block_ids``),
    described for a message; ``None`` if there is none."""
    size = cache.block_size
    for seq_id in cache.seq_ids:
        table = cache.block_table(seq_id)
        tokens, ids = int(table.num_tokens), [int(b) for b in table.block_ids]
        if len(ids) != -(-tokens // size):
            return (
                f"sequence {seq_id!r} holds {tokens} tokens in the blocks {ids}; expected "
                f"ceil({tokens} / {size}) = {-(-tokens // size)} blocks"
            )
        for position in range(tokens):
            expected = (ids[position // size], position % size)
            try:
                got = tuple(int(x) for x in table.slot_of(position))
            except Exception as err:
                got = f"an error ({type(err).__name__}: {err})"
            if got != expected:
                return (
                    f"sequence {seq_id!r}, slot_of({position}): expected (block_ids[{position} // "
                    f"{size}], {position} % {size}) = {expected}, got {got}"
                )
    return None


@dataclass(frozen=True)
class PagedDecode:
    """What :func:`paged_decode` saw: every step's largest ``|logit difference|`` between the
    paged and the contiguous cache (one per sequence and step), what :func:`table_problem` found
    in the tables at the end (or ``None``), and the pool's free blocks after every sequence was
    freed and before any was added."""

    gaps: tuple[float, ...]
    problem: str | None
    free_after: int
    free_at_start: int


def paged_decode(
    fresh: FreshCopy,
    model: Any,
    table_factory: Callable[..., object],
    attention: Callable[..., Any],
    *,
    block_size: int,
    prompt_lengths: Sequence[int],
    decode_steps: int,
    taken: Sequence[int],
    seed: int,
    switch_off: Sequence[object],
    reference: str,
    hint: str,
) -> PagedDecode:
    """Prefill and greedy decode of random prompts of ``prompt_lengths`` tokens on the model, once
    on a paged cache whose tables are ``table_factory`` and whose attention is ``attention``, and
    once on a contiguous cache, the same tokens fed to both (the contiguous run picks them).

    Both caches come from ``fresh`` (a :func:`fresh_copy` of ``kvcourse.kv``), and ``model`` is
    one of its copy's models, so nothing done to the library in the kernel changes the run. The
    pool has ``block_size`` slots a block, room for every sequence and the blocks ``taken``. While
    a call on the paged cache runs, ``switch_off`` is switched off (``reference`` names it), and an
    error in it becomes an ``AssertionError`` naming the block size and step, what
    :func:`table_problem` finds in the tables, and ``hint``.
    """
    import torch  # only the Part 4 tests use this helper

    if not isinstance(fresh, FreshCopy):
        raise TypeError(f"paged_decode runs on a fresh_copy of kvcourse.kv, not {fresh!r}")

    c = model.config
    need = sum(-(-(n + decode_steps) // block_size) for n in prompt_lengths)
    pool = BlockPool(need + len(taken), block_size, taken=taken)
    free_at_start = pool.num_free
    shape = (c.num_layers, c.num_kv_heads, c.head_dim)
    paged = fresh.kv.PagedKVCache(pool, *shape, table_factory=table_factory)
    contiguous = fresh.kv.ContiguousKVCache(*shape)
    gen = torch.Generator().manual_seed(seed)
    batch = {
        i: torch.randint(c.vocab_size, (n,), generator=gen).tolist()
        for i, n in enumerate(prompt_lengths)
    }
    # The contiguous run first: it picks every step's tokens and gives the expected logits.
    for seq_id in batch:
        contiguous.add_sequence(seq_id)
    fed, expected = [], []
    for _ in range(decode_steps + 1):
        logits = model.forward(batch, contiguous)
        fed.append(batch)
        expected.append(logits)
        batch = {s: [int(logits[s][-1].argmax())] for s in batch}

    # Then the paged run on the same tokens, with the reference switched off: one block for the
    # whole decode and one for the frees (each block sweeps the kernel for copies of the
    # reference once, which costs far more than a step of this tiny model).
    where = {"step": 0, "call": "add_sequence"}

    def failed(err: Exception) -> AssertionError:
        problem = table_problem(paged)
        return AssertionError(
            f"block size {block_size}, step {where['step']} (0 is the prefill): {where['call']} "
            f"on your paged cache failed with {type(err).__name__}: {err}. "
            + (f"In your block table: {problem}. " if problem else "")
            + f"Hint: {hint}"
        )

    got = []
    try:
        with switched_off(*switch_off, reference=reference, watch=True):
            for seq_id in fed[0]:
                paged.add_sequence(seq_id)
            where["call"] = "forward"
            for step, tokens in enumerate(fed):
                where["step"] = step
                got.append(model.forward(tokens, paged, attention=attention))
    except AssertionError:
        raise
    except Exception as err:
        raise failed(err) from err
    gaps = [
        float((logits[s] - want[s]).abs().max())
        for logits, want in zip(got, expected, strict=True)
        for s in want
    ]
    problem = table_problem(paged)
    where.update(step=decode_steps, call="free_sequence")
    try:
        with switched_off(*switch_off, reference=reference, watch=True):
            for seq_id in list(paged.seq_ids):
                paged.free_sequence(seq_id)
    except AssertionError:
        raise
    except Exception as err:
        raise failed(err) from err
    return PagedDecode(tuple(gaps), problem, int(pool.num_free), int(free_at_start))
