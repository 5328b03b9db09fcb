"""Few-shot prompts through a prefix cache on the tiny transformer (kvcourse.generation.
prefix_reuse): Ex 7's numbers, exact logits."""

from __future__ import annotations

import math

import pytest

from kvcourse.generation import ex7_saved_share, few_shot_prefix_reuse, few_shot_saved_shares

pytestmark = pytest.mark.slow  # they decode with the tiny transformer: tens of seconds each


def test_ex7_formula():
    # 341 = 21 full blocks + 5: the first prompt computes 361 tokens, the other 7 only 25 each.
    assert math.isclose(ex7_saved_share(341, 8, 20, 16), 1 - (361 + 7 * 25) / (8 * 361))
    assert round(ex7_saved_share(), 2) == 0.81
    with pytest.raises(ValueError, match="question_len"):
        ex7_saved_share(question_len=0)


@pytest.mark.parametrize(("prefix_len", "cached"), [(80, 80), (341, 336)])
def test_the_demo_saves_what_ex7_says_and_changes_no_logit(prefix_len, cached):
    report = few_shot_prefix_reuse(prefix_len, seed=0)
    assert report.cached_tokens == (0, *([cached] * 7))
    assert report.max_logit_diff <= 1e-12
    assert math.isclose(report.saved_share, report.ex7_estimate)
    assert all(10 <= q <= 30 for q in report.question_lens)
    assert report.computed_tokens == report.prompt_tokens - 7 * cached
    # The counting shortcut behind §8's spread over seeds gives this run's share exactly.
    assert few_shot_saved_shares(prefix_len, (0,)) == (report.saved_share,)


def test_the_counting_shortcut_matches_another_seeds_run():
    report = few_shot_prefix_reuse(341, seed=1)
    assert report.question_lens != few_shot_prefix_reuse(341, seed=0).question_lens
    assert few_shot_saved_shares(341, (1,)) == (report.saved_share,)


def test_bad_arguments():
    with pytest.raises(ValueError, match="question_lens"):
        few_shot_prefix_reuse(question_lens=(5, 2))
