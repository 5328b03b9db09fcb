"""Tests for kvcourse.blocks.table (§4.1): block tables over a pool, and the invariants that hold
between the tables and the pool after any sequence of operations."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kvcourse.blocks import (
    BlockPool,
    BlockTable,
    BlockTableEntry,
    OutOfBlocksError,
    SharedBlockWriteError,
)


def pool_state(pool: BlockPool) -> tuple:
    """Everything observable about a pool, for 'an error changed nothing' checks."""
    counts = tuple(pool.ref_count(b) for b in range(pool.num_blocks))
    return pool.free_block_ids(), counts, pool.num_free, pool.num_used


def table_state(table: BlockTable) -> tuple:
    return table.block_ids, table.num_tokens


# ---------------------------------------------------------------------------- block tables


def test_section4_demo_allocates_on_demand_and_non_contiguously():
    """§4, the paper's Figure 6: 'Four score and seven years ago our' (7 tokens), block size 4."""
    prompt = "Four score and seven years ago our".split()
    assert len(prompt) == 7
    pool = BlockPool(num_blocks=8, block_size=4, taken=[0, 2, 3, 5, 6])
    seq = BlockTable(pool)
    assert seq.append(len(prompt)) == [1, 4]  # prefill: 2 blocks
    assert (seq.num_blocks, seq.wasted_slots) == (2, 1)
    assert seq.append(1) == []  # first decode fills block 4's last slot
    assert seq.wasted_slots == 0
    assert seq.append(1) == [7]  # the next one takes a third block
    assert seq.block_ids == (1, 4, 7)
    assert any(b - a != 1 for a, b in zip(seq.block_ids, seq.block_ids[1:], strict=False))
    assert seq.entries() == [
        BlockTableEntry(0, 1, 4),
        BlockTableEntry(1, 4, 4),
        BlockTableEntry(2, 7, 1),
    ]
    assert [seq.slot_of(p) for p in (0, 3, 4, 7, 8)] == [(1, 0), (1, 3), (4, 0), (4, 3), (7, 0)]


def test_sizes_and_waste():
    pool = BlockPool(10, 4)
    table = BlockTable(pool)
    assert (table.num_tokens, table.num_blocks, table.capacity, table.wasted_slots) == (0, 0, 0, 0)
    assert table.blocks_needed(9) == 3
    table.append(9)
    assert (len(table), table.num_blocks, table.capacity, table.wasted_slots) == (9, 3, 12, 3)
    assert table.blocks_needed(3) == 0 and table.blocks_needed(4) == 1
    assert table.append(0) == []
    assert "num_tokens=9" in repr(table)


@pytest.mark.parametrize("position", [-1, 5, 6, 100])
def test_slot_of_out_of_range_says_the_valid_range(position):
    table = BlockTable(BlockPool(4, 4))
    table.append(5)
    with pytest.raises(IndexError, match="0..4"):
        table.slot_of(position)


def test_slot_of_empty_sequence_and_non_int_position():
    table = BlockTable(BlockPool(4, 4))
    with pytest.raises(IndexError, match="empty"):
        table.slot_of(0)
    table.append(2)
    with pytest.raises(TypeError, match="position must be an int"):
        table.slot_of(1.0)


@pytest.mark.parametrize(("bad", "error"), [(-1, ValueError), (1.5, TypeError), (None, TypeError)])
def test_append_refuses_bad_counts(bad, error):
    pool = BlockPool(4, 4)
    table = BlockTable(pool)
    table.append(3)
    before = (pool_state(pool), table_state(table))
    with pytest.raises(error):
        table.append(bad)
    assert (pool_state(pool), table_state(table)) == before


def test_append_is_all_or_nothing_when_the_pool_runs_out():
    pool = BlockPool(4, 4, taken=[0])
    table = BlockTable(pool)
    table.append(5)  # blocks 1, 2; 3 slots left in block 2
    before = (pool_state(pool), table_state(table))
    with pytest.raises(OutOfBlocksError):
        table.append(3 + 4 + 4 + 1)  # needs 3 new blocks, only 1 is free
    assert (pool_state(pool), table_state(table)) == before
    assert table.append(3 + 4) == [3]  # exactly what fits still works


def test_free_returns_blocks_and_table_can_be_reused():
    pool = BlockPool(6, 2)
    a, b = BlockTable(pool), BlockTable(pool)
    a.append(3)
    b.append(4)
    pool.share(a.block_ids[0])  # somebody else holds a's first block too
    assert a.free() == [1]  # block 0 stays used, block 1 goes back
    assert pool.ref_count(0) == 1 and pool.is_free(1)
    assert (a.num_tokens, a.num_blocks, a.block_ids) == (0, 0, ())
    # The pool hands out free blocks in eviction order (LRU): blocks 4 and 5 have been free since
    # the start, block 1 only since a.free(), so a's next block is 4. (The old min-heap gave 1.)
    assert pool.free_queue() == (4, 5, 1)
    assert a.append(1) == [4]
    assert b.free() == [2, 3]


