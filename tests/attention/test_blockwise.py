"""Tests for kvcourse.attention.blockwise (§4.2): blockwise attention with the online softmax
equals plain attention over the same keys and values, in NumPy and in PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcourse.attention import (
    BlockStep,
    blockwise_attention,
    blockwise_decode_attention,
    contiguous_attention,
    finish_online_softmax,
    iter_blockwise_attention,
)

TOLERANCE = 1e-13  # float64; the observed error is about 1e-16
_observed: list[float] = []


def scattered_sequence(rng, length, block_size, q_heads, kv_heads, head_dim=16, num_queries=1):
    """A sequence of ``length`` tokens scattered over a shuffled pool, plus its contiguous copy."""
    num_logical = -(-length // block_size)
    num_blocks = num_logical + 5
    k_cache = rng.standard_normal((num_blocks, block_size, kv_heads, head_dim))
    v_cache = rng.standard_normal((num_blocks, block_size, kv_heads, head_dim))
    block_ids = [int(b) for b in rng.permutation(num_blocks)[:num_logical]]
    k = np.concatenate([k_cache[b] for b in block_ids])[:length]
    v = np.concatenate([v_cache[b] for b in block_ids])[:length]
    q = rng.standard_normal((num_queries, q_heads, head_dim))
    return q, k_cache, v_cache, block_ids, k, v


def record(error: float) -> float:
    _observed.append(error)
    return error


def teardown_module(module):
    if _observed:
        print(f"\nblockwise vs contiguous attention, float64: max |diff| = {max(_observed):.3e}")


@pytest.mark.parametrize(("q_heads", "kv_heads"), [(4, 4), (4, 2), (8, 2), (4, 1), (6, 3)])
@pytest.mark.parametrize("block_size", [1, 4, 16])
@pytest.mark.parametrize("length", [1, 4, 16, 32, 5, 37])
def test_numpy_blockwise_equals_contiguous(q_heads, kv_heads, block_size, length):
    rng = np.random.default_rng(1000 * length + 10 * block_size + q_heads)
    q, k_cache, v_cache, block_ids, k, v = scattered_sequence(
        rng, length, block_size, q_heads, kv_heads
    )
    got = blockwise_attention(q, k_cache, v_cache, block_ids, length)
    expected = contiguous_attention(q, k, v)
    assert got.shape == (1, q_heads, 16)
    error = record(float(np.abs(got - expected).max()))
    assert error <= TOLERANCE, f"length {length}, block {block_size}: max error {error:.2e}"


@pytest.mark.parametrize(("q_heads", "kv_heads"), [(4, 2), (8, 8), (8, 1)])
@pytest.mark.parametrize(("block_size", "length"), [(1, 7), (4, 8), (4, 13), (16, 16), (16, 50)])
def test_torch_blockwise_equals_contiguous_and_numpy(q_heads, kv_heads, block_size, length):
    rng = np.random.default_rng(7 * length + block_size)
    q, k_cache, v_cache, block_ids, k, v = scattered_sequence(
        rng, length, block_size, q_heads, kv_heads
    )
    t = torch.from_numpy
    got = blockwise_attention(t(q), t(k_cache), t(v_cache), torch.tensor(block_ids), length)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    expected = contiguous_attention(t(q), t(k), t(v))
    error = record((got - expected).abs().max().item())
    assert error <= TOLERANCE
    numpy_result = blockwise_attention(q, k_cache, v_cache, block_ids, length)
    assert np.abs(got.numpy() - numpy_result).max() <= TOLERANCE


@pytest.mark.parametrize("xp", ["numpy", "torch"])
@pytest.mark.parametrize(
    ("block_size", "length", "num_queries"), [(4, 12, 12), (4, 11, 5), (1, 6, 3)]
)
def test_causal_chunk_equals_contiguous(xp, block_size, length, num_queries):
    """A prefill chunk: the last ``num_queries`` tokens, each seeing only keys up to itself."""
    rng = np.random.default_rng(length)
    q, k_cache, v_cache, block_ids, k, v = scattered_sequence(
        rng, length, block_size, 4, 2, num_queries=num_queries
    )
    positions = list(range(length - num_queries, length))
    if xp == "torch":
        q, k_cache, v_cache, k, v = map(torch.from_numpy, (q, k_cache, v_cache, k, v))
    got = blockwise_attention(q, k_cache, v_cache, block_ids, length, q_positions=positions)
    expected = contiguous_attention(q, k, v, q_positions=positions)
    error = record(float(abs(got - expected).max()))
    assert error <= TOLERANCE
    # The first query sees fewer keys than the whole sequence: masking really happened.
    unmasked = contiguous_attention(q, k, v)
    if positions[0] < length - 1:
        assert float(abs(unmasked[0] - expected[0]).max()) > 1e-6


def test_causal_against_a_loop_over_prefixes():
    """Causal attention of query i equals full attention over the first i + 1 keys."""
    rng = np.random.default_rng(3)
    length = 9
    q, k_cache, v_cache, block_ids, k, v = scattered_sequence(rng, length, 4, 4, 2, num_queries=9)
    got = blockwise_attention(q, k_cache, v_cache, block_ids, length, q_positions=range(length))
    for i in range(length):
        one = contiguous_attention(q[i : i + 1], k[: i + 1], v[: i + 1])
        assert np.abs(got[i] - one[0]).max() <= TOLERANCE


def test_steps_walk_the_block_table_in_logical_order():
    rng = np.random.default_rng(5)
    q, k_cache, v_cache, block_ids, k, v = scattered_sequence(rng, 10, 4, 4, 2)
    steps = list(iter_blockwise_attention(q, k_cache, v_cache, block_ids, 10))
    assert all(isinstance(s, BlockStep) for s in steps)
    assert [(s.logical, s.physical, s.num_keys) for s in steps] == [
        (0, block_ids[0], 4),
        (1, block_ids[1], 4),
        (2, block_ids[2], 2),
    ]
    # The running maximum never decreases; the running sum is at least 1 (the max term is exp 0).
    for before, after in zip(steps, steps[1:], strict=False):
        assert np.all(after.state.max >= before.state.max)
    assert all(np.all(s.state.sum >= 1.0) for s in steps)
    final = finish_online_softmax(steps[-1].state)
    assert np.abs(final - contiguous_attention(q, k, v)).max() <= TOLERANCE


def test_padding_in_the_block_table_is_never_read():
    rng = np.random.default_rng(9)
    q, k_cache, v_cache, block_ids, k, v = scattered_sequence(rng, 6, 4, 4, 2)
    padded = [*block_ids, 10**6]  # a bogus entry past the sequence's blocks
    got = blockwise_attention(q, k_cache, v_cache, padded, 6)
    assert np.abs(got - contiguous_attention(q, k, v)).max() <= TOLERANCE


def test_float32_and_large_scores_stay_finite():
    rng = np.random.default_rng(11)
    q, k_cache, v_cache, block_ids, k, v = scattered_sequence(rng, 20, 4, 4, 2)
    q = q * 200.0  # scores in the thousands: a naive exp would overflow
    got = blockwise_attention(
        q.astype(np.float32), k_cache.astype(np.float32), v_cache.astype(np.float32), block_ids, 20
    )
    assert got.dtype == np.float32 and np.all(np.isfinite(got))
    assert np.abs(got - contiguous_attention(q, k, v)).max() < 1e-3


def test_blockwise_decode_attention_matches_per_sequence_attention():
    rng = np.random.default_rng(13)
    block_size, kv_heads, q_heads, head_dim = 4, 2, 4, 8
    lengths = [1, 4, 9, 6]
    num_blocks = 12
    k_cache = torch.from_numpy(rng.standard_normal((num_blocks, block_size, kv_heads, head_dim)))
    v_cache = torch.from_numpy(rng.standard_normal((num_blocks, block_size, kv_heads, head_dim)))
    order = [int(b) for b in rng.permutation(num_blocks)]
    tables, cursor = [], 0
    for n in lengths:
        need = -(-n // block_size)
        tables.append(order[cursor : cursor + need])
        cursor += need
    width = max(len(t) for t in tables)
    block_tables = torch.zeros(len(lengths), width, dtype=torch.int32)
    for i, t in enumerate(tables):
        block_tables[i, : len(t)] = torch.tensor(t, dtype=torch.int32)
    seq_lens = torch.tensor(lengths, dtype=torch.int32)
    q = torch.from_numpy(rng.standard_normal((len(lengths), q_heads, head_dim)))
    got = blockwise_decode_attention(q, k_cache, v_cache, block_tables, seq_lens)
    assert got.shape == (len(lengths), q_heads, head_dim)
    for i, (n, t) in enumerate(zip(lengths, tables, strict=True)):
        k = torch.cat([k_cache[b] for b in t])[:n]
        v = torch.cat([v_cache[b] for b in t])[:n]
        expected = contiguous_attention(q[i : i + 1], k, v)
        assert record((got[i] - expected[0]).abs().max().item()) <= TOLERANCE


def test_custom_scale_is_used():
    rng = np.random.default_rng(17)
    q, k_cache, v_cache, block_ids, k, v = scattered_sequence(rng, 8, 4, 2, 2)
    got = blockwise_attention(q, k_cache, v_cache, block_ids, 8, scale=0.5)
    assert np.abs(got - contiguous_attention(q, k, v, scale=0.5)).max() <= TOLERANCE
    assert np.abs(got - contiguous_attention(q, k, v)).max() > 1e-6


@settings(max_examples=40, deadline=None)
@given(
    length=st.integers(1, 40),
    block_size=st.integers(1, 9),
    kv_heads=st.sampled_from([1, 2, 3]),
    group=st.sampled_from([1, 2, 4]),
    num_queries=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_any_shape_matches(length, block_size, kv_heads, group, num_queries, seed):
    rng = np.random.default_rng(seed)
    num_queries = min(num_queries, length)
    q, k_cache, v_cache, block_ids, k, v = scattered_sequence(
        rng, length, block_size, kv_heads * group, kv_heads, head_dim=4, num_queries=num_queries
    )
    positions = list(range(length - num_queries, length))
    got = blockwise_attention(q, k_cache, v_cache, block_ids, length, q_positions=positions)
    expected = contiguous_attention(q, k, v, q_positions=positions)
    assert record(float(np.abs(got - expected).max())) <= TOLERANCE


# ---------------------------------------------------------------------------- errors


def _small():
    rng = np.random.default_rng(0)
    return scattered_sequence(rng, 6, 4, 4, 2)


def test_mixing_numpy_and_torch_is_refused():
    q, k_cache, v_cache, block_ids, _, _ = _small()
    with pytest.raises(TypeError, match="all as torch tensors"):
        blockwise_attention(torch.from_numpy(q), k_cache, v_cache, block_ids, 6)


def test_heads_must_form_whole_groups():
    q, k_cache, v_cache, block_ids, _, _ = _small()
    with pytest.raises(ValueError, match="not a multiple"):
        blockwise_attention(q[:, :3], k_cache, v_cache, block_ids, 6)


@pytest.mark.parametrize(
    ("seq_len", "error", "match"),
    [
        (0, ValueError, "at least 1"),
        (9, ValueError, "needs 3"),
        (2.0, TypeError, "seq_len must be an int"),
    ],
)
def test_bad_sequence_lengths_are_refused(seq_len, error, match):
    q, k_cache, v_cache, block_ids, _, _ = _small()
    with pytest.raises(error, match=match):
        blockwise_attention(q, k_cache, v_cache, block_ids, seq_len)


def test_bad_block_ids_and_positions_are_refused():
    q, k_cache, v_cache, block_ids, _, _ = _small()
    with pytest.raises(ValueError, match="outside the cache's blocks"):
        blockwise_attention(q, k_cache, v_cache, [block_ids[0], 99], 6)
    with pytest.raises(ValueError, match="q_positions must lie in 0..5"):
        blockwise_attention(q, k_cache, v_cache, block_ids, 6, q_positions=[6])
    with pytest.raises(ValueError, match="one per query"):
        blockwise_attention(q, k_cache, v_cache, block_ids, 6, q_positions=[1, 2])
    with pytest.raises(ValueError, match="same shape"):
        blockwise_attention(q, k_cache, v_cache[:, :2], block_ids, 6)
    with pytest.raises(ValueError, match="head_dim"):
        blockwise_attention(q[..., :8], k_cache, v_cache, block_ids, 6)
    with pytest.raises(ValueError, match="no tokens"):
        contiguous_attention(q, k_cache[0, :0], v_cache[0, :0])
