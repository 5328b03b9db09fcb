"""Tests for kvcourse.generation.sampling_decoding (§5.1): parallel sampling over the tiny
transformer draws the same samples with fork and copy-on-write as with full copies."""

from __future__ import annotations

import pytest

from kvcourse.generation import sample_in_parallel
from kvcourse.model import TinyTransformer

pytestmark = pytest.mark.slow  # they decode with the tiny transformer: tens of seconds each


@pytest.mark.parametrize("prompt_len", [100, 96])
def test_parallel_sampling_is_identical_with_and_without_sharing(prompt_len):
    model = TinyTransformer(seed=1)
    prompt = [(7 * i) % 128 for i in range(prompt_len)]
    paged = sample_in_parallel(model, prompt, 4, 20, seed=5)
    full = sample_in_parallel(model, prompt, 4, 20, seed=5, scheme="full_copy")
    assert paged.samples == full.samples
    assert len(set(paged.samples)) == 4  # the samples really differ from each other
    assert paged.cow_count == (3 if prompt_len % 16 else 0)
    assert paged.copied_tokens == 3 * (prompt_len % 16)
    assert full.copied_tokens == 3 * prompt_len and full.cow_count == 0
    assert paged.peak_blocks < full.peak_blocks == paged.peak_blocks_unshared
    assert paged.memory_saved > 0 == full.memory_saved
    assert paged.leaked_blocks == 0


def test_another_manager_draws_the_same_samples(list_manager):
    model = TinyTransformer(seed=2)
    ref = sample_in_parallel(model, list(range(9)), 3, 6, block_size=4, temperature=0.5)
    mine = sample_in_parallel(
        model, list(range(9)), 3, 6, block_size=4, temperature=0.5, manager_factory=list_manager
    )
    assert mine == ref and ref.cow_count == 2


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"num_samples": 0}, ValueError, "num_samples must be positive"),
        ({"tokens_per_sample": -2}, ValueError, "tokens_per_sample must be zero or more"),
        ({"scheme": "shared"}, ValueError, "'paged' or 'full_copy'"),
        ({"temperature": 0}, ValueError, "temperature must be a positive"),
        ({"temperature": "1"}, TypeError, "temperature must be a"),
    ],
)
def test_bad_arguments_say_what_is_wrong(kwargs, error, words):
    args = {"num_samples": 2, "tokens_per_sample": 2} | kwargs
    with pytest.raises(error, match=words):
        sample_in_parallel(TinyTransformer(seed=0), [1, 2], **args)
