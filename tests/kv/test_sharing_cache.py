"""Tests for kvcourse.kv.sharing_cache (§5): fork and copy-on-write on real K and V in every layer,
the cache's block-table views, its errors and block counts, and random programs checked against a
contiguous cache where a fork is a full copy."""

from __future__ import annotations

import pytest
import torch
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kvcourse.blocks import BlockPool, BlockTable, OutOfBlocksError
from kvcourse.kv import ContiguousKVCache, SharingPagedKVCache, UnknownSequenceError
from kvcourse.model import TinyTransformer

# ---------------------------------------------------------------------------- K/V with sharing


def kv(n: int, seed: int, heads: int = 1, dim: int = 2) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, heads, dim, generator=gen, dtype=torch.float64)


def write_pass(cache, seq_id, n: int, seed: int) -> None:
    for layer in range(cache.num_layers):
        cache.write(seq_id, layer, kv(n, seed + 1000 * layer), kv(n, seed + 1000 * layer + 7))


def test_copy_on_write_copies_rows_of_every_layer():
    cache = SharingPagedKVCache(BlockPool(8, 4), num_layers=3, num_kv_heads=1, head_dim=2)
    cache.add_sequence("p")
    write_pass(cache, "p", 6, seed=1)  # block 0 full, block 1 holds 2 tokens
    cache.fork_sequence("p", "c")
    assert cache.block_table("c").ref_counts() == (2, 2)
    write_pass(cache, "c", 1, seed=2)
    assert cache.block_table("c").block_ids == (0, 2) and cache.cow_count == 1
    assert cache.copied_slots == 2
    for layer in range(3):
        k_blocks, v_blocks = cache.layer_blocks(layer)
        assert torch.equal(k_blocks[2, :2], k_blocks[1, :2])
        assert torch.equal(v_blocks[2, :2], v_blocks[1, :2])
        parent_k, _ = cache.read("p", layer)
        child_k, _ = cache.read("c", layer)
        assert torch.equal(child_k[:6], parent_k) and child_k.shape[0] == 7
    assert [e.filled for e in cache.block_table("c").entries()] == [4, 3]


def test_sharing_cache_errors_change_nothing():
    cache = SharingPagedKVCache(BlockPool(3, 4), num_layers=2, num_kv_heads=1, head_dim=2)
    cache.add_sequence("p")
    write_pass(cache, "p", 6, seed=1)
    cache.fork_sequence("p", "c")
    with pytest.raises(ValueError, match="already exists"):
        cache.fork_sequence("p", "c")
    with pytest.raises(UnknownSequenceError):
        cache.fork_sequence("x", "y")
    cache.write("p", 0, kv(1, 0), kv(1, 1))  # the parent is mid-pass now (and copied block 1)
    with pytest.raises(ValueError, match="middle of a forward pass"):
        cache.fork_sequence("p", "d")
    cache.write("p", 1, kv(1, 0), kv(1, 1))
    # c still shares nothing partial now (p moved away), so one token fits in place; two
    # tokens for c and one more block for p do not fit a 3-block pool.
    assert cache.blocks_needed({"c": 1}) == 0
    with pytest.raises(OutOfBlocksError):
        cache.check_room({"c": 3, "p": 3})
    with pytest.raises(TypeError, match="lacks"):
        SharingPagedKVCache(BlockPool(2, 2), 1, 1, 2, manager=object())


def test_blocks_needed_counts_the_last_writer_in_place():
    cache = SharingPagedKVCache(BlockPool(16, 4), num_layers=1, num_kv_heads=1, head_dim=2)
    cache.add_sequence(0)
    write_pass(cache, 0, 5, seed=0)
    for child in (1, 2):
        cache.fork_sequence(0, child)
    assert cache.blocks_needed({0: 1, 1: 1, 2: 1}) == 2  # 3 writers, count 3: 2 copies
    assert cache.blocks_needed({1: 1}) == 1
    assert cache.blocks_needed({0: 4, 1: 1}) == 1 + 2  # 2 copies, and 1 new block for 0


