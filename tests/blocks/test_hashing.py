"""Tests for kvcourse.blocks.hashing (§8.2): chained block hashes are stable across processes,
name a block by its whole prefix (exercise 10), skip a partial block, and check their arguments."""

from __future__ import annotations

import doctest
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvcourse
import kvcourse.blocks.hashing as hashing
from kvcourse.blocks import ROOT_HASH, block_hash, chained_block_hashes, short_hash

LIB = Path(kvcourse.__file__).resolve().parents[1]


def test_exercise_10_one_token_in_block_3_changes_blocks_3_4_and_5():
    tokens = list(range(1000, 1020))  # 20 tokens, block size 4: 5 full blocks
    before = chained_block_hashes(tokens, 4)
    assert len(before) == 5 and len(set(before)) == 5
    for position in range(8, 12):  # every token of block 3 (tokens 8..11)
        edited = tokens.copy()
        edited[position] += 1
        after = chained_block_hashes(edited, 4)
        same = [b == a for b, a in zip(before, after, strict=True)]
        assert same == [True, True, False, False, False]


def test_blocks_are_named_by_their_whole_prefix_not_their_own_tokens():
    """The same four tokens after different prefixes get different hashes (why not hash each
    block on its own), and two sequences share hashes exactly over their common full blocks."""
    block = [5, 6, 7, 8]
    a = chained_block_hashes([1, 2, 3, 4, *block], 4)
    b = chained_block_hashes([9, 9, 9, 9, *block], 4)
    assert a[1] != b[1] and block_hash(a[0], block) == a[1]
    system = list(range(12))  # a shared system prompt of 3 blocks
    first = chained_block_hashes([*system, 50, 51, 52, 53, 54], 4)
    second = chained_block_hashes([*system, 60, 61, 62, 63], 4)
    assert first[:3] == second[:3] and first[3] != second[3]


def test_the_chain_is_block_hash_from_the_root():
    tokens = [3, 1, 4, 1, 5, 9, 2, 6, 5]
    parent, expected = ROOT_HASH, []
    for start in (0, 3):
        parent = block_hash(parent, tokens[start : start + 3])
        expected.append(parent)
    expected.append(block_hash(expected[-1], tokens[6:9]))
    assert chained_block_hashes(tokens, 3) == expected
    other_root = block_hash(ROOT_HASH, [42])
    assert chained_block_hashes(tokens, 3, root=other_root)[0] == block_hash(other_root, [3, 1, 4])


def test_pinned_digests_so_the_encoding_never_changes_silently():
    assert ROOT_HASH.hex() == "bc54a308e1fd547552fff31d273e83edcdac7cd67952f4bed1923f88f42ec35f"
    assert block_hash(ROOT_HASH, [1, 2, 3, 4]).hex() == (
        "b3e253ff93c0672afaaedf176b53636a6ef1d2760718aa966d9c680adc1124ed"
    )
    assert short_hash(ROOT_HASH) == "bc54a308" and short_hash(ROOT_HASH, 64) == ROOT_HASH.hex()


def test_the_encoding_is_unambiguous():
    """Token count and fixed-width tokens keep different inputs apart even when a naive byte
    concatenation would agree (e.g. [1, 2] vs [1] then [2], or [256] vs [0, 1] in one byte each)."""
    h = ROOT_HASH
    assert block_hash(h, [1, 2]) != block_hash(block_hash(h, [1]), [2])
    assert block_hash(h, [256]) != block_hash(h, [0, 1])
    assert block_hash(h, [0]) != block_hash(h, [0, 0])
    assert block_hash(h, [2**64 - 1]) != block_hash(h, [2**32 - 1])


def test_hashes_are_the_same_in_another_process_with_another_hash_seed():
    tokens = list(range(7, 7 + 37))
    here = [h.hex() for h in chained_block_hashes(tokens, 8)]
    code = (
        "from kvcourse.blocks.hashing import chained_block_hashes\n"
        f"print(' '.join(h.hex() for h in chained_block_hashes({tokens!r}, 8)))\n"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=str(LIB))
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == here and len(here) == 4


