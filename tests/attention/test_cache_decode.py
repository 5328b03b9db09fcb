"""Decode attention straight from a paged KV cache (kvcourse.attention.cache_decode, §4): a ragged
batch of queries through the Triton kernel on the cache's own blocks, and the checks that refuse a
cache the kernel cannot read. Small problems: the kernel runs in Triton's interpreter on a CPU."""

from __future__ import annotations

import pytest
import torch

from kvcourse.attention import (
    cache_decode,
    cache_decode_attention,
    check_cache_for_kernel,
    contiguous_attention,
    kernel_device,
)
from kvcourse.blocks import BlockPool
from kvcourse.kv import ContiguousKVCache, PagedKVCache

pytestmark = pytest.mark.slow  # the kernel runs in the Triton interpreter

Q_HEADS, KV_HEADS, HEAD_DIM = 4, 2, 16


def filled_cache(lengths: dict[str, int], block_size: int = 4) -> PagedKVCache:
    """A one-layer float32 paged cache holding random K and V, sequences interleaved in the pool."""
    pool = BlockPool(sum(-(-n // block_size) for n in lengths.values()) + 3, block_size, taken=[1])
    cache = PagedKVCache(pool, 1, KV_HEADS, HEAD_DIM, dtype=torch.float32, device=kernel_device())
    gen = torch.Generator().manual_seed(0)
    for seq_id in lengths:
        cache.add_sequence(seq_id)
    for step in range(max(lengths.values())):  # a token at a time: blocks of sequences alternate
        for seq_id, n in lengths.items():
            if step < n:
                k, v = torch.randn(2, 1, KV_HEADS, HEAD_DIM, generator=gen, dtype=torch.float64)
                cache.write(seq_id, 0, k, v)
    return cache


def test_a_ragged_batch_equals_causal_attention_over_what_the_cache_holds():
    lengths = {"a": 9, "b": 3, "c": 14}
    cache = filled_cache(lengths)
    # "a" decodes its last token; "c" runs its last 5 tokens as a prefill chunk; "b" its first 2.
    queries = [("a", 8), ("c", 9), ("c", 10), ("c", 11), ("c", 12), ("c", 13), ("b", 0), ("b", 1)]
    seq_ids = [seq_id for seq_id, _ in queries]
    positions = torch.tensor([p for _, p in queries])
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(len(queries), Q_HEADS, HEAD_DIM, generator=gen, dtype=torch.float64)
    out = cache_decode_attention(q, cache, 0, seq_ids, positions)
    assert out.dtype == torch.float64 and out.shape == q.shape and out.device == q.device
    for i, (seq_id, position) in enumerate(queries):
        k, v = (t.double().cpu() for t in cache.read(seq_id, 0))
        expected = contiguous_attention(q[i : i + 1], k, v, q_positions=torch.tensor([position]))
        assert (out[i] - expected[0]).abs().max().item() <= 1e-5, (seq_id, position)


def test_queries_must_name_written_positions():
    cache = filled_cache({"a": 5, "b": 2})
    q = torch.zeros(2, Q_HEADS, HEAD_DIM)
    with pytest.raises(ValueError, match="holds 2 of its tokens; write the new tokens"):
        cache_decode_attention(q, cache, 0, ["a", "b"], torch.tensor([4, 2]))
    with pytest.raises(ValueError, match="one entry each"):
        cache_decode_attention(q, cache, 0, ["a"], torch.tensor([4, 1]))
    with pytest.raises(ValueError, match=r"\[n, q_heads, head_dim\]"):
        cache_decode_attention(q[0], cache, 0, ["a"], torch.tensor([4]))


def test_caches_the_kernel_cannot_read_are_refused(monkeypatch):
    pool = BlockPool(4, 4)
    with pytest.raises(TypeError, match="kernel_inputs"):
        check_cache_for_kernel(ContiguousKVCache(1, 1, 16, dtype=torch.float32))
    with pytest.raises(TypeError, match="holds float64; build it with dtype=torch.float32"):
        check_cache_for_kernel(PagedKVCache(pool, 1, 1, 16))
    with pytest.raises(ValueError, match="power of two"):
        check_cache_for_kernel(PagedKVCache(BlockPool(4, 6), 1, 1, 16, dtype=torch.float16))
    with pytest.raises(ValueError, match="head_dim from 1 to 256"):
        check_cache_for_kernel(PagedKVCache(pool, 1, 1, 320, dtype=torch.float16))
    check_cache_for_kernel(PagedKVCache(pool, 1, 1, 80, dtype=torch.bfloat16))  # padded: fine
    monkeypatch.setattr(cache_decode, "kernel_device", lambda: "cuda")  # as on a GPU machine
    with pytest.raises(ValueError, match="device='cuda'"):
        check_cache_for_kernel(PagedKVCache(pool, 1, 1, 16, dtype=torch.float32))
