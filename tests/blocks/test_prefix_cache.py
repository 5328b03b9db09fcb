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
    with pytest.raises(ValueError, match="naming must be one of"):
        PrefixCache(BlockPool(4, 4), naming="eager")
    held = cache.allocate([1, 2, 3, 4, 5])
    before = (cache.pool.free_queue(), cache.pool.num_cached)
    with pytest.raises(ValueError, match="already holds 2"):
        cache.grow(held.block_ids, [1, 2, 3])
    with pytest.raises(TypeError, match="sequence of token ids"):
        cache.grow(held.block_ids, "abc")
    with pytest.raises(OutOfBlocksError):
        cache.grow(held.block_ids, list(range(17)))
    assert (cache.pool.free_queue(), cache.pool.num_cached) == before


# ---------------------------------------------------------------------- vLLM v1's rules


@pytest.mark.parametrize(("naming", "hit_blocks"), [("computed", 0), ("allocated", 3)])
def test_naming_at_allocation_lets_a_request_of_the_same_step_hit(naming, hit_blocks):
    """vLLM v1 names a request's full blocks when it allocates them (vllm/v1/core/
    kv_cache_manager.py, KVCacheManager.allocate_slots calls cache_blocks, v0.33.0), and its
    scheduler admits the waiting requests of one step one after another (sched/scheduler.py,
    Scheduler.schedule: get_computed_blocks, then allocate_slots), so the second hits the
    first's blocks before their KV is computed. The course names them after the prefill."""
    cache = PrefixCache(BlockPool(16, 4), naming=naming)
    first = cache.allocate(SYSTEM + [1])
    second = cache.allocate(SYSTEM + [2])  # same step: the first has not run yet
    assert second.num_cached_blocks == hit_blocks
    assert second.block_ids[:hit_blocks] == first.block_ids[:hit_blocks]


def test_v1_names_the_blocks_generated_tokens_fill_so_turn_two_hits_turn_one_answer():
    """vLLM v1 hashes a request's blocks as its output grows (vllm/v1/request.py,
    Request.append_output_token_ids -> update_block_hashes) and names each block that the
    tokens scheduled so far fill (KVCacheManager.allocate_slots -> cache_blocks, v0.33.0), so
    turn 2 of a conversation, whose prompt is turn 1's prompt and answer and a new question,
    hits the answer's blocks. The course's pages name prompt blocks only (PrefixCachingKVCache.
    register_prompt); register() with prompt and answer names them too, as nano-vllm does after
    computing them (nanovllm/engine/block_manager.py, BlockManager.hash_blocks)."""
    question, answer, follow_up = [5, 6, 7, 8, 9], [20, 21, 22, 23, 24, 25, 26, 27], [40, 41, 42]
    turn2 = question + answer + follow_up  # 16 tokens: (16 - 1) // 4 = 3 reusable blocks
    hits = {}
    for rules in ("course prompt", "course prompt+answer", "v1"):
        if rules == "v1":
            cache = PrefixCache.like_vllm_v1(16, 4)
        else:
            cache = PrefixCache(BlockPool(16, 4))
        got = cache.allocate(question)
        blocks, tokens = list(got.block_ids), list(question)
        cache.register(blocks, tokens)  # the prefill ran
        for token in answer[:-1]:  # the last sampled token is never fed back: no slot, no KV
            tokens.append(token)
            blocks += cache.grow(blocks, tokens)
        if rules == "course prompt+answer":
            cache.register(blocks, tokens)
        cache.free(blocks)
        hits[rules] = cache.match(turn2).cached_tokens
    assert hits == {"course prompt": 4, "course prompt+answer": 12, "v1": 12}


@pytest.mark.parametrize(("keep_duplicates", "hits_after"), [(False, 1), (True, 2)])
def test_a_duplicate_copy_keeps_serving_the_prefix_under_v1(keep_duplicates, hits_after):
    """A prompt of exactly two blocks: the second request may reuse only one block (the last
    prompt token is computed: KVCacheManager.get_computed_blocks caps a hit at num_tokens - 1),
    so it computes block 2 again, a duplicate. vLLM v1 names it too (vllm/v1/core/
    block_pool.py, BlockHashToBlockMap: no de-duplication, v0.33.0); when the first copy is
    evicted, the prefix is still cached. The course's pool named the first copy only."""
    pool = BlockPool(5, 4, keep_duplicates=keep_duplicates)
    cache = PrefixCache(pool, naming="allocated")
    prompt = [1, 2, 3, 4, 5, 6, 7, 8]
    a = cache.allocate(prompt)  # blocks 0, 1
    b = cache.allocate(prompt)  # hits block 0, computes block 2 again
    assert (b.num_cached_blocks, b.block_ids) == (1, (0, 2))
    assert (pool.block_hash(2) is not None) == keep_duplicates
    cache.free(a.block_ids)  # block 1 goes free, still cached
    cache.free(cache.allocate(list(range(100, 112))).block_ids)  # takes 3, 4, 1: evicts 1
    assert pool.cached_block(pool.block_hash(0)) == 0
    assert len(cache.match(prompt + [9]).block_ids) == hits_after