@settings(max_examples=60, deadline=None)
@given(
    tokens=st.lists(st.integers(0, 50), min_size=0, max_size=40),
    block_size=st.integers(1, 6),
    data=st.data(),
)
def test_block_i_depends_on_every_token_before_its_end(tokens, block_size, data):
    """Two token lists that first differ at position p have equal hashes exactly for the blocks
    that end before p."""
    other = list(tokens)
    if tokens:
        p = data.draw(st.integers(0, len(tokens) - 1), label="p")
        other[p] = data.draw(st.integers(0, 50).filter(lambda t: t != tokens[p]), label="new")
        other[p + 1 :] = data.draw(st.lists(st.integers(0, 50), max_size=8), label="tail")
    else:
        p = 0
        other = data.draw(st.lists(st.integers(0, 50), min_size=1, max_size=8), label="other")
    a = chained_block_hashes(tokens, block_size)
    b = chained_block_hashes(other, block_size)
    assert len(a) == len(tokens) // block_size and len(b) == len(other) // block_size
    for i, (x, y) in enumerate(zip(a, b, strict=False)):  # block i holds tokens i*B .. (i+1)*B - 1
        assert (x == y) == ((i + 1) * block_size <= p), (i, p)


def test_a_partial_block_has_no_hash():
    assert chained_block_hashes([1, 2, 3], 4) == []
    assert chained_block_hashes([], 4) == []
    full = chained_block_hashes([1, 2, 3, 4], 4)
    assert chained_block_hashes([1, 2, 3, 4, 5, 6, 7], 4) == full and len(full) == 1


def test_numpy_tokens_and_tuples_hash_like_lists():
    tokens = [0, 1, 2**40, 7, 8, 9]
    expected = chained_block_hashes(tokens, 3)
    assert chained_block_hashes(tuple(tokens), 3) == expected
    assert chained_block_hashes(np.array(tokens, dtype=np.int64), 3) == expected
    assert chained_block_hashes(range(6), 2) == chained_block_hashes([0, 1, 2, 3, 4, 5], 2)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: chained_block_hashes([1, 2, 3], 0), ValueError, "block_size must be positive"),
        (lambda: chained_block_hashes([1, 2, 3], 2.0), TypeError, "block_size must be an int"),
        (lambda: chained_block_hashes([1, True], 1), TypeError, "token 1 must be an int"),
        (lambda: chained_block_hashes([1, 2.0], 1), TypeError, "token 1 must be an int"),
        (lambda: chained_block_hashes([1, -1], 1), ValueError, "token 1 must be a token id"),
        (lambda: chained_block_hashes([2**64], 1), ValueError, "0 to 2..64 - 1"),
        (lambda: chained_block_hashes([1, 2, -3], 2), ValueError, "token 2"),  # partial block
        (lambda: chained_block_hashes("abcd", 2), TypeError, "sequence of token ids"),
        (lambda: chained_block_hashes(5, 2), TypeError, "sequence of token ids"),
        (lambda: chained_block_hashes({1, 2}, 2), TypeError, "sequence of token ids"),
        (lambda: chained_block_hashes([1], 1, root=b"x"), ValueError, "32-byte"),
        (lambda: chained_block_hashes([1], 1, root="ab" * 32), TypeError, "root must be"),
        (lambda: block_hash(ROOT_HASH, []), ValueError, "at least one token"),
        (lambda: block_hash(ROOT_HASH.hex(), [1]), TypeError, "parent must be a block hash"),
        (lambda: block_hash(None, [1]), TypeError, "parent must be"),
        (lambda: short_hash("bc54"), TypeError, "h must be a block hash"),
        (lambda: short_hash(ROOT_HASH, 0), ValueError, "n must be positive"),
        (lambda: short_hash(ROOT_HASH, 65), ValueError, "at most 64"),
    ],
)
def test_argument_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_module_docstring_examples():
    """The module docstring shows exercise 10; its examples must stay true."""
    result = doctest.testmod(hashing, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 5 and result.failed == 0
