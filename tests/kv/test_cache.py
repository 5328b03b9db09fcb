"""Tests for kvcourse.kv.cache and kvcourse.kv.protocols (§4): the contiguous and the paged KV
cache follow the write rule, hold the same values, refuse bad calls without changing anything, and
export what the paged-attention kernel takes."""

from __future__ import annotations

import pytest
import torch

import kvcourse.kv.cache
from kvcourse.blocks import BlockPool, OutOfBlocksError
from kvcourse.kv import (
    BlockTableLike,
    ContiguousKVCache,
    KVCache,
    ManagedKVCache,
    PagedKVCache,
    UnknownSequenceError,
)


def kv(n: int, heads: int = 2, dim: int = 16, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, heads, dim, generator=gen, dtype=torch.float64)


def make_caches():
    pool = BlockPool(6, 4)
    return [ContiguousKVCache(2, 2, 16), PagedKVCache(pool, 2, 2, 16)]


@pytest.mark.parametrize("index", [0, 1])
def test_write_rule_length_advances_after_the_last_layer(index):
    cache = make_caches()[index]
    assert isinstance(cache, ManagedKVCache)
    cache.add_sequence(7)
    k, v = kv(5), kv(5, seed=1)
    cache.write(7, 0, k, v)
    assert cache.length(7) == 0 and cache.layer_length(7, 0) == 5
    assert cache.read(7, 1)[0].shape == (0, 2, 16)
    cache.write(7, 1, 2 * k, 2 * v)
    assert cache.length(7) == 5
    got_k, got_v = cache.read(7, 0)
    assert torch.equal(got_k, k) and torch.equal(got_v, v)
    assert torch.equal(cache.read(7, 1)[0], 2 * k)
    cache.write(7, 0, kv(1, seed=2), kv(1, seed=3))
    cache.write(7, 1, kv(1, seed=4), kv(1, seed=5))
    assert cache.length(7) == 6
    assert torch.equal(cache.read(7, 0)[0][5], kv(1, seed=2)[0])


def test_paged_read_gathers_the_same_values_as_contiguous():
    contiguous, paged = make_caches()
    for cache in (contiguous, paged):
        cache.add_sequence("s")
        cache.add_sequence("t")
    # Interleave the two sequences so their blocks alternate in the pool.
    for step, (seq, n) in enumerate([("s", 3), ("t", 2), ("s", 4), ("t", 5), ("s", 1)]):
        for layer in (0, 1):
            k, v = kv(n, seed=10 * step + layer), kv(n, seed=10 * step + layer + 5)
            contiguous.write(seq, layer, k, v)
            paged.write(seq, layer, k, v)
    assert paged.block_table("s").block_ids == (0, 2)
    assert paged.block_table("t").block_ids == (1, 3)
    for seq in ("s", "t"):
        for layer in (0, 1):
            for a, b in zip(contiguous.read(seq, layer), paged.read(seq, layer), strict=True):
                assert torch.equal(a, b)


def test_paged_view_describes_the_blocks():
    _, paged = make_caches()
    paged.add_sequence(1)
    paged.write(1, 0, kv(6), kv(6))
    view = paged.paged_view(1, 0)
    assert view.block_ids == (0, 1) and view.length == 6
    assert view.k_blocks.shape == (6, 4, 2, 16)
    assert paged.paged_view(1, 1).length == 0


@pytest.mark.parametrize("index", [0, 1])
def test_unknown_sequences_are_named_with_a_hint(index):
    cache = make_caches()[index]
    cache.add_sequence("known")
    for call in (
        lambda: cache.length("nope"),
        lambda: cache.read("nope", 0),
        lambda: cache.write("nope", 0, kv(1), kv(1)),
        lambda: cache.free_sequence("nope"),
        lambda: cache.length(["unhashable"]),
    ):
        with pytest.raises(UnknownSequenceError) as info:
            call()
        assert isinstance(info.value, KeyError)
        message = str(info.value)
        assert "unknown sequence" in message and "add_sequence" in message
        assert "'known'" in message and not message.startswith('"')


@pytest.mark.parametrize("index", [0, 1])
def test_cache_refuses_bad_writes_and_changes_nothing(index):
    cache = make_caches()[index]
    cache.add_sequence(0)
    cache.write(0, 0, kv(3), kv(3))
    cache.write(0, 1, kv(3), kv(3))
    before = [cache.read(0, layer)[0].clone() for layer in (0, 1)]
    cases = [
        (lambda: cache.write(0, 2, kv(1), kv(1)), IndexError, "layers 0..1"),
        (lambda: cache.read(0, -1), IndexError, "layers 0..1"),
        (lambda: cache.read(0, 1.0), TypeError, "layer must be an int"),
        (lambda: cache.write(0, 0, kv(1, heads=3), kv(1, heads=3)), ValueError, "kv_heads=2"),
        (lambda: cache.write(0, 0, kv(1)[0], kv(1)[0]), ValueError, "new_tokens"),
        (lambda: cache.write(0, 0, kv(1), kv(2)), ValueError, "same shape"),
        (lambda: cache.write(0, 0, kv(1).numpy(), kv(1)), TypeError, "torch.from_numpy"),
        (lambda: cache.write(0, 1, kv(1), kv(1)), ValueError, "layers in order"),
        (lambda: cache.add_sequence(0), ValueError, "already exists"),
        (lambda: cache.add_sequence([0]), TypeError, "hashable"),
    ]
    for call, error, match in cases:
        with pytest.raises(error, match=match):
            call()
        assert cache.length(0) == 3 and cache.layer_length(0, 0) == 3
        assert all(torch.equal(cache.read(0, i)[0], before[i]) for i in (0, 1))


