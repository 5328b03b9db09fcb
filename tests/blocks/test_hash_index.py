"""Tests for kvcourse.blocks.hash_index (§8): one block per hash (the course's rule) or every copy
(vLLM v1's), on hand cases and against a model under random programs (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcourse.blocks import HashIndex
from kvcourse.blocks.hash_index import check_hash


def test_the_course_names_one_block_per_hash():
    index = HashIndex()
    assert (index.add("p", 4), index.add("p", 7), index.add("p", 4)) == (4, 4, 4)
    assert len(index) == 1 and index.holds("p", 4) and not index.holds("p", 7)
    with pytest.raises(KeyError, match="block 7 is not named 'p'"):
        index.remove("p", 7)
    index.remove("p", 4)
    assert index.lookup("p") is None and len(index) == 0


def test_v1_names_every_copy_and_serves_the_earliest_left():
    """vLLM v1 (vllm/v1/core/block_pool.py, BlockHashToBlockMap, v0.33.0): insert keeps every
    block under its hash, get_one_block returns the first inserted still there, pop(key,
    block_id) removes that block only."""
    index = HashIndex(keep_duplicates=True)
    assert [index.add("p", b) for b in (4, 7, 9, 7)] == [4, 7, 9, 7]
    assert len(index) == 3 and index.lookup("p") == 4
    index.remove("p", 7)  # a later copy goes: the earliest still serves
    assert index.lookup("p") == 4 and not index.holds("p", 7)
    index.remove("p", 4)
    assert index.lookup("p") == 9 and len(index) == 1
    index.remove("p", 9)
    assert index.lookup("p") is None and len(index) == 0


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError, match="keep_duplicates must be True or False"):
        HashIndex(keep_duplicates=1)
    with pytest.raises(TypeError, match="must not be None"):
        check_hash(None)
    with pytest.raises(TypeError, match="must be hashable"):
        check_hash([1])
    assert check_hash(b"x") == b"x"


@given(
    st.booleans(),
    st.lists(
        st.tuples(st.booleans(), st.sampled_from("ab"), st.integers(0, 5)),
        max_size=40,
    ),
)
def test_the_index_matches_a_list_of_named_blocks(keep, program):
    """Random adds and removes against a model: the named (hash, block) pairs in naming order."""
    index, named = HashIndex(keep), []
    for add, name, block in program:
        if add:
            holders = [b for h, b in named if h == name]
            if not holders or (keep and block not in holders):
                named.append((name, block))
                expected = block
            else:
                expected = block if block in holders else holders[0]
            assert index.add(name, block) == expected
        elif (name, block) in named:
            named.remove((name, block))
            index.remove(name, block)
        for h in "ab":
            holders = [b for n, b in named if n == h]
            assert index.lookup(h) == (holders[0] if holders else None)
        assert len(index) == len(named)
