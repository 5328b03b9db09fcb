"""Tests for kvcourse.generation.prefix_counts (§5.3): requests sharing one system prompt store
it once."""

from __future__ import annotations

import math

import pytest

from kvcourse.generation import shared_prefix


def test_shared_prefix_stores_the_prefix_once():
    report = shared_prefix()  # 341-token prefix (21 full blocks + 5), 8 requests of 10–30
    size = 16
    assert report.prefix_blocks == 22 and report.cow_count == 8  # the 5-token block, per request
    assert report.blocks_shared == 22 + sum(math.ceil((5 + q) / size) for q in report.suffix_lens)
    assert report.blocks_unshared == sum(math.ceil((341 + q) / size) for q in report.suffix_lens)
    assert 0.75 < report.memory_saved < 0.85
    assert report.leaked_blocks == 0
    aligned = shared_prefix(336, [20, 20, 20])
    assert aligned.cow_count == 0 and aligned.blocks_shared == 21 + 3 * 2


def test_suffixes_are_drawn_from_the_seed():
    assert shared_prefix(seed=4).suffix_lens == shared_prefix(seed=4).suffix_lens
    report = shared_prefix(50, num_requests=5, block_size=8, seed=4)
    assert len(report.suffix_lens) == 5 and all(10 <= q <= 30 for q in report.suffix_lens)


def test_another_manager_gives_the_same_report(list_manager):
    assert shared_prefix(manager_factory=list_manager) == shared_prefix()


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"suffix_lens": []}, ValueError, "suffix_lens is empty"),
        ({"suffix_lens": [3, -1]}, ValueError, "each suffix length must be zero or more"),
        ({"num_requests": 0}, ValueError, "num_requests must be positive"),
        ({"prefix_len": 2.0}, TypeError, "prefix_len must be an int"),
    ],
)
def test_bad_arguments_say_what_is_wrong(kwargs, error, words):
    with pytest.raises(error, match=words):
        shared_prefix(**kwargs)
