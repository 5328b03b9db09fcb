"""Tests for kvcourse.blocks.sharing and kvcourse.generation (§5): fork, append with copy-on-write and free;
the Ex 4 and Ex 5 counts; invariants under random programs; and outputs that do not depend on
whether KV blocks are shared."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from kvcourse.blocks import (
    BlockPool,
    CopyOnWrite,
    ForkAppendFree,
    OutOfBlocksError,
    SharedBlockManager,
    check_manager,
)
from kvcourse.generation import (
    compare_beam_search,
    expected_cow_count,
    full_copy_tokens,
    parallel_sampling,
    parallel_sampling_sweep,
    random_parent_choices,
    sample_in_parallel,
    scripted_beam_search,
    shared_prefix,
)
from kvcourse.kv import ContiguousKVCache, SharingPagedKVCache, UnknownSequenceError
from kvcourse.model import TinyTransformer


def state(manager: SharedBlockManager) -> tuple:
    """Everything observable about a manager and its pool, for 'an error changed nothing'."""
    pool = manager.pool
    counts = tuple(pool.ref_count(b) for b in range(pool.num_blocks))
    seqs = tuple((s, manager.block_ids(s), manager.num_tokens(s)) for s in manager.seq_ids)
    return pool.free_block_ids(), counts, seqs, manager.cow_count, manager.copied_tokens


def prompt_manager(prompt_len: int = 100, block_size: int = 16, blocks: int = 32):
    manager = SharedBlockManager(BlockPool(blocks, block_size))
    manager.add_sequence("p")
    manager.append("p", prompt_len)
    return manager


# ---------------------------------------------------------------------------- fork / append / free


def test_fork_shares_every_block_without_copying():
    manager = prompt_manager(100)  # blocks 0..6, the 7th holds 4 tokens
    used = manager.pool.num_used
    manager.fork("p", "c")
    assert manager.block_ids("c") == manager.block_ids("p") == tuple(range(7))
    assert manager.num_tokens("c") == 100
    assert [manager.pool.ref_count(b) for b in range(7)] == [2] * 7
    assert manager.pool.num_used == used  # no new block
    assert manager.cow_count == 0 and manager.copied_tokens == 0
    assert manager.holders(3) == ("p", "c")


def test_append_into_shared_partial_block_copies_it_first():
    manager = prompt_manager(100)
    manager.fork("p", "c")
    manager.append("c", 1)
    assert manager.block_ids("c") == (0, 1, 2, 3, 4, 5, 7)  # block 6 copied to block 7
    assert manager.block_ids("p") == tuple(range(7))  # the parent's table is untouched
    assert manager.pool.ref_count(6) == 1 and manager.pool.ref_count(7) == 1
    assert manager.pool.ref_count(0) == 2  # full blocks stay shared
    assert manager.cow_events == (CopyOnWrite("c", 6, 7, 4),)
    assert (manager.cow_count, manager.copied_tokens) == (1, 4)
    assert manager.num_tokens("c") == 101
    manager.append("p", 1)  # the last holder of block 6 writes in place
    assert manager.block_ids("p")[-1] == 6 and manager.cow_count == 1


def test_full_shared_last_block_means_a_new_block_and_no_copy():
    manager = prompt_manager(96)  # 6 full blocks
    manager.fork("p", "c")
    manager.append("c", 1)
    manager.append("p", 1)
    assert manager.cow_count == 0
    assert manager.block_ids("c") == (0, 1, 2, 3, 4, 5, 6)
    assert manager.block_ids("p") == (0, 1, 2, 3, 4, 5, 7)
    assert manager.pool.ref_count(5) == 2


def test_append_of_many_tokens_copies_then_fills_then_allocates():
    manager = prompt_manager(10, block_size=4)  # blocks 0, 1, 2 (2 tokens in block 2)
    manager.fork("p", "c")
    manager.append("c", 6)  # copy block 2 (2 tokens), fill it, then 1 more block
    assert manager.block_ids("c") == (0, 1, 3, 4)
    assert manager.num_tokens("c") == 16
    assert manager.blocks_needed("p", 3) == 1  # block 2 is p's alone now: no copy, 1 new block
    assert manager.blocks_needed("c", 0) == 0


def test_free_drops_one_reference_and_returns_unshared_blocks():
    manager = prompt_manager(100)
    manager.fork("p", "c")
    manager.append("c", 1)  # c owns block 7 alone
    manager.free("c")
    assert manager.pool.is_free(7)
    assert [manager.pool.ref_count(b) for b in range(7)] == [1] * 7
    manager.free("p")
    assert manager.pool.num_free == manager.pool.num_blocks
    assert len(manager) == 0


def test_fork_of_empty_sequence_and_zero_token_append_are_fine():
    manager = SharedBlockManager(BlockPool(4, 4))
    manager.add_sequence(0)
    manager.fork(0, 1)
    manager.append(1, 0)
    assert manager.block_ids(1) == () and manager.pool.num_used == 0
    manager.append(1, 3)
    manager.fork(1, 2)
    manager.append(2, 0)  # nothing written, so nothing copied
    assert manager.cow_count == 0


# ---------------------------------------------------------------------------- errors change nothing


def test_invalid_calls_raise_clearly_and_change_nothing():
    manager = prompt_manager(100)
    manager.fork("p", "c")
    before = state(manager)
    cases = [
        (lambda: manager.fork("nobody", "x"), UnknownSequenceError, "no such sequence"),
        (lambda: manager.fork("p", "c"), ValueError, "already exists"),
        (lambda: manager.fork("p", ["list"]), TypeError, "hashable"),
        (lambda: manager.add_sequence("p"), ValueError, "already exists"),
        (lambda: manager.append("nobody", 1), UnknownSequenceError, "add_sequence"),
        (lambda: manager.append("c", -1), ValueError, "zero or more"),
        (lambda: manager.append("c", True), TypeError, "bool"),
        (lambda: manager.append("c", 1.5), TypeError, "int"),
        (lambda: manager.free("nobody"), UnknownSequenceError, "no such sequence"),
        (lambda: manager.block_ids("nobody"), UnknownSequenceError, "no such sequence"),
    ]
    for call, error, words in cases:
        with pytest.raises(error, match=words):
            call()
        assert state(manager) == before


def test_double_free_and_use_after_free_say_so():
    manager = prompt_manager(100)
    manager.fork("p", "c")
    manager.free("c")
    before = state(manager)
    for call in (
        lambda: manager.free("c"),
        lambda: manager.append("c", 1),
        lambda: manager.fork("c", "d"),
    ):
        with pytest.raises(UnknownSequenceError, match="freed already"):
            call()
        assert state(manager) == before
    manager.fork("p", "c")  # the id may be used again
    assert manager.block_ids("c") == manager.block_ids("p")


def test_out_of_blocks_counts_the_copy_and_changes_nothing():
    manager = prompt_manager(10, block_size=4, blocks=4)  # 3 used, 1 free
    manager.fork("p", "c")
    assert manager.blocks_needed("c", 3) == 2  # a copy of block 2, then one new block
    before = state(manager)
    with pytest.raises(OutOfBlocksError, match="1 to copy the shared last block"):
        manager.append("c", 3)
    assert state(manager) == before
    manager.append("c", 2)  # the copy alone fits
    assert manager.pool.num_free == 0 and manager.cow_count == 1


def test_manager_needs_a_pool():
    with pytest.raises(TypeError, match="BlockPool"):
        SharedBlockManager("pool")


# ---------------------------------------------------------------------------- the interface


def test_protocol_is_exactly_the_a3_interface():
    names = {n for n in vars(ForkAppendFree) if not n.startswith("_")}
    assert names == {"pool", "cow_count", "add_sequence", "fork", "append", "free", "block_ids"}
    assert isinstance(SharedBlockManager(BlockPool(2, 2)), ForkAppendFree)


class ListManager:
    """A student-style implementation written independently of the reference (plain dicts)."""

    def __init__(self, pool: BlockPool) -> None:
        self.pool = pool
        self.cow_count = 0
        self.tables: dict = {}
        self.lengths: dict = {}

    def add_sequence(self, seq_id) -> None:
        self.tables[seq_id], self.lengths[seq_id] = [], 0

    def fork(self, parent_id, child_id) -> None:
        for b in self.tables[parent_id]:
            self.pool.share(b)
        self.tables[child_id] = list(self.tables[parent_id])
        self.lengths[child_id] = self.lengths[parent_id]

    def append(self, seq_id, num_tokens: int = 1) -> None:
        table, size = self.tables[seq_id], self.pool.block_size
        for _ in range(num_tokens):
            if self.lengths[seq_id] % size == 0:
                table.append(self.pool.allocate())
            elif self.pool.ref_count(table[-1]) > 1:
                new = self.pool.allocate()
                self.pool.release(table[-1])
                table[-1] = new
                self.cow_count += 1
            self.lengths[seq_id] += 1

    def free(self, seq_id) -> None:
        for b in self.tables.pop(seq_id):
            self.pool.release(b)
        del self.lengths[seq_id]

    def block_ids(self, seq_id):
        return tuple(self.tables[seq_id])


class NoCopyManager(ListManager):
    """A wrong manager: it forgets copy-on-write and writes into the shared block."""

    def append(self, seq_id, num_tokens: int = 1) -> None:
        table, size = self.tables[seq_id], self.pool.block_size
        for _ in range(num_tokens):
            if self.lengths[seq_id] % size == 0:
                table.append(self.pool.allocate())
            self.lengths[seq_id] += 1


def test_check_manager_names_what_is_missing():
    class Half:
        pool = None

        def fork(self, parent_id, child_id):
            pass

    with pytest.raises(TypeError, match="lacks cow_count, add_sequence, append, free, block_ids"):
        check_manager(Half())
    with pytest.raises(ValueError, match="same BlockPool"):
        check_manager(ListManager(BlockPool(2, 2)), BlockPool(2, 2))


def test_drivers_accept_another_implementation():
    mine = parallel_sampling(100, 5, 40, 16, manager_factory=ListManager)
    ref = parallel_sampling(100, 5, 40, 16)
    assert mine == ref
    script = random_parent_choices(4, 32, seed=3)
    assert scripted_beam_search(script, manager_factory=ListManager) == scripted_beam_search(script)
    assert shared_prefix(manager_factory=ListManager) == shared_prefix()


# ---------------------------------------------------------------------- Ex 4: parallel sampling


@pytest.mark.parametrize("block_size", [1, 4, 16, 32])
@pytest.mark.parametrize("prompt_len", [1, 15, 17, 64, 96, 100])
def test_ex4_n_minus_one_copies_or_none_for_block_multiples(prompt_len, block_size):
    for n in range(1, 9):
        report = parallel_sampling(prompt_len, n, 5, block_size)
        partial = prompt_len % block_size
        expected = n - 1 if partial else 0
        assert report.cow_count == expected, (prompt_len, block_size, n)
        assert report.copied_tokens == expected * partial
        assert report.leaked_blocks == 0


def test_lecture_parallel_sampling_sweep():
    # prompt 100 = 6 full blocks + 4 tokens; 40 tokens each; block 16. Without sharing each
    # sample holds ceil(140/16) = 9 blocks; with sharing 6 shared blocks + 3 per sample (44 tokens).
    reports = parallel_sampling_sweep(range(2, 9))
    assert [r.num_samples for r in reports] == list(range(2, 9))
    assert [r.cow_count for r in reports] == [1, 2, 3, 4, 5, 6, 7]
    assert [r.copied_tokens for r in reports] == [4 * (n - 1) for n in range(2, 9)]
    assert [r.peak_blocks_shared for r in reports] == [6 + 3 * n for n in range(2, 9)]
    assert [r.peak_blocks_unshared for r in reports] == [9 * n for n in range(2, 9)]
    saved = [round(100 * r.memory_saved, 1) for r in reports]
    assert saved == [33.3, 44.4, 50.0, 53.3, 55.6, 57.1, 58.3]


# ---------------------------------------------------------------------------- Ex 5: beam search


def test_ex5_full_copy_scheme_copies_10176_tokens():
    assert full_copy_tokens(4, 64, 32) == 4 * (64 + sum(64 + s for s in range(1, 32))) == 10_176
    assert scripted_beam_search().full_copy_tokens == 10_176
    assert full_copy_tokens(2, 10, 0) == 0


def test_scripted_beam_counts_are_exactly_derivable():
    report = scripted_beam_search()  # k 4, prompt 64, 32 steps, block 16, seed 0
    assert report.parents == random_parent_choices(4, 32, seed=0)
    assert report.parents[0] == (0, 0, 0, 0)
    assert report.cow_count == expected_cow_count(report.parents, 64, 16) == 38
    cow_tokens = sum(
        (len(step) - len(set(step))) * ((64 + s) % 16) for s, step in enumerate(report.parents)
    )
    assert report.cow_tokens == cow_tokens == 303
    assert report.cow_block_slots == 38 * 16 == 608
    assert round(report.copy_ratio, 1) == 16.7  # lecture: 16–24× less copying
    assert (report.peak_blocks_shared, report.peak_blocks_unshared) == (10, 24)
    assert 0.39 <= report.memory_saved <= 0.68  # lecture: 39–68 %
    assert report.leaked_blocks == 0


def test_scripted_beam_extremes():
    # Every new beam picks beam 0: 3 copies on every step whose parent length 64 + s is not a
    # multiple of 16 (all but s = 0 and s = 16), and the beams share everything but a block each.
    same = [(0, 0, 0, 0)] * 32
    report = scripted_beam_search(same)
    assert report.cow_count == 3 * 30 == expected_cow_count(same)
    # Distinct parents never copy; only the prompt stays shared.
    distinct = [(0, 0, 0, 0)] + [(0, 1, 2, 3)] * 31
    report = scripted_beam_search(distinct)
    assert report.cow_count == 0
    assert report.blocks_shared[-1] == 4 + 4 * 2  # prompt + 32 own tokens per beam
    assert report.memory_saved == 0.5


def test_scripted_beam_rejects_bad_parents():
    with pytest.raises(ValueError, match="each of the 32 steps"):
        scripted_beam_search([(0, 0, 0, 0)])
    with pytest.raises(ValueError, match="step 0"):
        scripted_beam_search([(0, 1, 0, 0)] + [(0, 0, 0, 0)] * 31)
    with pytest.raises(ValueError, match="step 2"):
        scripted_beam_search([(0, 0, 0, 0)] * 2 + [(0, 0, 0, 4)] + [(0, 0, 0, 0)] * 29)


# ---------------------------------------------------------------------------- shared prefix


def test_shared_prefix_stores_the_prefix_once():
    report = shared_prefix()  # 341-token prefix (21 full blocks + 5), 8 requests of 10–30
    size = 16
    assert report.prefix_blocks == 22 and report.cow_count == 8  # the 5-token block, per request
    assert report.blocks_shared == 22 + sum(math.ceil((5 + q) / size) for q in report.suffix_lens)
    assert report.blocks_unshared == sum(math.ceil((341 + q) / size) for q in report.suffix_lens)
    assert 0.75 < report.memory_saved < 0.85
    assert report.leaked_blocks == 0
    aligned = shared_prefix(336, [20, 20, 20])
    assert aligned.cow_count == 0 and aligned.blocks_shared == 21 + 3 * 2


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


# ---------------------------------------------------------------------------- random programs


class ForkAppendFreePrograms(RuleBasedStateMachine):
    """Random fork / append / free programs (and invalid calls) on the reference manager."""

    @initialize(num_blocks=st.integers(1, 16), block_size=st.integers(1, 5))
    def setup(self, num_blocks, block_size):
        self.pool = BlockPool(num_blocks, block_size)
        self.manager = SharedBlockManager(self.pool)
        self.lengths: dict[int, int] = {}
        self.freed: set[int] = set()
        self.next_id = 0

    def live(self, index: int) -> int:
        ids = list(self.lengths)
        return ids[index % len(ids)]

    @rule()
    def add(self):
        self.manager.add_sequence(self.next_id)
        self.lengths[self.next_id] = 0
        self.next_id += 1

    @precondition(lambda self: self.lengths)
    @rule(index=st.integers(0, 20))
    def fork(self, index):
        parent = self.live(index)
        self.manager.fork(parent, self.next_id)
        self.lengths[self.next_id] = self.lengths[parent]
        self.next_id += 1

    @precondition(lambda self: self.lengths)
    @rule(index=st.integers(0, 20), n=st.integers(0, 9))
    def append(self, index, n):
        seq_id = self.live(index)
        needed = self.manager.blocks_needed(seq_id, n)
        if needed > self.pool.num_free:
            before = state(self.manager)
            with pytest.raises(OutOfBlocksError):
                self.manager.append(seq_id, n)
            assert state(self.manager) == before
            return
        free_before, cows_before = self.pool.num_free, self.manager.cow_count
        last = self.manager.block_ids(seq_id)[-1:] or (None,)
        shared_partial = (
            n > 0
            and self.lengths[seq_id] % self.pool.block_size != 0
            and self.pool.ref_count(last[0]) > 1
        )
        self.manager.append(seq_id, n)
        self.lengths[seq_id] += n
        assert self.manager.cow_count - cows_before == int(shared_partial)
        assert free_before - self.pool.num_free == needed

    @precondition(lambda self: self.lengths)
    @rule(index=st.integers(0, 20))
    def free(self, index):
        seq_id = self.live(index)
        self.manager.free(seq_id)
        del self.lengths[seq_id]
        self.freed.add(seq_id)

    @rule(n=st.integers(-3, 3), data=st.data())
    def invalid_calls_change_nothing(self, n, data):
        before = state(self.manager)
        dead = data.draw(st.sampled_from(sorted(self.freed) or [-1]))
        with pytest.raises(UnknownSequenceError):
            self.manager.free(dead)
        with pytest.raises(UnknownSequenceError):
            self.manager.fork(dead, "new")
        if self.lengths and n < 0:
            with pytest.raises(ValueError):
                self.manager.append(self.live(0), n)
        if self.lengths:
            with pytest.raises(ValueError):
                self.manager.fork(self.live(0), self.live(0))
        assert state(self.manager) == before

    @invariant()
    def ref_counts_equal_tables_listing_each_block(self):
        listing = [0] * self.pool.num_blocks
        for seq_id in self.lengths:
            for b in self.manager.block_ids(seq_id):
                listing[b] += 1
        counts = [self.pool.ref_count(b) for b in range(self.pool.num_blocks)]
        assert counts == listing
        assert all(c >= 0 for c in counts)
        assert self.pool.num_used == sum(c > 0 for c in counts)

    @invariant()
    def every_sequence_has_exactly_the_blocks_it_needs(self):
        size = self.pool.block_size
        for seq_id, length in self.lengths.items():
            assert self.manager.num_tokens(seq_id) == length
            assert len(self.manager.block_ids(seq_id)) == -(-length // size)

    def teardown(self):
        for seq_id in list(self.lengths):
            self.manager.free(seq_id)
        assert self.pool.num_free == self.pool.num_blocks  # nothing leaked


TestForkAppendFreePrograms = ForkAppendFreePrograms.TestCase
TestForkAppendFreePrograms.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None
)


# ---------------------------------------------------------------------------- same outputs


@pytest.fixture(scope="module")
def beam_comparison():
    return compare_beam_search()  # k 4, prompt 64, 32 steps, block 16, seed 0


def test_beam_search_is_identical_with_and_without_sharing(beam_comparison):
    c = beam_comparison
    assert c.identical
    assert len(c.paged.beams) == 4 and all(len(b.tokens) == 32 for b in c.paged.beams)
    scores = [b.score for b in c.paged.beams]
    assert scores == sorted(scores, reverse=True)
    assert c.full_copy.copied_tokens == 10_176  # Ex 5, from the real run
    assert c.paged.parents == c.full_copy.parents
    assert c.paged.leaked_blocks == 0


def test_beam_search_copy_counts_match_the_scripted_recount(beam_comparison):
    paged = beam_comparison.paged
    recount = scripted_beam_search(paged.parents)
    assert paged.cow_count == recount.cow_count == expected_cow_count(paged.parents)
    assert paged.copied_tokens == recount.cow_tokens  # filled slots the K/V copy really moved
    assert paged.blocks == recount.blocks_shared
    assert beam_comparison.copy_ratio == 10_176 / (16 * paged.cow_count)
    assert 10 < beam_comparison.copy_ratio < 30  # lecture 16–24×; the tiny model's own choices
    assert 0.39 <= beam_comparison.memory_saved <= 0.68
    assert beam_comparison.full_copy.peak_blocks == 4 * 6
    assert beam_comparison.token_memory_saved > 0.39


def test_a_manager_without_copy_on_write_changes_the_beams():
    wrong = compare_beam_search(steps=8, manager_factory=NoCopyManager)
    assert not wrong.identical  # siblings overwrote each other's KV in the shared block


def test_small_beam_with_another_manager_is_identical():
    model = TinyTransformer(seed=3)
    c = compare_beam_search(
        model, list(range(10)), beam_width=3, steps=12, block_size=4, manager_factory=ListManager
    )
    assert c.identical and c.paged.cow_count == expected_cow_count(c.paged.parents, 10, 4)


@pytest.mark.parametrize("prompt_len", [100, 96])
def test_parallel_sampling_is_identical_with_and_without_sharing(prompt_len):
    model = TinyTransformer(seed=1)
    prompt = [(7 * i) % 128 for i in range(prompt_len)]
    paged = sample_in_parallel(model, prompt, 4, 20, seed=5)
    full = sample_in_parallel(model, prompt, 4, 20, seed=5, scheme="full_copy")
    assert paged.samples == full.samples
    assert len(set(paged.samples)) == 4  # the samples really differ from each other
    assert paged.cow_count == (3 if prompt_len % 16 else 0)
    assert paged.copied_tokens == 3 * (prompt_len % 16)
    assert full.copied_tokens == 3 * prompt_len
    assert paged.peak_blocks < full.peak_blocks == paged.peak_blocks_unshared
    assert paged.leaked_blocks == 0


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
