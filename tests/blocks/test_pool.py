"""Tests for kvcourse.blocks.pool and kvcourse.blocks.free_queue (§4.1, §8): the pool's free queue
in eviction order, reference counts, block hashes of cached blocks, and the invariants that hold
after any program of operations. Block tables over a pool are tested in test_table.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kvcourse.blocks import BlockPool, Eviction, FreeBlockQueue, OutOfBlocksError

HASHES = ("h0", "h1", "h2", "h3", "h4", "h5")  # few, so that hypothesis finds collisions


def pool_state(pool: BlockPool) -> tuple:
    """Everything observable about a pool, for 'an error changed nothing' checks."""
    blocks = range(pool.num_blocks)
    return (
        pool.free_queue(),
        tuple(pool.ref_count(b) for b in blocks),
        pool.ref_counts(),
        tuple(pool.block_hash(b) for b in blocks),
        tuple(pool.cached_block(h) for h in HASHES),
        (pool.num_free, pool.num_used, pool.num_cached, pool.num_cached_free),
        (pool.num_evictions, pool.last_evictions),
    )


# ---------------------------------------------------------------------------- the free queue


def test_free_queue_hands_out_head_first_and_appends_at_the_tail():
    queue = FreeBlockQueue(6, [0, 1, 2, 3])
    assert list(queue) == [0, 1, 2, 3] and len(queue) == 4 and queue.head == 0
    assert queue.popleft() == 0
    queue.append(5)
    queue.append(0)
    assert list(queue) == [1, 2, 3, 5, 0]
    queue.remove(3)  # the middle
    queue.remove(1)  # the head
    queue.remove(0)  # the tail
    assert list(queue) == [2, 5] and queue.head == 2
    assert 2 in queue and 3 not in queue and 99 not in queue and "2" not in queue
    queue.check_links()
    assert "head→tail [2, 5]" in repr(queue)


def test_free_queue_refuses_bad_operations_and_changes_nothing():
    queue = FreeBlockQueue(3, [1])
    with pytest.raises(ValueError, match="already in the free queue"):
        queue.append(1)
    with pytest.raises(ValueError, match="not in the free queue"):
        queue.remove(0)
    with pytest.raises(ValueError, match="does not exist"):
        queue.append(3)
    with pytest.raises(TypeError, match="must be an int"):
        queue.remove(1.0)
    assert list(queue) == [1]
    queue.check_links()
    assert queue.popleft() == 1
    assert queue.head is None and len(queue) == 0 and list(queue) == []
    with pytest.raises(IndexError, match="empty"):
        queue.popleft()
    queue.check_links()


def test_free_queue_appendleft_puts_a_block_at_the_head():
    queue = FreeBlockQueue(5, [0, 1])
    queue.appendleft(3)
    queue.appendleft(4)
    assert list(queue) == [4, 3, 0, 1] and queue.head == 4
    with pytest.raises(ValueError, match="already in the free queue"):
        queue.appendleft(0)
    assert list(queue) == [4, 3, 0, 1]
    queue.check_links()


def test_check_links_notices_a_broken_queue():
    queue = FreeBlockQueue(4, [0, 1, 2])
    queue._next[1] = 0  # a cycle that never comes back to the sentinel
    with pytest.raises(AssertionError, match="does not match the length"):
        queue.check_links()
    queue = FreeBlockQueue(4, [0, 1, 2])
    queue._prev[2] = 0  # next links fine, prev links skip block 1
    with pytest.raises(AssertionError, match="prev links do not retrace"):
        queue.check_links()


@given(
    st.integers(1, 10),
    st.lists(
        st.tuples(st.sampled_from(["pop", "append", "appendleft", "remove"]), st.integers(0, 9))
    ),
)
def test_free_queue_behaves_like_a_list(num_blocks, program):
    """Any program of popleft / append / appendleft / remove matches a plain list, and the links
    stay whole."""
    queue, model = FreeBlockQueue(num_blocks, range(num_blocks)), list(range(num_blocks))
    for op, block in program:
        block %= num_blocks
        if op == "pop" and model:
            assert queue.popleft() == model.pop(0)
        elif op == "append" and block not in model:
            queue.append(block)
            model.append(block)
        elif op == "appendleft" and block not in model:
            queue.appendleft(block)
            model.insert(0, block)
        elif op == "remove" and block in model:
            queue.remove(block)
            model.remove(block)
        assert list(queue) == model and len(queue) == len(model)
        assert queue.head == (model[0] if model else None)
        queue.check_links()


# ---------------------------------------------------------------------------- the pool


def test_new_pool_is_all_free_and_allocates_in_ascending_id():
    pool = BlockPool(4, 16)
    assert (pool.num_blocks, pool.block_size, pool.num_free, pool.num_used) == (4, 16, 4, 0)
    assert pool.free_queue() == (0, 1, 2, 3)
    assert [pool.allocate() for _ in range(4)] == [0, 1, 2, 3]
    assert pool.num_free == 0 and pool.num_used == 4 and pool.usage == 1.0


def test_taken_blocks_start_used_with_one_reference():
    pool = BlockPool(8, 4, taken=[0, 2, 3, 5, 6])
    assert pool.used_block_ids() == (0, 2, 3, 5, 6)
    assert pool.free_queue() == (1, 4, 7)
    assert [pool.ref_count(b) for b in range(8)] == [1, 0, 1, 1, 0, 1, 1, 0]
    assert pool.ref_counts() == (1, 0, 1, 1, 0, 1, 1, 0)  # the same, at one glance
    assert pool.allocate() == 1
    assert pool.release(2) is True  # another request finishes
    # The free queue is in eviction order (LRU), not lowest id first: blocks 4 and 7 were free
    # before block 2, so they are handed out before it. (With the old min-heap this gave 2.)
    assert pool.free_queue() == (4, 7, 2)
    assert pool.allocate() == 4
    assert "BlockPool(8 blocks x 4 slots" in repr(pool)


def test_released_blocks_join_the_tail_in_the_order_they_were_released():
    pool = BlockPool(5, 1)
    assert pool.allocate_many(4) == [0, 1, 2, 3]
    for block in (2, 0, 3):
        pool.release(block)
    assert pool.free_queue() == (4, 2, 0, 3)
    assert pool.allocate_many(4) == [4, 2, 0, 3]  # the order free_queue() promised


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


@pytest.mark.parametrize("method", ["release", "share", "ref_count", "is_free", "block_hash"])
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
    for method in ("release", "share", "ref_count", "is_free", "block_hash"):
        with pytest.raises(TypeError, match="must be an int"):
            getattr(pool, method)(bad)
    with pytest.raises(TypeError, match="must be an int"):
        pool.set_block_hash(bad, "h0")
    assert pool_state(pool) == before


def test_numpy_integer_ids_are_accepted():
    pool = BlockPool(4, 4, taken=[np.int64(1)])
    assert pool.ref_count(np.int32(1)) == 1
    assert pool.set_block_hash(np.int64(1), "h0") == 1
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


# ---------------------------------------------------------------------------- cached blocks (§8)


def test_a_hashed_block_stays_cached_when_it_goes_free():
    pool = BlockPool(4, 16)
    a, b = pool.allocate_many(2)
    assert pool.block_hash(a) is None and pool.cached_block("h0") is None
    assert pool.set_block_hash(a, "h0") == a
    assert pool.set_block_hash(a, "h0") == a  # the same hash again: nothing changes
    assert (pool.block_hash(a), pool.cached_block("h0"), pool.num_cached) == ("h0", a, 1)
    assert pool.num_cached_free == 0
    pool.release(a)
    assert pool.is_free(a) and pool.block_hash(a) == "h0" and pool.cached_block("h0") == a
    assert pool.num_cached_free == 1 and pool.num_free == 3
    assert pool.free_queue() == (2, 3, a)


def test_touch_revives_a_free_cached_block_from_the_middle_of_the_queue():
    pool = BlockPool(5, 16)
    blocks = pool.allocate_many(3)
    pool.set_block_hash(blocks[1], "h1")
    for block in blocks:
        pool.release(block)
    assert pool.free_queue() == (3, 4, 0, 1, 2)
    assert pool.touch("h1") == 1  # a cache hit: block 1 keeps its KV and its hash
    assert pool.ref_count(1) == 1 and pool.block_hash(1) == "h1"
    assert pool.free_queue() == (3, 4, 0, 2)  # the others keep their order
    assert (pool.num_cached_free, pool.num_evictions) == (0, 0)
    assert pool.touch("h1") == 1  # a second request with the same prefix: one more reference
    assert pool.ref_count(1) == 2
    assert pool.release(1) is False and pool.release(1) is True
    assert pool.free_queue() == (3, 4, 0, 2, 1)


def test_allocate_evicts_a_cached_block_when_it_reaches_it():
    pool = BlockPool(3, 16)
    a, b, c = pool.allocate_many(3)
    pool.set_block_hash(a, "h0")
    pool.set_block_hash(c, "h2")
    for block in (a, b, c):
        pool.release(block)
    assert pool.allocate() == a  # the least recently freed: its prefix is evicted
    assert pool.last_evictions == (Eviction(a, "h0"),) and pool.num_evictions == 1
    assert pool.block_hash(a) is None and pool.cached_block("h0") is None
    assert pool.ref_count(a) == 1 and pool.num_cached_free == 1
    assert pool.allocate() == b  # held no hash: nothing evicted
    assert pool.last_evictions == () and pool.num_evictions == 1
    pool.release(a)
    assert pool.allocate_many(2) == [c, a]
    assert pool.last_evictions == (Eviction(c, "h2"),) and pool.num_evictions == 2
    assert (pool.num_cached, pool.num_cached_free) == (0, 0)


def test_a_hash_another_block_holds_is_not_taken_twice():
    pool = BlockPool(3, 16)
    first, second = pool.allocate_many(2)  # two requests computed the same prefix
    assert pool.set_block_hash(first, "h0") == first
    before = pool_state(pool)
    assert pool.set_block_hash(second, "h0") == first  # the earlier block keeps caching it
    assert pool.block_hash(second) is None and pool_state(pool) == before
    pool.release(first)
    assert pool.set_block_hash(second, "h0") == first  # also while the holder is free but cached


def test_cache_errors_are_clear_and_change_nothing():
    pool = BlockPool(3, 16)
    block = pool.allocate()
    pool.set_block_hash(block, "h0")
    pool.allocate()
    before = pool_state(pool)
    with pytest.raises(ValueError, match="already holds hash 'h0'"):
        pool.set_block_hash(block, "h1")
    with pytest.raises(ValueError, match="cannot set the hash of block 2: it is free"):
        pool.set_block_hash(2, "h1")
    with pytest.raises(ValueError, match="no block holds hash 'h3'"):
        pool.touch("h3")
    for call in (pool.touch, pool.cached_block, lambda h: pool.set_block_hash(block, h)):
        with pytest.raises(TypeError, match="must not be None"):
            call(None)
        with pytest.raises(TypeError, match="must be hashable"):
            call(["a", "list"])
    pool.allocate()
    before = pool_state(pool)
    with pytest.raises(OutOfBlocksError):
        pool.allocate_many(1)
    assert pool_state(pool) == before


def test_allocate_many_reports_every_eviction_in_order():
    pool = BlockPool(4, 16)
    blocks = pool.allocate_many(4)
    for block, name in zip(blocks, ("h0", "h1", "h2", "h3"), strict=True):
        pool.set_block_hash(block, name)
    for block in reversed(blocks):
        pool.release(block)
    assert pool.free_queue() == (3, 2, 1, 0)
    assert pool.allocate_many(3) == [3, 2, 1]
    assert pool.last_evictions == (Eviction(3, "h3"), Eviction(2, "h2"), Eviction(1, "h1"))
    assert pool.cached_block("h0") == 0 and pool.num_cached_free == 1


# ---------------------------------------------------------------------------- invariants under any
# program of operations (hypothesis, rule-based)


class PoolMachine(RuleBasedStateMachine):
    """Random allocate / allocate_many / share / release / set hash / touch, and invalid calls, on
    one pool, against a model: a list for the free queue (head first), a count per block and a
    dict of hashes."""

    @initialize(
        num_blocks=st.integers(1, 10),
        uncached_first=st.booleans(),
        keep_duplicates=st.booleans(),
        data=st.data(),
    )
    def setup(self, num_blocks, uncached_first, keep_duplicates, data):
        taken = data.draw(st.lists(st.integers(0, num_blocks - 1), unique=True, max_size=3))
        self.pool = BlockPool(
            num_blocks,
            4,
            taken=taken,
            uncached_first=uncached_first,
            keep_duplicates=keep_duplicates,
        )
        self.uncached_first, self.keep_duplicates = uncached_first, keep_duplicates
        self.refs = [1 if b in taken else 0 for b in range(num_blocks)]
        self.queue = [b for b in range(num_blocks) if b not in taken]
        self.hashes: dict[int, str] = {}  # block -> hash
        self.named: dict[int, int] = {}  # block -> when it was named (the earliest copy wins)
        self.clock = 0
        self.evictions = 0

    def holder(self, name: str) -> int | None:
        """The block a lookup of ``name`` finds in the model: the earliest named holder."""
        holders = [b for b, h in self.hashes.items() if h == name]
        return min(holders, key=self.named.__getitem__) if holders else None

    def freed(self, block: int) -> None:
        """Queue a block whose last reference went, as the pool's rule says."""
        if self.uncached_first and block not in self.hashes:
            self.queue.insert(0, block)
        else:
            self.queue.append(block)

    def check_unchanged(self, call, error) -> None:
        before = pool_state(self.pool)
        with pytest.raises(error):
            call()
        assert pool_state(self.pool) == before

    def take(self) -> int:
        """What the model expects allocate to do: the head block, evicted if it held a hash."""
        block = self.queue.pop(0)
        assert self.refs[block] == 0  # never hand out a referenced block
        self.refs[block] = 1
        if self.hashes.pop(block, None) is not None:
            del self.named[block]
            self.evictions += 1
        return block

    @rule()
    def allocate(self):
        if not self.queue:
            self.check_unchanged(self.pool.allocate, OutOfBlocksError)
            return
        hash_before = self.hashes.get(self.queue[0])
        block = self.take()
        assert self.pool.allocate() == block
        expected = () if hash_before is None else (Eviction(block, hash_before),)
        assert self.pool.last_evictions == expected

    @rule(count=st.integers(0, 6))
    def allocate_many(self, count):
        if count > len(self.queue):
            self.check_unchanged(lambda: self.pool.allocate_many(count), OutOfBlocksError)
            return
        expected = [self.take() for _ in range(count)]
        assert self.pool.allocate_many(count) == expected

    @rule(block=st.integers(0, 9))
    def share(self, block):
        block %= self.pool.num_blocks
        if self.refs[block] == 0:
            self.check_unchanged(lambda: self.pool.share(block), ValueError)
            return
        self.refs[block] += 1
        assert self.pool.share(block) == self.refs[block]

    @rule(block=st.integers(0, 9))
    def release(self, block):
        block %= self.pool.num_blocks
        if self.refs[block] == 0:
            self.check_unchanged(lambda: self.pool.release(block), ValueError)
            return
        self.refs[block] -= 1
        if self.refs[block] == 0:
            self.freed(block)
        assert self.pool.release(block) == (self.refs[block] == 0)

    @rule(blocks=st.lists(st.integers(0, 9), max_size=5))
    def release_many(self, blocks):
        blocks = [b % self.pool.num_blocks for b in blocks]
        if any(blocks.count(b) > self.refs[b] for b in blocks):
            self.check_unchanged(lambda: self.pool.release_many(blocks), ValueError)
            return
        freed, first = [], []
        for block in blocks:
            self.refs[block] -= 1
            if self.refs[block] == 0:
                freed.append(block)
                if self.uncached_first and block not in self.hashes:
                    first.append(block)
                else:
                    self.queue.append(block)
        self.queue[:0] = first  # as a group, the first given at the head
        assert self.pool.release_many(blocks) == freed

    @rule(block=st.integers(0, 9), name=st.sampled_from(HASHES))
    def set_hash(self, block, name):
        block %= self.pool.num_blocks
        own = self.hashes.get(block)
        if self.refs[block] == 0 or own not in (None, name):
            self.check_unchanged(lambda: self.pool.set_block_hash(block, name), ValueError)
            return
        holder = self.holder(name)
        if holder is None or (self.keep_duplicates and own is None):
            self.hashes[block] = name
            self.named[block] = self.clock
            self.clock += 1
            holder = block
        elif own == name:
            holder = block if self.keep_duplicates else holder
        assert self.pool.set_block_hash(block, name) == holder

    @rule(name=st.sampled_from(HASHES))
    def touch(self, name):
        holder = self.holder(name)
        if holder is None:
            self.check_unchanged(lambda: self.pool.touch(name), ValueError)
            return
        if self.refs[holder] == 0:
            self.queue.remove(holder)
        self.refs[holder] += 1
        assert self.pool.touch(name) == holder

    @rule(bad=st.one_of(st.integers(-5, -1), st.integers(10, 20), st.floats(0, 3), st.none()))
    def invalid_ids_change_nothing(self, bad):
        for method in (self.pool.release, self.pool.share, self.pool.ref_count):
            self.check_unchanged(lambda m=method: m(bad), (ValueError, TypeError))
        self.check_unchanged(lambda: self.pool.set_block_hash(bad, "h0"), (ValueError, TypeError))

    @invariant()
    def pool_matches_the_model(self):
        pool = self.pool
        assert pool.free_queue() == tuple(self.queue)
        assert [pool.ref_count(b) for b in range(pool.num_blocks)] == self.refs
        assert {b: pool.block_hash(b) for b in range(pool.num_blocks)} == {
            b: self.hashes.get(b) for b in range(pool.num_blocks)
        }
        assert pool.num_evictions == self.evictions

    @invariant()
    def free_queue_is_exactly_the_unreferenced_blocks(self):
        pool = self.pool
        free = pool.free_block_ids()
        assert len(set(free)) == len(free)  # no duplicates
        assert set(free) == {b for b in range(pool.num_blocks) if pool.ref_count(b) == 0}
        assert all(pool.is_free(b) == (b in free) for b in range(pool.num_blocks))
        assert set(pool.used_block_ids()) == set(range(pool.num_blocks)) - set(free)
        assert pool.num_free + pool.num_used == pool.num_blocks == len(free) + pool.num_used
        pool._free.check_links()  # the links themselves: next and prev agree, none dangle

    @invariant()
    def hash_lookup_is_exact(self):
        pool = self.pool
        for name in HASHES:
            block = pool.cached_block(name)
            assert block is None or pool.block_hash(block) == name
            assert block == self.holder(name)
        hashed = [b for b in range(pool.num_blocks) if pool.block_hash(b) is not None]
        if not self.keep_duplicates:  # one block per hash
            assert all(pool.cached_block(pool.block_hash(b)) == b for b in hashed)
        assert pool.num_cached == len(hashed)
        assert pool.num_cached_free == sum(pool.is_free(b) for b in hashed)