@pytest.mark.parametrize(("uncached_first", "hits_after"), [(False, 1), (True, 2)])
def test_v1_reuses_a_block_without_a_hash_before_evicting_a_cached_one(uncached_first, hits_after):
    """vLLM v1 (vllm/v1/core/block_pool.py, BlockPool.free_blocks, v0.33.0) puts a freed block
    that holds no hash at the head of the free queue. A short request's partial block is then
    reused first, and a cached prefix freed earlier survives; in the course's pool the partial
    block waits behind it, and the prefix's tail is evicted."""
    cache = PrefixCache(BlockPool(3, 4, uncached_first=uncached_first), naming="allocated")
    prefix = [1, 2, 3, 4, 5, 6, 7, 8]
    cache.free(cache.allocate(prefix).block_ids)  # blocks 0, 1, named; freed tail first
    cache.free(cache.allocate([50, 51, 52]).block_ids)  # block 2, no hash: where does it go?
    cache.free(cache.allocate([60, 61, 62]).block_ids)  # one more short request
    assert cache.match(prefix + [9]).cached_tokens == 4 * hits_after


# ---------------------------------------------------------------------- random programs

PROMPTS = st.lists(st.integers(0, 2), min_size=1, max_size=14)  # a tiny alphabet: many shared


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), PROMPTS, st.integers(0, 9)), min_size=1, max_size=40),
    st.sampled_from(["lru", "lfu", "v1"]),
)
def test_invariants_hold_under_random_programs(program, rules):
    """Start, decode and free requests at random, under the course's rules (LRU or LFU) or all of
    vLLM v1's (PrefixCache.like_vllm_v1: naming at allocation, duplicates, free order)."""
    size = 2
    if rules == "v1":
        cache = PrefixCache.like_vllm_v1(12, size)
    else:
        cache = PrefixCache(BlockPool(12, size), eviction=rules)
    pool = cache.pool
    holds: list[tuple[list[int], list[int]]] = []  # live requests: blocks, tokens
    truth: dict[int, tuple[int, ...]] = {}  # block -> the whole prefix it was named for

    def named(blocks, tokens):
        for i, block in enumerate(blocks):
            if (i + 1) * size <= len(tokens) and pool.block_hash(block) is not None:
                truth.setdefault(block, tuple(tokens[: (i + 1) * size]))

    for op, prompt, pick in program:
        if op == 0 or not holds:
            try:
                got = cache.allocate(prompt)
            except OutOfBlocksError:
                continue
            # A hit never returns a block whose prefix differs from the prompt's.
            for i, block in enumerate(got.block_ids[: got.num_cached_blocks]):
                assert truth[block] == tuple(prompt[: (i + 1) * size])
            assert got.cached_tokens < len(prompt)
            for block in got.block_ids[got.num_cached_blocks :]:
                truth.pop(block, None)  # fresh: whatever it held is gone
            cache.register(got.block_ids, prompt)
            named(got.block_ids, prompt)
            holds.append((list(got.block_ids), list(prompt)))
        elif op == 1:  # a decode step: one more token, named at once under v1's naming
            blocks, tokens = holds[pick % len(holds)]
            tokens.append(pick % 3)
            try:
                new = cache.grow(blocks, tokens)
            except OutOfBlocksError:
                tokens.pop()
                continue
            for block in new:
                truth.pop(block, None)
            blocks.extend(new)
            if rules != "v1":
                cache.register(blocks, tokens)  # the course names once the KV is written
            named(blocks, tokens)
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
        # A block someone holds is never evicted: each keeps the name it was given.
        for blocks, _ in holds:
            for block in blocks:
                if block in truth and pool.block_hash(block) is None:
                    raise AssertionError(f"held block {block} lost its hash")
        assert sorted(pool.free_queue()) == list(pool.free_block_ids())
        # A cached prefix whose leading blocks are cached too is found, in a block named for
        # that very prefix (with v1's duplicates, perhaps another copy than this one).
        for block, prefix in truth.items():
            if pool.block_hash(block) is not None:
                found = cache.match(list(prefix) + [0]).block_ids
                if len(found) == len(prefix) // size:
                    assert truth[found[-1]] == prefix
                    assert pool.block_hash(found[-1]) == pool.block_hash(block)
    for blocks, _ in holds:
        cache.free(blocks)
    assert pool.num_free == pool.num_blocks
