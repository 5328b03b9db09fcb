"""a6's visible-test helper: a Conductor decision read as plain values."""

import pytest

from kvcourse.assignment_checks import decision_summary
from kvcourse.cluster import Decision


class Sneaky(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def test_a_decision_becomes_plain_values():
    got = decision_summary(Decision(2, Sneaky(5), None, 0.29566), "choose")
    assert got == (2, 5, None, 0.296)
    assert type(got[1]) is int
    assert decision_summary(Decision(None, 0, None, 6.6), "choose") == (None, 0, None, 6.6)


def test_anything_else_is_named():
    with pytest.raises(AssertionError, match="choose: expected a Decision"):
        decision_summary((1, 2, None, 0.3), "choose")
    with pytest.raises(AssertionError, match="choose: Decision.instance"):
        decision_summary(Decision("1", 2, None, 0.3), "choose")
    with pytest.raises(AssertionError, match="Decision.ttft_s: expected a float"):
        decision_summary(Decision(1, 2, None, "fast"), "choose")