class CacheMirror(RuleBasedStateMachine):
    """Random add / fork / write / free on a sharing paged cache and a contiguous cache where a
    fork is a full copy: every sequence must read back the same K and V from both."""

    @initialize(block_size=st.integers(1, 5), prompt=st.integers(1, 12))
    def setup(self, block_size, prompt):
        self.pool = BlockPool(40, block_size)
        self.cache = SharingPagedKVCache(self.pool, num_layers=2, num_kv_heads=1, head_dim=2)
        self.mirror = ContiguousKVCache(2, 1, 2)
        self.next_id = 0
        self.seed = 0
        self.add()
        self.write(0, prompt)

    @rule()
    def add(self):
        if len(self.mirror.seq_ids) < 6:
            self.cache.add_sequence(self.next_id)
            self.mirror.add_sequence(self.next_id)
            self.next_id += 1

    @precondition(lambda self: self.mirror.seq_ids)
    @rule(index=st.integers(0, 10))
    def fork(self, index):
        parent = self.mirror.seq_ids[index % len(self.mirror.seq_ids)]
        if len(self.mirror.seq_ids) < 6:
            self.cache.fork_sequence(parent, self.next_id)
            self.mirror.add_sequence(self.next_id)
            for layer in range(2):
                self.mirror.write(self.next_id, layer, *self.mirror.read(parent, layer))
            self.next_id += 1

    @precondition(lambda self: self.mirror.seq_ids)
    @rule(index=st.integers(0, 10), n=st.integers(0, 7))
    def write(self, index, n):
        seq_id = self.mirror.seq_ids[index % len(self.mirror.seq_ids)]
        if self.cache.blocks_needed({seq_id: n}) > self.pool.num_free:
            return
        self.seed += 1
        for cache in (self.cache, self.mirror):
            write_pass(cache, seq_id, n, self.seed)

    @precondition(lambda self: self.mirror.seq_ids)
    @rule(index=st.integers(0, 10), n=st.integers(1, 3), parent_first=st.booleans())
    def fork_and_diverge(self, index, n, parent_first):
        """The pattern that makes copies: fork, then both sequences write."""
        parent = self.mirror.seq_ids[index % len(self.mirror.seq_ids)]
        child = self.next_id
        self.fork(index)
        if child not in self.mirror:
            return
        for seq_id in (parent, child) if parent_first else (child, parent):
            self.write(self.mirror.seq_ids.index(seq_id), n)

    @precondition(lambda self: self.mirror.seq_ids)
    @rule(index=st.integers(0, 10))
    def free(self, index):
        seq_id = self.mirror.seq_ids[index % len(self.mirror.seq_ids)]
        self.cache.free_sequence(seq_id)
        self.mirror.free_sequence(seq_id)

    @invariant()
    def same_kv(self):
        for seq_id in self.mirror.seq_ids:
            for layer in range(2):
                for got, want in zip(
                    self.cache.read(seq_id, layer), self.mirror.read(seq_id, layer), strict=True
                ):
                    assert torch.equal(got, want)

    def teardown(self):
        for seq_id in self.mirror.seq_ids:
            self.cache.free_sequence(seq_id)
        assert self.pool.num_free == self.pool.num_blocks


TestCacheMirror = CacheMirror.TestCase
TestCacheMirror.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)


def test_table_view_reads_like_a_block_table():
    cache = SharingPagedKVCache(BlockPool(8, 4), num_layers=1, num_kv_heads=1, head_dim=2)
    table = BlockTable(BlockPool(8, 4))
    cache.add_sequence("p")
    assert cache.block_table("p").entries() == [] and cache.block_table("p").num_blocks == 0
    with pytest.raises(IndexError, match="the sequence is empty"):
        cache.block_table("p").slot_of(0)
    write_pass(cache, "p", 6, seed=0)
    table.append(6)
    view = cache.block_table("p")
    assert view.block_ids == table.block_ids == (0, 1) and view.block_size == 4
    assert view.entries() == table.entries()
    assert [view.slot_of(i) for i in range(6)] == [table.slot_of(i) for i in range(6)]
    for bad in (-1, 6):
        with pytest.raises(IndexError, match=r"has 6 tokens, at positions 0\.\.5"):
            view.slot_of(bad)
    with pytest.raises(TypeError, match="position"):
        view.slot_of(1.0)
    assert repr(view) == "SharedTableView(blocks=[0, 1], num_tokens=6)"


def test_blockwise_attention_reads_shared_blocks_through_the_manager():
    model = TinyTransformer(seed=2)
    shared = SharingPagedKVCache.for_model(model, BlockPool(16, 4))
    plain = model.contiguous_cache()
    prompt = list(range(3, 13))  # 10 tokens: block 2 holds 2, so the fork shares a partial block
    for cache in (shared, plain):
        cache.add_sequence("p")
    model.forward({"p": prompt}, shared, attention="blockwise")
    model.forward({"p": prompt}, plain)
    shared.fork_sequence("p", "c")
    copy_from = {layer: plain.read("p", layer) for layer in range(model.config.num_layers)}
    plain.add_sequence("c")
    for layer, (k, v) in copy_from.items():
        plain.write("c", layer, k, v)
    batch = {"p": [20], "c": [21]}
    got = model.forward(batch, shared, attention="blockwise")
    want = model.forward(batch, plain)
    for seq_id in batch:
        assert (got[seq_id] - want[seq_id]).abs().max().item() < 1e-12
    assert shared.cow_count == 1
    k_cache, _, tables, lens = shared.kernel_inputs(["p", "c"], 0)
    assert lens.tolist() == [11, 11] and tables[0, :2].tolist() == tables[1, :2].tolist()
    assert tables[0, 2].item() != tables[1, 2].item()
