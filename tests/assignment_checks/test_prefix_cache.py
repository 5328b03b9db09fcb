"""kvcourse.assignment_checks.prefix_cache, the helpers of a5's visible test cells: a cache read as
plain values, and the course's message when they are not the expected ones."""

from __future__ import annotations

import pytest

from kvcourse.assignment_checks.prefix_cache import cache_state, expect_holding


class Cache:
    """The interface a5's students write, as far as the helpers read it."""

    def __init__(self, held, evictions=0):
        self.held, self.evictions = list(held), evictions

    def __len__(self):
        return len(self.held)

    def __contains__(self, block_id):
        return block_id in self.held


class Sneaky(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def test_the_state_is_plain_values_in_the_order_asked():
    got = cache_state(Cache(["d", "a"], evictions=Sneaky(2)), "abcde")
    assert got == (["a", "d"], 2, 2)
    assert type(got[2]) is int and type(got[1]) is int


def test_a_cache_that_is_not_the_worked_answer_fails_with_the_message():
    expect_holding(Cache("ac", 1), "abc", (["a", "c"], 2, 1), "after [a], [c]", "LRU.")
    with pytest.raises(AssertionError) as caught:
        expect_holding(Cache("cd", 2), "abcd", (["a", "d"], 2, 2), "then [e]", "c goes.")
    assert str(caught.value) == (
        "then [e]: expected (held, len, evictions) = (['a', 'd'], 2, 2), got (['c', 'd'], 2, 2). "
        "Hint: c goes."
    )


def test_evictions_that_are_not_an_int_are_named():
    with pytest.raises(AssertionError, match="cache.evictions: expected an int, got '1'"):
        cache_state(Cache("a", "1"), "a")
    with pytest.raises(AssertionError, match="cache.evictions: expected an int, got None"):
        cache_state(
            type("NoCount", (), {"__len__": lambda s: 0, "__contains__": lambda s, b: 0})(), "a"
        )
