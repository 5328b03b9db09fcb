"""kvcourse.assignment_checks.paging, the helpers of a2's visible test cells: they pass the
library's own block table and attention, fail a wrong one with the expected value, what came back
and the hint, and compare plain values only; fast unit tests, no notebooks."""

from __future__ import annotations

import math
import types

import pytest
import torch

import kvcourse.attention
from kvcourse.assignment_checks import fresh_copy, module_of
from kvcourse.assignment_checks.paging import (
    PagedDecode,
    expect_append,
    expect_append_among,
    expect_attention,
    expect_slots,
    expect_table,
    gathered_attention,
    paged_decode,
    paged_inputs,
    table_problem,
)
from kvcourse.blocks import BlockPool, BlockTable


class Agreeable(int):
    """An int that claims to equal anything: a helper that asked it would be fooled."""

    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class FakeTable:
    """A block table whose state and answers the test sets."""

    def __init__(self, num_tokens=0, block_ids=(), wasted_slots=0, new=(), slots=()):
        self.num_tokens, self.block_ids, self.wasted_slots = num_tokens, block_ids, wasted_slots
        self.new, self.slots = new, slots

    def append(self, *args):
        return self.new

    def slot_of(self, position):
        return self.slots[position]


def section4_table():
    pool = BlockPool(8, 4, taken=[0, 2, 3, 5, 6])
    return pool, BlockTable(pool)


# ------------------------------------------------------------------------------------ the table
def test_expect_table_and_append_pass_the_library_table_and_return_the_blocks():
    pool, table = section4_table()
    expect_table(table, (0, [], 0), "a new table", "hint")
    assert expect_append(table, [7], [1, 4], "prefill", "hint") == [1, 4]
    expect_table(table, (7, [1, 4], 1), "after prefill", "hint", free=(pool, 1))
    assert expect_append(table, [], [], "first decode step", "hint") == []
    assert expect_append(table, [1], [7], "second decode step", "hint") == [7]
    expect_slots(
        table, [(1, 0), (1, 1), (1, 2), (1, 3), (4, 0), (4, 1), (4, 2), (4, 3), (7, 0)], ""
    )
    table.free()
    new = expect_append_among(table, [5], 2, [1, 4, 7], "reuse", "hint")
    assert len(new) == 2 and set(new) <= {1, 4, 7}
    assert all(type(b) is int for b in new)


def test_expect_table_says_what_was_expected_what_came_back_and_the_hint():
    pool, table = section4_table()
    table.append(7)
    with pytest.raises(AssertionError) as caught:
        expect_table(table, (7, [1, 5], 1), "after prefill", "take the lowest free ids.")
    assert str(caught.value) == (
        "after prefill: expected (num_tokens, block_ids, wasted_slots) = (7, [1, 5], 1), got "
        "(7, [1, 4], 1). Hint: take the lowest free ids."
    )
    with pytest.raises(AssertionError, match=r"expected free blocks in the pool: 2, got 1\. Hint"):
        expect_table(table, (7, [1, 4], 1), "after prefill", "hint", free=(pool, 2))


def test_expect_append_messages_and_plain_values():
    with pytest.raises(AssertionError) as caught:
        expect_append(FakeTable(new=[1, 5]), [7], [1, 4], "prefill", "take the lowest.")
    assert str(caught.value) == (
        "prefill: expected append(7) to allocate the blocks [1, 4], got [1, 5]. "
        "Hint: take the lowest."
    )
    with pytest.raises(AssertionError, match=r"prefill: append\(7\): expected a list of int"):
        expect_append(FakeTable(new=(1, "4")), [7], [1, 4], "prefill", "hint")
    # An always-equal id is an int, but its value is what counts: 9 is not 4.
    with pytest.raises(AssertionError, match=r"got \[1, 9\]"):
        expect_append(FakeTable(new=[1, Agreeable(9)]), [7], [1, 4], "prefill", "hint")
    with pytest.raises(AssertionError) as caught:
        expect_append_among(FakeTable(new=[1, 1]), [5], 2, [1, 4, 7], "reuse", "two blocks.")
    assert str(caught.value) == (
        "reuse: expected append(5) to allocate 2 different blocks of [1, 4, 7], in any order, "
        "got [1, 1]. Hint: two blocks."
    )
    with pytest.raises(AssertionError, match="got \\[1, 2\\]"):
        expect_append_among(FakeTable(new=[1, 2]), [5], 2, [1, 4, 7], "reuse", "hint")