@pytest.mark.parametrize("index", [0, 1])
def test_a_pass_must_finish_before_the_next_one_starts(index):
    cache = make_caches()[index]
    cache.add_sequence(0)
    cache.write(0, 0, kv(2), kv(2))
    with pytest.raises(ValueError, match="still in progress"):
        cache.write(0, 0, kv(1), kv(1))
    assert cache.layer_length(0, 0) == 2


def test_paged_write_out_of_blocks_changes_nothing():
    pool = BlockPool(3, 4, taken=[1])
    cache = PagedKVCache(pool, 2, 2, 16)
    cache.add_sequence(0)
    cache.write(0, 0, kv(6), kv(6))
    cache.write(0, 1, kv(6), kv(6))
    state = (pool.free_block_ids(), cache.block_table(0).block_ids, cache.length(0))
    with pytest.raises(OutOfBlocksError, match="free a finished sequence or preempt"):
        cache.write(0, 0, kv(3), kv(3))
    assert (pool.free_block_ids(), cache.block_table(0).block_ids, cache.length(0)) == state
    assert cache.layer_length(0, 0) == 6
    cache.write(0, 0, kv(2), kv(2))  # what fits still works
    assert cache.layer_length(0, 0) == 8


def test_kernel_inputs_are_the_caches_own_blocks_and_tables():
    pool = BlockPool(40, 4, taken=[0, 5])
    cache = PagedKVCache(pool, 2, 2, 16)
    lengths = {"x": 10, "y": 2, "z": 14}
    for step, (seq_id, n) in enumerate(lengths.items()):
        cache.add_sequence(seq_id)
        for layer in (0, 1):
            cache.write(seq_id, layer, kv(n, seed=step), kv(n, seed=step + 10))
    order = ["z", "x", "y"]
    k_cache, v_cache, block_tables, seq_lens = cache.kernel_inputs(order, 1)
    assert k_cache.shape == v_cache.shape == (40, 4, 2, 16) and k_cache.dtype == torch.float64
    assert block_tables.dtype == torch.int32 and seq_lens.dtype == torch.int32
    assert seq_lens.tolist() == [14, 10, 2] and block_tables.shape == (3, 4)
    for row, seq_id in zip(block_tables.tolist(), order, strict=True):
        ids = cache.block_table(seq_id).block_ids
        assert tuple(row[: len(ids)]) == ids and all(x == 0 for x in row[len(ids) :])
    assert k_cache.data_ptr() == cache.layer_blocks(1)[0].data_ptr()  # no copy
    # Gathering through the exported table gives what read() gives.
    for i, seq_id in enumerate(order):
        n = int(seq_lens[i])
        pages = block_tables[i, : -(-n // 4)].long()
        k, v = cache.read(seq_id, 1)
        assert torch.equal(k_cache[pages].flatten(0, 1)[:n], k)
        assert torch.equal(v_cache[pages].flatten(0, 1)[:n], v)


def test_a_float32_cache_stores_float32_blocks():
    cache = PagedKVCache(BlockPool(4, 4), 2, 2, 16, dtype=torch.float32)
    cache.add_sequence(0)
    cache.write(0, 0, kv(3), kv(3))  # float64 in, rounded to the cache's dtype
    k_cache, _, _, _ = cache.kernel_inputs([0], 0)
    assert k_cache.dtype == torch.float32 and cache.read(0, 0)[0].dtype == torch.float32
    assert torch.equal(cache.read(0, 0)[0], kv(3).float())


def test_cache_construction_errors():
    with pytest.raises(TypeError, match="BlockPool"):
        PagedKVCache("pool", 2, 2, 16)
    with pytest.raises(ValueError, match="num_layers"):
        ContiguousKVCache(0, 2, 16)
    with pytest.raises(TypeError, match="floating"):
        ContiguousKVCache(2, 2, 16, dtype=torch.int32)
    with pytest.raises(ValueError, match="non-empty list"):
        PagedKVCache(BlockPool(2, 2), 1, 1, 2).kernel_inputs([], 0)
    with pytest.raises(TypeError, match="table_factory"):
        PagedKVCache(BlockPool(2, 2), 1, 1, 2, table_factory="ListTable")


def test_protocols_are_named_where_the_caches_live():
    """kvcourse.kv.protocols holds them; kvcourse.kv.cache names them too (code imports them from
    there), and the caches satisfy them."""
    for name in ("KVCache", "ManagedKVCache", "BlockTableLike", "UnknownSequenceError"):
        assert getattr(kvcourse.kv.cache, name) is getattr(kvcourse.kv, name)
    for cache in make_caches():
        assert isinstance(cache, KVCache) and isinstance(cache, ManagedKVCache)
    cache = make_caches()[1]
    cache.add_sequence(0)
    assert isinstance(cache.block_table(0), BlockTableLike)
