"""Tests for kvcourse.blocks.pool and kvcourse.blocks.table (§4.1): the pool, block tables, and the
invariants that hold between them after any sequence of operations."""

from __future__ import annotations

import numpy as np
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


# ---------------------------------------------------------------------------- the pool


def test_new_pool_is_all_free_and_allocates_lowest_first():
    pool = BlockPool(4, 16)
    assert (pool.num_blocks, pool.block_size, pool.num_free, pool.num_used) == (4, 16, 4, 0)
    assert [pool.allocate() for _ in range(4)] == [0, 1, 2, 3]
    assert pool.num_free == 0 and pool.num_used == 4 and pool.usage == 1.0


def test_taken_blocks_start_used_with_one_reference():
    pool = BlockPool(8, 4, taken=[0, 2, 3, 5, 6])
    assert pool.used_block_ids() == (0, 2, 3, 5, 6)
    assert pool.free_block_ids() == (1, 4, 7)
    assert [pool.ref_count(b) for b in range(8)] == [1, 0, 1, 1, 0, 1, 1, 0]
    assert pool.allocate() == 1
    assert pool.release(2) is True  # another request finishes
    assert pool.allocate() == 2  # lowest free id first
    assert "BlockPool(8 blocks x 4 slots" in repr(pool)


def test_allocate_when_empty_raises_memory_error_saying_what_to_do():
    pool = BlockPool(2, 4, taken=[0, 1])
    before = pool_state(pool)
    with pytest.raises(OutOfBlocksError) as info:
        pool.allocate()
    assert isinstance(info.value, MemoryError)
    message = str(info.value)
    assert "2 blocks" in message and "free" in message and "preempt" in message
    assert pool_state(pool) == before


def test_allocate_many_is_all_or_nothing():
    pool = BlockPool(5, 2, taken=[1, 3])
    before = pool_state(pool)
    with pytest.raises(OutOfBlocksError, match="needed 4 but only 3"):
        pool.allocate_many(4)
    assert pool_state(pool) == before
    assert pool.allocate_many(0) == []
    assert pool.allocate_many(3) == [0, 2, 4]


def test_share_and_release_count_references():
    pool = BlockPool(3, 4)
    block = pool.allocate()
    assert pool.share(block) == 2
    assert pool.share(block) == 3
    assert pool.release(block) is False
    assert pool.release(block) is False
    assert pool.ref_count(block) == 1 and not pool.is_free(block)
    assert pool.release(block) is True
    assert pool.is_free(block) and pool.ref_count(block) == 0


@pytest.mark.parametrize(
    ("action", "match"),
    [
        ("release", "double free"),
        ("share", "allocate\\(\\) it first"),
    ],
)
def test_release_or_share_of_a_free_block_is_refused_and_changes_nothing(action, match):
    pool = BlockPool(4, 4)
    pool.allocate()
    before = pool_state(pool)
    with pytest.raises(ValueError, match=match):
        getattr(pool, action)(2)
    assert pool_state(pool) == before


def test_double_free_after_release():
    pool = BlockPool(2, 4)
    block = pool.allocate()
    pool.release(block)
    before = pool_state(pool)
    with pytest.raises(ValueError, match="already free"):
        pool.release(block)
    assert pool_state(pool) == before


@pytest.mark.parametrize("method", ["release", "share", "ref_count", "is_free"])
@pytest.mark.parametrize("bad", [-1, 4, 100])
def test_out_of_range_ids_are_refused(method, bad):
    pool = BlockPool(4, 4, taken=[0, 1, 2, 3])
    before = pool_state(pool)
    with pytest.raises(ValueError, match="does not exist.*0..3"):
        getattr(pool, method)(bad)
    assert pool_state(pool) == before


@pytest.mark.parametrize("bad", [1.0, "1", None, True, [1]])
def test_non_integer_ids_are_refused(bad):
    pool = BlockPool(4, 4, taken=[1])
    before = pool_state(pool)
    for method in ("release", "share", "ref_count", "is_free"):
        with pytest.raises(TypeError, match="must be an int"):
            getattr(pool, method)(bad)
    assert pool_state(pool) == before


def test_numpy_integer_ids_are_accepted():
    pool = BlockPool(4, 4, taken=[np.int64(1)])
    assert pool.ref_count(np.int32(1)) == 1
    assert pool.release(np.int64(1)) is True


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_blocks": 0, "block_size": 4}, ValueError, "num_blocks must be positive"),
        ({"num_blocks": -3, "block_size": 4}, ValueError, "num_blocks must be positive"),
        ({"num_blocks": 4, "block_size": 0}, ValueError, "block_size must be positive"),
        ({"num_blocks": 4, "block_size": -1}, ValueError, "block_size must be positive"),
        ({"num_blocks": 4.0, "block_size": 4}, TypeError, "num_blocks must be an int"),
        ({"num_blocks": 4, "block_size": True}, TypeError, "block_size must be an int"),
        ({"num_blocks": 4, "block_size": 4, "taken": [4]}, ValueError, "does not exist"),
        ({"num_blocks": 4, "block_size": 4, "taken": [-1]}, ValueError, "does not exist"),
        ({"num_blocks": 4, "block_size": 4, "taken": [1, 1]}, ValueError, "more than once"),
        ({"num_blocks": 4, "block_size": 4, "taken": [0.5]}, TypeError, "must be an int"),
        ({"num_blocks": 4, "block_size": 4, "taken": 3}, TypeError, "list of block ids"),
    ],
)
def test_bad_construction_is_refused_clearly(kwargs, error, match):
    with pytest.raises(error, match=match):
        BlockPool(**kwargs)


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
    assert a.append(1) == [1]
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