def test_expect_slots_messages():
    with pytest.raises(AssertionError) as caught:
        expect_slots(FakeTable(slots=[(1, 0), (1, 5)]), [(1, 0), (1, 1)], "offset p % 4.")
    assert str(caught.value) == "slot_of(1): expected (1, 1), got (1, 5). Hint: offset p % 4."
    with pytest.raises(AssertionError, match=r"slot_of\(0\): expected a pair"):
        expect_slots(FakeTable(slots=[[1, 0]]), [(1, 0)], "hint")
    with pytest.raises(AssertionError, match=r"got \(1, 3\)"):
        expect_slots(FakeTable(slots=[(1, Agreeable(3))]), [(1, 0)], "hint")


# --------------------------------------------------------------------------- blockwise attention
def test_paged_inputs_draw_q_then_keys_then_values():
    sizes = dict(num_blocks=8, block_size=4, head_dim=16)
    q, k, v = paged_inputs(torch.Generator().manual_seed(4), 4, 2, **sizes)
    gen = torch.Generator().manual_seed(4)
    for got, shape in [(q, (4, 16)), (k, (8, 4, 2, 16)), (v, (8, 4, 2, 16))]:
        assert got.dtype == torch.float64
        assert torch.equal(got, torch.randn(*shape, generator=gen, dtype=torch.float64))


def test_gathered_attention_is_the_library_attention_over_the_used_blocks():
    sizes = dict(num_blocks=8, block_size=4, head_dim=16)
    q, k, v = paged_inputs(torch.Generator().manual_seed(0), 8, 2, **sizes)
    expected = gathered_attention(q, k, v, [7, 1, 4, 0], 9, 0.25)
    library = kvcourse.attention.blockwise_attention(q[None], k, v, [7, 1, 4, 0], 9, scale=0.25)
    assert expected.shape == (8, 16)
    assert torch.allclose(expected, library[0], rtol=0, atol=1e-12)
    expect_attention(library[0], expected, "library", "hint", tol=1e-12)


def test_expect_attention_refuses_wrong_types_shapes_values_and_nan():
    expected = torch.zeros(2, 16, dtype=torch.float64)
    with pytest.raises(AssertionError, match="case: expected a float64 torch.Tensor"):
        expect_attention(expected.float(), expected, "case", "hint", tol=1e-12)
    with pytest.raises(AssertionError, match=r"expected shape \(2, 16\), one row per query head"):
        expect_attention(expected[:1], expected, "case", "hint", tol=1e-12)
    with pytest.raises(AssertionError) as caught:
        expect_attention(expected + 1e-6, expected, "case", "walk the blocks.", tol=1e-12)
    assert str(caught.value) == (
        "case: your result differs from softmax(q K^T * scale) V over the gathered keys and "
        "values by up to 1e-06 (allowed: 1e-12). Hint: walk the blocks."
    )
    with pytest.raises(AssertionError, match="by up to nan"):
        expect_attention(expected * math.nan, expected, "case", "hint", tol=1e-12)


# ------------------------------------------------------------------- the tiny transformer, paged
ATTENTION = kvcourse.attention.blockwise_attention


def one_query(q, k_blocks, v_blocks, block_ids, seq_len, scale=None):
    """The library's blockwise attention with a2's signature (one query)."""
    return ATTENTION(q[None], k_blocks, v_blocks, block_ids, seq_len, scale=scale)[0]


def run_paged(table_factory=BlockTable, fresh=None, **overrides):
    fresh = fresh or fresh_copy("kvcourse.kv", "kvcourse.model", share=("kvcourse.blocks",))
    settings = dict(
        block_size=4,
        prompt_lengths=(5, 2),
        decode_steps=2,
        taken=(0, 2),
        seed=0,
        switch_off=[],
        reference="reference (test)",
        hint="look at your table.",
    )
    settings.update(overrides)
    model = fresh.model.TinyTransformer(seed=0)
    return paged_decode(fresh, model, table_factory, one_query, **settings)


