"""Tests for kvcourse.generation.sampling_counts (§5.1, Ex 4): the copy-on-writes and blocks of
parallel sampling, counted on block bookkeeping alone."""

from __future__ import annotations

import pytest

from kvcourse.blocks import SharedBlockManager
from kvcourse.generation import (
    ParallelSamplingReport,
    parallel_sampling,
    parallel_sampling_sweep,
)


@pytest.mark.parametrize("block_size", [1, 4, 16, 32])
@pytest.mark.parametrize("prompt_len", [1, 15, 17, 64, 96, 100])
def test_ex4_n_minus_one_copies_or_none_for_block_multiples(prompt_len, block_size):
    for n in range(1, 9):
        report = parallel_sampling(prompt_len, n, 5, block_size)
        partial = prompt_len % block_size
        expected = n - 1 if partial else 0
        assert report.cow_count == expected, (prompt_len, block_size, n)
        assert report.copied_tokens == expected * partial
        assert report.leaked_blocks == 0


def test_lecture_parallel_sampling_sweep():
    # prompt 100 = 6 full blocks + 4 tokens; 40 tokens each; block 16. Without sharing each
    # sample holds ceil(140/16) = 9 blocks; with sharing 6 shared blocks + 3 per sample (44 tokens).
    reports = parallel_sampling_sweep(range(2, 9))
    assert [r.num_samples for r in reports] == list(range(2, 9))
    assert [r.cow_count for r in reports] == [1, 2, 3, 4, 5, 6, 7]
    assert [r.copied_tokens for r in reports] == [4 * (n - 1) for n in range(2, 9)]
    assert [r.peak_blocks_shared for r in reports] == [6 + 3 * n for n in range(2, 9)]
    assert [r.peak_blocks_unshared for r in reports] == [9 * n for n in range(2, 9)]
    saved = [round(100 * r.memory_saved, 1) for r in reports]
    assert saved == [33.3, 44.4, 50.0, 53.3, 55.6, 57.1, 58.3]
    assert all(r.cow_count == 0 for r in parallel_sampling_sweep(range(2, 9), prompt_len=96))


def test_one_sample_and_no_steps():
    report = parallel_sampling(5, 1, 0, 2)
    assert report == ParallelSamplingReport(5, 1, 0, 2, 0, 0, 3, 3, 0)
    assert report.memory_saved == 0.0


def test_another_manager_gives_the_same_report(list_manager):
    assert parallel_sampling(100, 5, 40, 16, manager_factory=list_manager) == parallel_sampling(
        100, 5, 40, 16, manager_factory=SharedBlockManager
    )


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"prompt_len": 0}, ValueError, "prompt_len must be positive"),
        ({"num_samples": 1.5}, TypeError, "num_samples must be an int"),
        ({"tokens_per_sample": -1}, ValueError, "tokens_per_sample must be zero or more"),
        ({"block_size": True}, TypeError, "bool"),
        ({"manager_factory": lambda pool: object()}, TypeError, "lacks pool"),
    ],
)
def test_bad_arguments_say_what_is_wrong(kwargs, error, words):
    with pytest.raises(error, match=words):
        parallel_sampling(**kwargs)