TestPoolMachine = PoolMachine.TestCase
TestPoolMachine.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)


def test_free_block_ids_say_which_blocks_are_free_in_ascending_order():
    pool = BlockPool(6, 2)
    blocks = pool.allocate_many(6)
    for block in reversed(blocks[1:4]):
        pool.release(block)
    assert pool.free_queue() == (3, 2, 1)  # eviction order: least recently freed first
    assert pool.free_block_ids() == (1, 2, 3)  # the set of free blocks, sorted


def test_allocate_block_takes_a_chosen_free_block_and_evicts_its_hash():
    pool = BlockPool(4, 2)
    a, b = pool.allocate(), pool.allocate()
    pool.set_block_hash(a, "h")
    pool.release(a)
    pool.release(b)
    assert pool.allocate_block(a) == a and pool.ref_count(a) == 1
    assert pool.cached_block("h") is None and pool.num_evictions == 1
    assert [e.block_hash for e in pool.last_evictions] == ["h"]
    assert a not in pool.free_queue() and pool.num_free == 3
    with pytest.raises(ValueError, match="in use"):
        pool.allocate_block(a)


# ---------------------------------------------------------------------------- vLLM v1's options


def test_release_many_frees_a_sequence_tail_first_and_is_all_or_nothing():
    """Mirrors vLLM v1's KVCacheManager.free (vllm/v1/core/single_type_kv_cache_manager.py,
    SingleTypeKVCacheManager.free, v0.33.0): a request's blocks are freed last block first, so
    its tail is evicted first."""
    pool = BlockPool(6, 4)
    blocks = pool.allocate_many(4)  # 0, 1, 2, 3
    pool.share(1)
    assert pool.release_many(reversed(blocks)) == [3, 2, 0]  # block 1 is still shared
    assert pool.free_queue() == (4, 5, 3, 2, 0)
    before = pool_state(pool)
    with pytest.raises(ValueError, match="cannot release block 1 2 times"):
        pool.release_many([1, 1])
    with pytest.raises(ValueError, match="double free"):
        pool.release_many([1, 3])
    with pytest.raises(TypeError, match="list of block ids"):
        pool.release_many(7)
    assert pool_state(pool) == before


