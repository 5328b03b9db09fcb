"""Tests for kvcourse.generation.beam_counts (§5.2, Ex 5): the full-copy scheme's 10,176 tokens
and the paged scheme's copy-on-writes for given parent choices, exactly derivable."""

from __future__ import annotations

import pytest

from kvcourse.generation import (
    expected_cow_count,
    full_copy_tokens,
    random_parent_choices,
    scripted_beam_search,
)


def test_ex5_full_copy_scheme_copies_10176_tokens():
    assert full_copy_tokens(4, 64, 32) == 4 * (64 + sum(64 + s for s in range(1, 32))) == 10_176
    assert full_copy_tokens() == scripted_beam_search().full_copy_tokens == 10_176
    assert full_copy_tokens(2, 10, 0) == 0
    assert full_copy_tokens(3, 7, 5) == 3 * sum(7 + s for s in range(5))


@pytest.mark.parametrize(
    ("args", "error"),
    [((0, 64, 32), ValueError), ((4, -64, 32), ValueError), ((4, 64, -1), ValueError)]
    + [((4.0, 64, 32), TypeError), ((4, True, 32), TypeError)],
)
def test_full_copy_tokens_checks_its_arguments(args, error):
    with pytest.raises(error):
        full_copy_tokens(*args)


def test_random_parent_choices_are_seeded_and_sorted():
    choices = random_parent_choices(3, 5, seed=7)
    assert choices == random_parent_choices(3, 5, seed=7) != random_parent_choices(3, 5, seed=8)
    assert len(choices) == 5 and choices[0] == (0, 0, 0)
    assert all(list(step) == sorted(step) and all(0 <= i < 3 for i in step) for step in choices)
    assert random_parent_choices(4, 0) == ()


def test_worked_example_by_hand():
    # k = 3, a 6-token prompt, blocks of 4 (assignment a3, Part 5): 2, 1, 0 and 1 copies.
    parents = [(0, 0, 0), (0, 0, 2), (1, 1, 1), (2, 2, 0)]
    report = scripted_beam_search(parents, beam_width=3, prompt_len=6, steps=4, block_size=4)
    assert report.cow_count == expected_cow_count(parents, 6, 4) == 4
    assert report.blocks_shared == (2, 4, 4, 5, 5)
    assert report.leaked_blocks == 0


def test_scripted_beam_counts_are_exactly_derivable():
    report = scripted_beam_search()  # k 4, prompt 64, 32 steps, block 16, seed 0
    assert report.parents == random_parent_choices(4, 32, seed=0)
    assert report.parents[0] == (0, 0, 0, 0)
    assert report.cow_count == expected_cow_count(report.parents, 64, 16) == 38
    cow_tokens = sum(
        (len(step) - len(set(step))) * ((64 + s) % 16) for s, step in enumerate(report.parents)
    )
    assert report.cow_tokens == cow_tokens == 303
    assert report.cow_block_slots == 38 * 16 == 608
    assert round(report.copy_ratio, 1) == 16.7  # lecture: 16–24× less copying
    assert (report.peak_blocks_shared, report.peak_blocks_unshared) == (10, 24)
    assert 0.39 <= report.memory_saved <= 0.68  # lecture: 39–68 %
    assert 0 < report.mean_memory_saved < 1
    assert report.leaked_blocks == 0


def test_scripted_beam_extremes():
    # Every new beam picks beam 0: 3 copies on every step whose parent length 64 + s is not a
    # multiple of 16 (all but s = 0 and s = 16), and the beams share everything but a block each.
    same = [(0, 0, 0, 0)] * 32
    report = scripted_beam_search(same)
    assert report.cow_count == 3 * 30 == expected_cow_count(same)
    # Distinct parents never copy; only the prompt stays shared.
    distinct = [(0, 0, 0, 0)] + [(0, 1, 2, 3)] * 31
    report = scripted_beam_search(distinct)
    assert report.cow_count == 0 and report.copy_ratio == float("inf")
    assert report.blocks_shared[-1] == 4 + 4 * 2  # prompt + 32 own tokens per beam
    assert report.memory_saved == 0.5


def test_parent_indices_of_any_int_type_are_plain_ints_in_the_report():
    numpy = pytest.importorskip("numpy")
    parents = [numpy.zeros(2, dtype=numpy.int64), numpy.array([1, 1])]
    report = scripted_beam_search(parents, beam_width=2, prompt_len=3, steps=2, block_size=2)
    assert report.parents == ((0, 0), (1, 1))
    assert all(type(i) is int for step in report.parents for i in step)


def test_scripted_beam_rejects_bad_parents():
    with pytest.raises(ValueError, match="each of the 32 steps"):
        scripted_beam_search([(0, 0, 0, 0)])
    with pytest.raises(ValueError, match="step 0"):
        scripted_beam_search([(0, 1, 0, 0)] + [(0, 0, 0, 0)] * 31)
    with pytest.raises(ValueError, match="step 2"):
        scripted_beam_search([(0, 0, 0, 0)] * 2 + [(0, 0, 0, 4)] + [(0, 0, 0, 0)] * 29)
    with pytest.raises(ValueError, match="step 1"):
        scripted_beam_search([(0, 0), (0, True)], beam_width=2, steps=2)
    with pytest.raises(ValueError, match="each of the 2 steps"):
        scripted_beam_search("ab", beam_width=2, steps=2)


def test_another_manager_gives_the_same_report(list_manager):
    script = random_parent_choices(4, 32, seed=3)
    assert scripted_beam_search(script, manager_factory=list_manager) == scripted_beam_search(
        script
    )