def test_free_refuses_when_blocks_were_released_behind_its_back():
    pool = BlockPool(4, 2)
    table = BlockTable(pool)
    table.append(3)
    pool.release(table.block_ids[1])
    before = (pool_state(pool), table_state(table))
    with pytest.raises(RuntimeError, match="behind the table's back"):
        table.free()
    assert (pool_state(pool), table_state(table)) == before


def test_append_into_a_shared_partly_filled_block_needs_copy_on_write():
    pool = BlockPool(4, 4)
    table = BlockTable(pool)
    table.append(6)
    pool.share(table.block_ids[-1])  # a forked sibling (§5) holds the last block
    before = (pool_state(pool), table_state(table))
    with pytest.raises(SharedBlockWriteError, match="copy-on-write"):
        table.append(1)
    assert (pool_state(pool), table_state(table)) == before


def test_append_after_a_full_shared_block_allocates_a_private_one():
    pool = BlockPool(4, 4)
    table = BlockTable(pool)
    table.append(4)
    pool.share(table.block_ids[0])
    assert table.append(1) == [1]


def test_table_needs_a_pool():
    with pytest.raises(TypeError, match="BlockPool"):
        BlockTable("pool")


# ---------------------------------------------------------------------------- sharing (§5)


def shared_table(tokens: int = 6, block_size: int = 4, blocks: int = 8):
    """A table of ``tokens`` tokens and a fork of it, over one pool."""
    table = BlockTable(BlockPool(blocks, block_size))
    table.append(tokens)
    return table, table.fork()


def test_table_fork_shares_every_block_and_copies_nothing():
    parent, child = shared_table(6)  # block 0 full, block 1 holds 2 tokens
    pool = parent.pool
    assert child.block_ids == parent.block_ids == (0, 1)
    assert child.num_tokens == 6 and child.pool is pool
    assert [pool.ref_count(b) for b in (0, 1)] == [2, 2] and pool.num_used == 2
    assert parent.last_block_shared and child.last_block_shared
    empty = BlockTable(pool).fork()
    assert empty.block_ids == () and empty.num_tokens == 0 and not empty.last_block_shared


def test_a_full_shared_last_block_needs_no_copy():
    parent, child = shared_table(8)
    assert not child.last_block_shared
    assert child.append(1) == [2]  # a new block; the shared ones stay as they are
    assert parent.block_ids == (0, 1) and child.block_ids == (0, 1, 2)


def test_unshare_last_block_swaps_in_a_private_block():
    parent, child = shared_table(6)
    pool = parent.pool
    with pytest.raises(SharedBlockWriteError, match="Copy the block first"):
        child.append(1)
    assert child.unshare_last_block() == (1, 2)
    assert child.block_ids == (0, 2) and parent.block_ids == (0, 1)
    assert [pool.ref_count(b) for b in (0, 1, 2)] == [2, 1, 1]
    assert not child.last_block_shared and not parent.last_block_shared
    assert child.append(1) == [] and child.num_tokens == 7  # written in place now
    assert parent.append(2) == []  # the last holder of block 1 writes in place too


@pytest.mark.parametrize(
    ("tokens", "fork", "words"),
    [(0, True, "the table is empty"), (8, True, "is full"), (6, False, "no other table holds")],
)
def test_unshare_last_block_refuses_when_there_is_nothing_to_copy(tokens, fork, words):
    table = BlockTable(BlockPool(8, 4))
    table.append(tokens)
    if fork:
        table.fork()
    before = (table.block_ids, table.num_tokens, table.pool.free_block_ids())
    with pytest.raises(ValueError, match=words):
        table.unshare_last_block()
    assert (table.block_ids, table.num_tokens, table.pool.free_block_ids()) == before


def test_unshare_last_block_out_of_blocks_changes_nothing():
    parent, child = shared_table(6, blocks=2)  # both blocks used, none free
    with pytest.raises(OutOfBlocksError):
        child.unshare_last_block()
    assert child.block_ids == parent.block_ids == (0, 1)
    assert [child.pool.ref_count(b) for b in (0, 1)] == [2, 2]


def test_table_refuses_blocks_released_behind_its_back():
    parent, child = shared_table(6)
    assert parent.under_referenced() == ()
    parent.pool.release(0)
    parent.pool.release(0)  # block 0 is free, yet both tables list it
    assert parent.under_referenced() == child.under_referenced() == (0,)
    with pytest.raises(RuntimeError, match="behind the table's back"):
        parent.fork()
    with pytest.raises(RuntimeError, match="behind the table's back"):
        child.free()
    assert child.block_ids == (0, 1) and parent.pool.ref_count(1) == 2


# ---------------------------------------------------------------------------- invariants under any
# sequence of operations (hypothesis, rule-based)