def test_uncached_first_reuses_blocks_without_a_hash_before_evicting_cached_ones():
    """vLLM v1's free order (vllm/v1/core/block_pool.py, BlockPool.free_blocks, v0.33.0): a
    freed block without a hash is prepended to the free queue (prepend_n, "LIFO reuse of
    non-cached blocks"), a cached one appended (LRU). The course's pool appends both, so a block
    that holds nothing can wait behind a cached prefix that is evicted first."""
    for uncached_first, queue_after, evicted in [
        (False, (2, 0, 1), [Eviction(0, "h0")]),
        (True, (1, 2, 0), []),
    ]:
        pool = BlockPool(3, 4, uncached_first=uncached_first)
        a, b = pool.allocate(), pool.allocate()  # 0: a finished prefix, named; 1: holds nothing
        pool.set_block_hash(a, "h0")
        pool.release(a)
        pool.release(b)
        assert pool.free_queue() == queue_after
        pool.allocate_many(2)
        assert list(pool.last_evictions) == evicted
        assert pool.cached_block("h0") == (None if evicted else 0)


def test_uncached_first_prepends_a_group_in_the_order_given():
    """v1 prepends the freed hash-less blocks as one group (FreeKVCacheBlockQueue.prepend_n):
    the first block given, the request's last, is handed out first."""
    pool = BlockPool(5, 4, uncached_first=True)
    blocks = pool.allocate_many(3)  # 0, 1, 2; none named
    pool.release_many(reversed(blocks))
    assert pool.free_queue() == (2, 1, 0, 3, 4)
    pool = BlockPool(5, 4, uncached_first=True)
    for block in reversed(pool.allocate_many(3)):  # one at a time: each goes to the head
        pool.release(block)
    assert pool.free_queue() == (0, 1, 2, 3, 4)


def test_keep_duplicates_keeps_a_prefix_cached_while_any_copy_is():
    """vLLM v1 does not de-duplicate cached blocks (vllm/v1/core/block_pool.py,
    BlockHashToBlockMap, v0.33.0): a second block computing a prefix is named too, a lookup
    returns the earliest (get_one_block), and evicting one copy keeps the other (pop(key,
    block_id)). The course's pool names only the first, so evicting it loses the prefix."""
    for keep, found_after in [(False, None), (True, 1)]:
        pool = BlockPool(3, 4, keep_duplicates=keep)
        first, second = pool.allocate(), pool.allocate()  # 0 and 1 compute the same prefix
        assert pool.set_block_hash(first, "p") == first
        assert pool.set_block_hash(second, "p") == (second if keep else first)
        assert pool.num_cached == (2 if keep else 1)
        assert pool.cached_block("p") == first  # the earliest named
        pool.release(first)
        pool.allocate_many(2)  # block 2, then block 0: its copy of "p" is evicted
        assert pool.last_evictions == (Eviction(first, "p"),)
        assert pool.cached_block("p") == found_after
