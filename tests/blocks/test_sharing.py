"""Tests for kvcourse.blocks.sharing (§5): the reference manager's fork, append with copy-on-write
and free, its errors, the a3 interface, and invariants under random programs."""

from __future__ import annotations

import pytest
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
    UnknownSequenceError,
    check_manager,
)


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


def test_check_manager_names_what_is_missing():
    class Half:
        pool = None

        def fork(self, parent_id, child_id):
            pass

    with pytest.raises(TypeError, match="lacks cow_count, add_sequence, append, free, block_ids"):
        check_manager(Half())
    with pytest.raises(ValueError, match="same BlockPool"):
        check_manager(SharedBlockManager(BlockPool(2, 2)), BlockPool(2, 2))
    manager = SharedBlockManager(BlockPool(2, 2))
    assert check_manager(manager, manager.pool) is manager


def test_blocks_released_behind_the_managers_back_are_refused():
    manager = prompt_manager(10, block_size=4)  # blocks 0, 1, 2
    manager.pool.release(1)  # block 1 is free in the pool, but "p" still lists it
    before = state(manager)
    with pytest.raises(RuntimeError, match="block 1 of sequence 'p' is free in the pool"):
        manager.fork("p", "c")
    with pytest.raises(RuntimeError, match="fewer pool references than sequence 'p' holds"):
        manager.free("p")
    assert state(manager) == before


def test_each_sequence_is_a_block_table_over_the_pool():
    manager = prompt_manager(10, block_size=4)
    manager.fork("p", "c")
    manager.append("c", 1)
    assert [(e.logical, e.physical, e.filled) for e in manager.entries("c")] == [
        (0, 0, 4),
        (1, 1, 4),
        (2, 3, 3),
    ]
    assert manager.holders(1) == ("p", "c") and manager.holders(3) == ("c",)
    assert "2 sequences" in repr(manager) and "1 copy-on-writes" in repr(manager)


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
