"""Tests for kvcourse.generation.beam_decoding (§5.2): beam search over the tiny transformer keeps
the same beams with fork and copy-on-write as with full copies, and its copy counts match the
scripted recount."""

from __future__ import annotations

import pytest

from kvcourse.generation import (
    beam_search,
    compare_beam_search,
    expected_cow_count,
    scripted_beam_search,
)
from kvcourse.model import TinyTransformer

pytestmark = pytest.mark.slow  # they decode with the tiny transformer: tens of seconds each


@pytest.fixture(scope="module")
def beam_comparison():
    return compare_beam_search()  # k 4, prompt 64, 32 steps, block 16, seed 0


def test_beam_search_is_identical_with_and_without_sharing(beam_comparison):
    c = beam_comparison
    assert c.identical
    assert len(c.paged.beams) == 4 and all(len(b.tokens) == 32 for b in c.paged.beams)
    scores = [b.score for b in c.paged.beams]
    assert scores == sorted(scores, reverse=True)
    assert c.full_copy.copied_tokens == 10_176  # Ex 5, from the real run
    assert c.full_copy.cow_count == 0 and c.full_copy.leaked_blocks == 0
    assert c.paged.parents == c.full_copy.parents
    assert c.paged.leaked_blocks == 0


def test_beam_search_copy_counts_match_the_scripted_recount(beam_comparison):
    paged = beam_comparison.paged
    recount = scripted_beam_search(paged.parents)
    assert paged.cow_count == recount.cow_count == expected_cow_count(paged.parents)
    assert paged.copied_tokens == recount.cow_tokens  # filled slots the K/V copy really moved
    assert paged.blocks == recount.blocks_shared
    assert beam_comparison.copy_ratio == 10_176 / (16 * paged.cow_count)
    assert beam_comparison.cow_block_slots == 16 * paged.cow_count
    assert 10 < beam_comparison.copy_ratio < 30  # lecture 16–24×; the tiny model's own choices
    assert 0.39 <= beam_comparison.memory_saved <= 0.68
    assert beam_comparison.full_copy.peak_blocks == 4 * 6
    assert beam_comparison.token_memory_saved > 0.39


def test_memory_per_step_with_and_without_sharing(beam_comparison):
    paged, full = beam_comparison.paged, beam_comparison.full_copy
    assert len(paged.blocks) == len(paged.tokens) == 33  # after the prefill, then each step
    assert full.blocks == full.blocks_unshared and full.tokens == full.tokens_unshared
    assert all(s <= u for s, u in zip(paged.tokens, paged.tokens_unshared, strict=True))
    assert paged.peak_tokens < full.peak_tokens
    assert paged.memory_saved == beam_comparison.memory_saved


def test_a_manager_without_copy_on_write_changes_the_beams(no_copy_manager):
    wrong = compare_beam_search(steps=8, manager_factory=no_copy_manager)
    assert not wrong.identical  # siblings overwrote each other's KV in the shared block


def test_small_beam_with_another_manager_is_identical(list_manager):
    model = TinyTransformer(seed=3)
    c = compare_beam_search(
        model, list(range(10)), beam_width=3, steps=12, block_size=4, manager_factory=list_manager
    )
    assert c.identical and c.paged.cow_count == expected_cow_count(c.paged.parents, 10, 4)


def test_blockwise_attention_keeps_the_beams():
    model = TinyTransformer(seed=1)
    read = beam_search(model, list(range(7)), beam_width=2, steps=6, block_size=3)
    blockwise = beam_search(
        model, list(range(7)), beam_width=2, steps=6, block_size=3, attention="blockwise"
    )
    assert [b.tokens for b in read.beams] == [b.tokens for b in blockwise.beams]
    assert read.parents == blockwise.parents and read.cow_count == blockwise.cow_count


def test_zero_steps_keeps_the_prompt_alone():
    run = beam_search(TinyTransformer(seed=0), [1, 2, 3], steps=0, block_size=2)
    assert run.beams[0].tokens == () and run.parents == ()
    assert run.blocks == (2,) and run.tokens == (3,) and run.leaked_blocks == 0


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "words"),
    [
        (("model", [1]), {}, TypeError, "TinyTransformer"),
        ((None, []), {}, ValueError, "prompt is empty"),
        ((None, [1]), {"beam_width": 0}, ValueError, "beam_width must be positive"),
        ((None, [1]), {"steps": -1}, ValueError, "steps must be zero or more"),
        ((None, [1]), {"scheme": "copy"}, ValueError, "'paged' or 'full_copy'"),
        ((None, [1]), {"beam_width": 1000}, ValueError, "exceeds the vocabulary"),
    ],
)
def test_bad_arguments_say_what_is_wrong(args, kwargs, error, words):
    model = TinyTransformer(seed=0)
    args = tuple(model if a is None else a for a in args)
    with pytest.raises(error, match=words):
        beam_search(*args, **kwargs)


def test_compare_checks_the_prompt_length():
    with pytest.raises(ValueError, match="prompt_len must be positive"):
        compare_beam_search(TinyTransformer(seed=0), prompt_len=0)