def test_paged_decode_of_the_library_table_matches_the_contiguous_cache():
    run = run_paged()
    assert isinstance(run, PagedDecode)
    assert len(run.gaps) == 2 * 3 and max(run.gaps) <= 1e-12
    assert (
        run.problem is None and run.free_after == run.free_at_start == 2 + 1
    )  # blocks for 5 + 2 and 2 + 2 tokens
    assert all(type(g) is float for g in run.gaps)


def test_paged_decode_runs_on_a_fresh_copy_only():
    with pytest.raises(TypeError, match="fresh_copy"):
        paged_decode(
            {"kv": None},
            None,
            BlockTable,
            ATTENTION,
            block_size=4,
            prompt_lengths=(1,),
            decode_steps=0,
            taken=(),
            seed=0,
            switch_off=[],
            reference="r",
            hint="h",
        )


class OffsetTable:
    """A block table as a student writes it, whose slot_of forgets the offset within the block
    (a2's sample slot_offset)."""

    def __init__(self, pool):
        self.pool, self.block_ids, self.num_tokens = pool, [], 0

    def append(self, num_tokens=1):
        size = self.pool.block_size
        new = self.pool.allocate_many(
            -(-(self.num_tokens + num_tokens) // size) - len(self.block_ids)
        )
        self.block_ids += new
        self.num_tokens += num_tokens
        return new

    def slot_of(self, position):
        return self.block_ids[position // self.pool.block_size], position

    def free(self):
        for block in self.block_ids:
            self.pool.release(block)
        self.block_ids, self.num_tokens = [], 0


def test_paged_decode_explains_an_error_in_the_table():
    with pytest.raises(AssertionError) as caught:
        run_paged(OffsetTable)
    message = str(caught.value)
    assert message.startswith("block size 4, step 0 (0 is the prefill): forward on your paged ")
    assert (
        "In your block table: sequence 0, slot_of(4): expected (block_ids[4 // 4], 4 % 4) = "
        in (message)
    )
    assert message.endswith("Hint: look at your table.")


def test_paged_decode_switches_off_what_it_is_told_to():
    fresh = fresh_copy("kvcourse.kv", "kvcourse.model", share=("kvcourse.blocks",))
    off = [module_of(ATTENTION), fresh.module_of(ATTENTION)]
    code = ATTENTION.__code__
    with pytest.raises(AssertionError, match="your code called the course library's reference"):
        run_paged(fresh=fresh, switch_off=off)
    assert ATTENTION.__code__ is code  # switched on again


def test_table_problem_names_the_first_entry_that_is_wrong():
    class Cache:
        block_size = 4
        seq_ids = ["a"]

        def __init__(self, table):
            self.table = table

        def block_table(self, seq_id):
            return self.table

    assert table_problem(Cache(FakeTable(5, [3], slots=[]))) == (
        "sequence 'a' holds 5 tokens in the blocks [3]; expected ceil(5 / 4) = 2 blocks"
    )
    good = [(3, 0), (3, 1), (3, 2), (3, 3), (1, 0)]
    assert table_problem(Cache(FakeTable(5, [3, 1], slots=good))) is None
    assert "slot_of(4): expected (block_ids[4 // 4], 4 % 4) = (1, 0), got an error (IndexError" in (
        table_problem(Cache(FakeTable(5, [3, 1], slots=good[:4])))
    )


def test_the_helper_modules_shadow_none_of_the_package_names():
    """A module's name becomes an attribute of its package when it is imported: a helper module
    named like one of the package's functions (readers' block_tables) would replace it."""
    import kvcourse.assignment_checks as checks
    import kvcourse.assignment_checks.cow
    import kvcourse.assignment_checks.paging  # noqa: F401

    for name in checks.__all__:
        assert not isinstance(getattr(checks, name), types.ModuleType), name