class PoolAndTables(RuleBasedStateMachine):
    """Random allocations, appends, frees, shares and invalid calls on one pool and many tables.

    The model of the world: ``extra`` counts the references held outside block tables (blocks
    ``taken`` at construction, plus shares this machine made); everything else must come from
    the live tables.
    """

    @initialize(
        num_blocks=st.integers(1, 12),
        block_size=st.integers(1, 5),
        data=st.data(),
    )
    def setup(self, num_blocks, block_size, data):
        taken = data.draw(st.lists(st.integers(0, num_blocks - 1), unique=True, max_size=3))
        self.pool = BlockPool(num_blocks, block_size, taken=taken)
        self.tables: list[BlockTable] = []
        self.extra = [0] * num_blocks
        for b in taken:
            self.extra[b] = 1

    def snapshot(self) -> tuple:
        return pool_state(self.pool), tuple(table_state(t) for t in self.tables)

    @rule()
    def new_table(self):
        if len(self.tables) < 6:
            self.tables.append(BlockTable(self.pool))

    @precondition(lambda self: self.tables)
    @rule(index=st.integers(0, 5), count=st.integers(0, 9))
    def append(self, index, count):
        table = self.tables[index % len(self.tables)]
        before = self.snapshot()
        needed = table.blocks_needed(count)
        last_shared = (
            count > 0 and table.wasted_slots > 0 and self.pool.ref_count(table.block_ids[-1]) > 1
        )
        if last_shared:
            with pytest.raises(SharedBlockWriteError):
                table.append(count)
            assert self.snapshot() == before
        elif needed > self.pool.num_free:
            with pytest.raises(OutOfBlocksError):
                table.append(count)
            assert self.snapshot() == before
        else:
            new = table.append(count)
            assert len(new) == needed
            assert all(self.pool.ref_count(b) == 1 for b in new)

    @precondition(lambda self: self.tables)
    @rule(index=st.integers(0, 5), keep=st.booleans())
    def free_table(self, index, keep):
        table = self.tables[index % len(self.tables)]
        held = table.block_ids
        returned = table.free()
        assert set(returned) <= set(held)
        assert all(self.pool.is_free(b) for b in returned)
        if not keep:
            self.tables.remove(table)

    @rule(block=st.integers(0, 11))
    def share_used_block(self, block):
        block %= self.pool.num_blocks
        if self.pool.is_free(block):
            before = self.snapshot()
            with pytest.raises(ValueError):
                self.pool.share(block)
            assert self.snapshot() == before
        else:
            self.pool.share(block)
            self.extra[block] += 1

    @rule(block=st.integers(0, 11))
    def release_extra_reference(self, block):
        block %= self.pool.num_blocks
        if self.extra[block] > 0:
            went_free = self.pool.release(block)
            self.extra[block] -= 1
            assert went_free == (self.pool.ref_count(block) == 0)
        elif self.pool.is_free(block):
            before = self.snapshot()
            with pytest.raises(ValueError, match="double free"):
                self.pool.release(block)
            assert self.snapshot() == before

    @rule(bad=st.one_of(st.integers(-5, -1), st.integers(12, 20), st.floats(0, 3), st.none()))
    def invalid_ids_change_nothing(self, bad):
        before = self.snapshot()
        for method in (self.pool.release, self.pool.share, self.pool.ref_count):
            with pytest.raises((ValueError, TypeError)):
                method(bad)
        assert self.snapshot() == before

    @rule()
    def allocate_and_give_back(self):
        if self.pool.num_free == 0:
            before = self.snapshot()
            with pytest.raises(OutOfBlocksError):
                self.pool.allocate()
            assert self.snapshot() == before
        else:
            block = self.pool.allocate()
            assert self.pool.ref_count(block) == 1
            assert self.pool.release(block) is True

    @invariant()
    def free_and_used_partition_the_pool(self):
        pool = self.pool
        free, used = set(pool.free_block_ids()), set(pool.used_block_ids())
        assert not free & used
        assert free | used == set(range(pool.num_blocks))
        assert pool.num_free + pool.num_used == pool.num_blocks
        assert len(pool.free_block_ids()) == pool.num_free

    @invariant()
    def ref_counts_equal_references_held(self):
        references = list(self.extra)
        for table in self.tables:
            for b in table.block_ids:
                references[b] += 1
        counts = [self.pool.ref_count(b) for b in range(self.pool.num_blocks)]
        assert counts == references
        assert all(c >= 0 for c in counts)
        assert all((c == 0) == self.pool.is_free(b) for b, c in enumerate(counts))

    @invariant()
    def every_table_has_exactly_the_blocks_it_needs(self):
        size = self.pool.block_size
        for table in self.tables:
            assert table.num_blocks == -(-table.num_tokens // size)
            assert 0 <= table.wasted_slots <= size - 1
            assert table.capacity == table.num_blocks * size
            assert sum(e.filled for e in table.entries()) == table.num_tokens


TestPoolAndTables = PoolAndTables.TestCase
TestPoolAndTables.settings = settings(max_examples=300, stateful_step_count=50, deadline=None)
