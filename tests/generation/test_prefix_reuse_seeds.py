"""The share a shared few-shot prefix saves over many seeds, counted without the model
(kvcourse.generation.prefix_reuse.few_shot_saved_shares): §8 reports its mean and spread."""

from __future__ import annotations

import statistics

import pytest

from kvcourse.generation import ex7_saved_share, few_shot_saved_shares


def test_seed_0_is_the_demo_run_and_below_the_typical_draw():
    shares = few_shot_saved_shares(341, range(1000))
    assert len(shares) == 1000
    # Seed 0 is §8's run (its 8 questions hold 197 tokens); the equality with the model's own
    # count is checked in test_prefix_reuse.py (slow).
    assert shares[0] == pytest.approx(1 - (341 + 7 * 5 + 197) / (8 * 341 + 197))
    assert round(100 * shares[0], 1) == 80.4
    assert round(100 * statistics.fmean(shares), 1) == 81.5
    low, high = statistics.quantiles(shares, n=20)[0], statistics.quantiles(shares, n=20)[-1]
    assert (round(100 * low, 1), round(100 * high, 1)) == (80.7, 82.3)
    assert shares[0] < low  # the demo's draw has long questions
    # Every draw lies between Ex 7's formula at the shortest and the longest questions.
    assert all(ex7_saved_share(341, 8, 30) <= s <= ex7_saved_share(341, 8, 10) for s in shares)


def test_the_1_shot_prefix_saves_less():
    one, five = few_shot_saved_shares(80, range(200)), few_shot_saved_shares(341, range(200))
    assert statistics.fmean(one) < statistics.fmean(five)


def test_the_draws_are_deterministic_and_arguments_checked():
    assert few_shot_saved_shares(341, (3, 4)) == few_shot_saved_shares(341, range(3, 5))
    with pytest.raises(ValueError, match="seeds"):
        few_shot_saved_shares(341, ())
    with pytest.raises(ValueError, match="question_lens"):
        few_shot_saved_shares(341, (0,), question_lens=(5, 2))
    with pytest.raises(ValueError, match="vocab_size"):
        few_shot_saved_shares(341, (0,), vocab_size=0)
