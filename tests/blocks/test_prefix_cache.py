"""Automatic prefix caching on the block pool (kvcourse.blocks.prefix_cache): the rules on small
hand examples, and its invariants under random programs (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcourse.blocks import BlockPool, OutOfBlocksError, PrefixCache

SYSTEM = list(range(100, 112))  # a 12-token shared prefix: 3 full blocks of 4


def test_a_second_request_reuses_the_shared_full_blocks_and_computes_the_rest():
    cache = PrefixCache(BlockPool(16, 4))
    first = cache.allocate(SYSTEM + [1, 2, 3])
    assert (first.num_cached_blocks, first.tokens_to_compute) == (0, 15)
    cache.register(first.block_ids, SYSTEM + [1, 2, 3])
    second = cache.allocate(SYSTEM + [7, 8])
    assert second.block_ids[:3] == first.block_ids[:3]  # shared, not copied
    assert (second.num_cached_blocks, second.cached_tokens, second.tokens_to_compute) == (3, 12, 2)
    assert [cache.pool.ref_count(b) for b in second.block_ids[:3]] == [2, 2, 2]
    assert (cache.queries, cache.queried_blocks, cache.hit_blocks) == (2, 3 + 3, 3)


def test_the_last_token_is_always_computed():
    cache = PrefixCache(BlockPool(16, 4))
    done = cache.allocate(SYSTEM)
    cache.register(done.block_ids, SYSTEM)
    again = cache.allocate(SYSTEM)  # 12 tokens = 3 full blocks, all cached
    assert (again.num_cached_blocks, again.tokens_to_compute) == (2, 4)
    assert again.block_ids[2] != done.block_ids[2]  # the last block is computed again, fresh


def test_only_the_leading_run_is_reused():
    cache = PrefixCache(BlockPool(16, 4))
    a = SYSTEM + [1, 2, 3, 4, 5]
    cache.register(cache.allocate(a).block_ids, a)
    b = SYSTEM[:4] + [0] + SYSTEM[5:] + [1, 2, 3, 4, 5]  # block 2 differs, so blocks 3.. do too
    hit = cache.match(b)
    assert len(hit.block_ids) == 1 and hit.cached_tokens == 4


def test_freed_blocks_stay_cached_until_evicted_least_recently_used_first():
    pool = BlockPool(8, 4)
    cache = PrefixCache(pool)
    a, b = SYSTEM + [1], [200 + i for i in range(12)] + [2]  # 13 tokens: 3 full blocks + 1
    for prompt in (a, b):
        got = cache.allocate(prompt)
        cache.register(got.block_ids, prompt)
        cache.free(got.block_ids)
    assert pool.num_free == 8 and pool.num_cached_free == 6  # all free, every full block named
    assert len(cache.match(a).block_ids) == 3  # a hit after its owner finished
    # A 9-token stranger needs 3 fresh blocks: the pool evicts from the head of its free queue,
    # a's blocks first (freed first), and each sequence's last block before its first: a's
    # unnamed partial block, then its blocks 3 and 2. Its block 1 is still a hit.
    stranger = cache.allocate([300 + i for i in range(9)])
    assert pool.num_evictions == 2
    assert len(cache.match(a).block_ids) == 1 and len(cache.match(b).block_ids) == 3
    cache.free(stranger.block_ids)


@pytest.mark.parametrize(("eviction", "a_hits", "b_hits"), [("lru", 1, 3), ("lfu", 3, 2)])
def test_lfu_keeps_the_blocks_more_requests_used(eviction, a_hits, b_hits):
    pool = BlockPool(8, 4)
    cache = PrefixCache(pool, eviction=eviction)
    a, b = SYSTEM + [1], [200 + i for i in range(12)] + [2]  # 3 full blocks + 1 each
    for prompt in (a, a, b):  # A is used twice (its second run hits), B once, last
        got = cache.allocate(prompt)
        cache.register(got.block_ids, prompt)
        cache.free(got.block_ids)
    # A 9-token stranger takes 3 fresh blocks. Both evictions first take the 2 free blocks that
    # hold nothing; then LRU evicts the least recently freed (A's), LFU the least used (B's).
    cache.free(cache.allocate([300 + i for i in range(9)]).block_ids)
    assert (len(cache.match(a).block_ids), len(cache.match(b).block_ids)) == (a_hits, b_hits)


def test_allocation_is_all_or_nothing():
    pool = BlockPool(4, 4)
    cache = PrefixCache(pool)
    held = cache.allocate(SYSTEM + [1])  # 4 blocks: the pool is full
    before = (pool.num_free, [pool.ref_count(b) for b in held.block_ids])
    with pytest.raises(OutOfBlocksError, match="fresh blocks"):
        cache.allocate([5, 6, 7])
    assert (pool.num_free, [pool.ref_count(b) for b in held.block_ids]) == before
    assert cache.queries == 1


def test_bad_arguments_are_refused():
    cache = PrefixCache(BlockPool(4, 4))
    for bad in ([], "abc", None):
        with pytest.raises(ValueError, match="non-empty sequence"):
            cache.match(bad)
    with pytest.raises(TypeError, match="BlockPool"):
        PrefixCache("pool")
    with pytest.raises(ValueError, match="eviction must be one of"):
        PrefixCache(BlockPool(4, 4), eviction="fifo")
    with pytest.raises(ValueError, match="need 2 blocks"):
        cache.register([0], [1, 2, 3, 4, 5])


# ---------------------------------------------------------------------- random programs

PROMPTS = st.lists(st.integers(0, 2), min_size=1, max_size=14)  # a tiny alphabet: many shared


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), PROMPTS, st.integers(0, 9)), min_size=1, max_size=40),
    st.sampled_from(["lru", "lfu"]),
)
def test_invariants_hold_under_random_programs(program, eviction):
    size = 2
    pool = BlockPool(12, size)
    cache = PrefixCache(pool, eviction=eviction)
    holds: list[tuple[tuple[int, ...], list[int]]] = []  # live requests: blocks, tokens
    truth: dict[int, tuple[int, ...]] = {}  # block -> the whole prefix it was computed for
    for start, prompt, pick in program:
        if start or not holds:
            try:
                got = cache.allocate(prompt)
            except OutOfBlocksError:
                pass
            else:
                # A hit never returns a block whose prefix differs from the prompt's.
                for i, block in enumerate(got.block_ids[: got.num_cached_blocks]):
                    assert truth[block] == tuple(prompt[: (i + 1) * size])
                assert got.cached_tokens < len(prompt)
                for block in got.block_ids[got.num_cached_blocks :]:
                    truth.pop(block, None)  # fresh: whatever it held is gone
                cache.register(got.block_ids, prompt)
                for i, block in enumerate(got.block_ids):
                    if (i + 1) * size <= len(prompt) and pool.block_hash(block) is not None:
                        truth.setdefault(block, tuple(prompt[: (i + 1) * size]))
                holds.append((got.block_ids, prompt))
        else:
            blocks, _ = holds.pop(pick % len(holds))
            cache.free(blocks)
        # Reference counts are the live requests holding each block; held blocks are not free.
        counts: dict[int, int] = {}
        for blocks, _ in holds:
            for block in blocks:
                counts[block] = counts.get(block, 0) + 1
        for block in range(pool.num_blocks):
            assert pool.ref_count(block) == counts.get(block, 0)
            assert pool.is_free(block) == (block not in counts)
        assert pool.num_free + pool.num_used == pool.num_blocks
        # A block someone holds is never evicted: each keeps the name it was registered with.
        for blocks, _ in holds:
            for block in blocks:
                if block in truth and pool.block_hash(block) is None:
                    raise AssertionError(f"held block {block} lost its hash")
        assert sorted(pool.free_queue()) == list(pool.free_block_ids())
        # Every cached block still holds the prefix it was named for.
        for block, prefix in truth.items():
            if pool.block_hash(block) is not None:
                assert cache.match(list(prefix) + [0]).block_ids[-1:] in ((block,), ())
    for blocks, _ in holds:
        cache.free(blocks)
    assert pool.num_free == pool.num_blocks
