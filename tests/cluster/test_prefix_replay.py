"""Tests for kvcourse.cluster.prefix_replay (§8.4): hand traces with their eviction orders written
out, leading-run counting, the infinite cache, requests longer than the cache, a brute-force
reference replay on random traces, LRU's capacity monotonicity, and argument errors."""

from __future__ import annotations

import dataclasses
import doctest
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvcourse.cluster.prefix_replay as prefix_replay
from kvcourse.blocks import chained_block_hashes
from kvcourse.cluster import EVICTIONS, ReplayResult, hit_rate_curve, replay_prefix_cache

# ---------------------------------------------------------------------------- hand traces

HAND_TRACE = [["A", "B"], ["A", "C"], ["D"], ["A", "B"], ["D", "E"], ["A", "B"]]


def test_lru_hand_trace_head_first():
    """Head first (tail_first=False), assignment a5's order: of a request's blocks the first is
    the least recently used."""
    # capacity 3; the cache listed least recently used first; each request referenced in order.
    # r0 A B: miss, miss                     -> A B
    # r1 A C: A hits; C inserted             -> B A C
    # r2 D:   miss; D inserted, B evicted    -> A C D          (evictions: B)
    # r3 A B: A hits; B inserted, C evicted  -> D A B          (C)
    # r4 D E: D hits; E inserted, A evicted  -> B D E          (A)
    # r5 A B: A misses, so B (cached) is no hit; A inserted, B touched, D evicted -> E A B  (D)
    result = replay_prefix_cache(HAND_TRACE, 3, "lru", tail_first=False)
    assert result.hits == (0, 1, 0, 1, 1, 0)
    assert (result.hit_blocks, result.total_blocks, result.evictions) == (3, 11, 4)
    assert result.hit_rate == pytest.approx(3 / 11)
    assert result.request_hit_rate == pytest.approx((0 + 1 / 2 + 0 + 1 / 2 + 1 / 2 + 0) / 6)
    assert result.requests_with_hit == 3 and result.num_requests == 6 and result.miss_blocks == 8
    assert (result.eviction, result.capacity, result.tail_first) == ("lru", 3, False)


def test_lru_hand_trace_tail_first_is_the_default():
    """vLLM v1 frees a request's blocks last block first (release v0.33.0: vllm/v1/core/
    single_type_kv_cache_manager.py, SingleTypeKVCacheManager.free), so of blocks used together
    the tail is evicted first: the replay's default, tail_first=True."""
    # capacity 3; the cache listed least recently used first; each request referenced tail first.
    # r0 A B: misses                              -> B A
    # r1 A C: A hits; C, then A, referenced       -> B C A
    # r2 D:   D inserted, B evicted               -> C A D          (evictions: B)
    # r3 A B: A hits; B, then A; C evicted        -> D B A          (C)
    # r4 D E: D hits; E, then D; B evicted        -> A E D          (B)
    # r5 A B: A hits, B does not; B, then A; E evicted -> D B A    (E)
    result = replay_prefix_cache(HAND_TRACE, 3, "lru")
    assert result.hits == (0, 1, 0, 1, 1, 1)
    assert (result.hit_blocks, result.evictions, result.tail_first) == (4, 4, True)
    assert replay_prefix_cache(HAND_TRACE, 3, "lru", tail_first=True) == result
    assert all(r.tail_first for r in hit_rate_curve(HAND_TRACE, [3, None])["lru"])


def test_tail_first_keeps_a_shared_prefix_that_head_first_loses():
    """Two requests share blocks 1, 2; a third pushes two blocks out. Head first, the shared
    prefix is the least recently used and goes; tail first (vLLM v1's order), the tails 3 and 4
    go, and the fourth request hits the prefix."""
    trace = [[1, 2, 3], [1, 2, 4], [5, 6], [1, 2, 3]]
    for eviction in EVICTIONS:
        head = replay_prefix_cache(trace, 4, eviction, tail_first=False)
        tail = replay_prefix_cache(trace, 4, eviction)
        assert tail.hits == (0, 2, 0, 2)
        assert head.hits == ((0, 2, 0, 0) if eviction == "lru" else (0, 2, 0, 2))


def test_lfu_hand_trace():
    # capacity 3; each block with its count, the eviction candidates ordered (count, last use).
    # r0 A B: misses                          -> A1 B1
    # r1 A C: A hits (A2); C inserted         -> B1 C1 A2
    # r2 D:   D inserted; evict B (1, oldest) -> C1 D1 A2          (evictions: B)
    # r3 A B: A hits (A3); B back with count 1 (its old count is gone); evict C -> D1 B1 A3  (C)
    # r4 D E: D hits (D2); E inserted; evict B (the only count 1 outside the request) -> (B)
    #                                         -> E1 D2 A3
    # r5 A B: A hits (A4); B inserted; evict E -> B1 D2 A4        (E)
    result = replay_prefix_cache(HAND_TRACE, 3, "lfu")
    assert result.hits == (0, 1, 0, 1, 1, 1)
    assert (result.hit_blocks, result.evictions, result.requests_with_hit) == (4, 4, 4)


def test_an_lfu_count_does_not_survive_eviction():
    trace = [["A"], ["A"], ["A"], ["B", "C"], ["A"], ["C"], ["D"], ["C"]]
    # capacity 2. r0-r2: A3. r3 B C: A is evicted (a request never evicts its own blocks) -> B1 C1
    # r4 A: back with count 1, not 4; evict B (count 1, older than C) -> C1 A1
    # r5 C: hit -> C2 A1.  r6 D: evict A (count 1) -> C2 D1.  r7 C: hit.
    # Had A kept its old count (4), r6 would evict C and r7 would miss. (Head first: B is
    # referenced before C, so B is the older at r4; tail first, C would go instead.)
    result = replay_prefix_cache(trace, 2, "lfu", tail_first=False)
    assert result.hits == (0, 1, 1, 0, 0, 1, 0, 1) and result.evictions == 3


def test_lru_beats_lfu_when_reuse_is_recent():
    """§8.4: LFU keeps a block that was hot long ago; LRU keeps what the current sessions use."""
    trace = [["X"], ["X"], ["X"], ["P"], ["Q"], ["P"], ["Q"], ["P"], ["Q"]]
    # LRU, capacity 2: X X X | P -> X P | Q evicts X -> P Q | then P, Q hit every time.
    # LFU, capacity 2: X reaches count 3 and stays; P and Q take turns in the other slot,
    # each evicting the other (count 1), so neither ever hits.
    lru = replay_prefix_cache(trace, 2, "lru")
    lfu = replay_prefix_cache(trace, 2, "lfu")
    assert lru.hits == (0, 1, 1, 0, 0, 1, 1, 1, 1) and lru.evictions == 1
    assert lfu.hits == (0, 1, 1, 0, 0, 0, 0, 0, 0) and lfu.evictions == 5


@pytest.mark.parametrize("eviction", EVICTIONS)
def test_only_the_leading_run_counts(eviction):
    trace = [[1, 2, 3], [9, 2, 3], [1, 8, 3], [1, 2, 3, 4]]
    # r1: 9 misses, so the cached 2 and 3 are no hits; r2: 1 hits, 8 ends the run; r3: 1 2 3 hit.
    for capacity in (None, 100):
        assert replay_prefix_cache(trace, capacity, eviction).hits == (0, 0, 1, 3)


@pytest.mark.parametrize("eviction", EVICTIONS)
def test_a_request_longer_than_the_cache_keeps_its_first_blocks(eviction):
    trace = [[3], [1, 2, 3, 4], [1, 2, 3, 4], [3], [4]]
    # capacity 2. r0: 3 cached. r1: keeps 1 2; 3 (its own later block, cached) is evicted, 4 never
    # enters. r2: 1 2 hit, 3 misses. r3: 3 misses again (evicting 1); r4: 4 misses.
    result = replay_prefix_cache(trace, 2, eviction)
    assert result.hits == (0, 0, 2, 0, 0)
    assert result.evictions == 1 + 1 + 1
    assert replay_prefix_cache([[1, 2, 3, 4], [1, 2, 3, 4]], 1, eviction).hits == (0, 1)


def test_an_infinite_cache_hits_every_block_seen_before_in_a_leading_run():
    trace = [[1, 2], [1, 2, 3], [4], [1, 2, 3, 5], [4, 6], []]
    for capacity in (None, math.inf):
        for eviction in EVICTIONS:
            result = replay_prefix_cache(trace, capacity, eviction)
            assert result.hits == (0, 2, 0, 3, 1, 0) and result.evictions == 0
            assert result.capacity is None and result.total_blocks == 12
    # the empty request counts as a request but not in the request-weighted mean
    assert result.num_requests == 6 and result.request_hit_rate == pytest.approx(
        (0 + 2 / 3 + 0 + 3 / 4 + 1 / 2) / 5
    )


def test_empty_trace_and_block_ids_of_any_hashable_kind():
    empty = replay_prefix_cache([], 10)
    assert (empty.num_requests, empty.total_blocks, empty.hit_rate, empty.hits) == (0, 0, 0.0, ())
    system = list(range(12))  # chained block hashes as ids: shared system prompt of 3 blocks
    trace = [chained_block_hashes(system + list(range(t, t + 9)), 4) for t in (100, 200, 300)]
    assert [len(r) for r in trace] == [5, 5, 5]
    assert replay_prefix_cache(trace, 8).hits == (0, 3, 3)
    arrays = [np.array(r) for r in ([1, 2], [1, 2, 3])]
    assert replay_prefix_cache(arrays, 4, "lfu").hits == (0, 2)
    assert replay_prefix_cache(((1, 2), range(1, 4)), 4).hits == (0, 2)


def test_result_is_frozen_and_the_curve_matches_single_replays():
    trace = [[1, 2, 3], [1, 2, 4], [5, 6], [1, 2, 3], [5, 6, 7]]
    curve = hit_rate_curve(trace, [1, 2, 4, None])
    assert list(curve) == ["lru", "lfu"]
    for eviction, results in curve.items():
        assert [r.capacity for r in results] == [1, 2, 4, None]
        assert results == [replay_prefix_cache(trace, c, eviction) for c in (1, 2, 4, None)]
    assert list(hit_rate_curve(trace, (3,), evictions=["lfu"])) == ["lfu"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        curve["lru"][0].hit_rate = 1.0  # type: ignore[misc]
    assert isinstance(curve["lru"][0], ReplayResult)


def test_docstring_examples():
    result = doctest.testmod(prefix_replay)
    assert result.attempted >= 4 and result.failed == 0


# ---------------------------------------------------------------------------- references


def reference_replay(trace, capacity, eviction, tail_first=True):
    """The rules done the slow, obvious way: a dict of (count, last use), victims found by a scan
    over the cache when each missing block is inserted (not all at once, as the fast one does);
    ``tail_first`` references each request's blocks last first."""
    cache = {}  # block -> [count, last use]
    clock, hits, evictions = 0, [], 0
    for blocks in trace:
        blocks = list(blocks)
        hit = 0
        while hit < len(blocks) and blocks[hit] in cache:
            hit += 1
        hits.append(hit)
        kept = blocks if capacity is None else blocks[:capacity]
        for block in reversed(kept) if tail_first else kept:
            clock += 1
            if block in cache:
                cache[block][0] += 1
                cache[block][1] = clock
                continue
            if capacity is not None and len(cache) >= capacity:
                candidates = [b for b in cache if b not in kept]
                if eviction == "lru":
                    victim = min(candidates, key=lambda b: cache[b][1])
                else:
                    victim = min(candidates, key=lambda b: tuple(cache[b]))
                del cache[victim]
                evictions += 1
            cache[block] = [1, clock]
        assert capacity is None or len(cache) <= capacity
    return tuple(hits), evictions


def plain_block_lru(trace, capacity):
    """LRU over the trace's blocks one at a time, counting each request's leading run of hits:
    what the module says its head-first LRU replay equals when no request is longer than the
    cache."""
    cache, hits = [], []
    for blocks in trace:
        run, hit = True, 0
        for block in blocks:
            if block in cache:
                cache.remove(block)
                hit += run
            else:
                run = False
                if len(cache) == capacity:
                    cache.pop(0)
            cache.append(block)
        hits.append(hit)
    return tuple(hits)


@st.composite
def traces(draw, max_requests=30, ids=14, max_len=8):
    """Random traces with prefix sharing: a request is a fresh list of distinct ids, or an
    earlier request's prefix extended with a few ids not in it."""
    trace = []
    for _ in range(draw(st.integers(0, max_requests))):
        if trace and draw(st.booleans()):
            parent = draw(st.sampled_from(trace))
            prefix = parent[: draw(st.integers(0, len(parent)))]
            tail = draw(st.lists(st.integers(0, ids), unique=True, max_size=4))
            request = prefix + [b for b in tail if b not in prefix]
        else:
            request = draw(st.lists(st.integers(0, ids), unique=True, max_size=max_len))
        trace.append(request)
    return trace


@settings(max_examples=300, deadline=None)
@given(trace=traces(), capacity=st.one_of(st.none(), st.integers(1, 12)))
@pytest.mark.parametrize("tail_first", [False, True])
@pytest.mark.parametrize("eviction", EVICTIONS)
def test_fast_replay_agrees_with_the_reference(eviction, tail_first, trace, capacity):
    result = replay_prefix_cache(trace, capacity, eviction, tail_first=tail_first)
    expected = reference_replay(trace, capacity, eviction, tail_first)
    assert (result.hits, result.evictions) == expected
    assert result.hit_blocks == sum(result.hits) and result.total_blocks == sum(map(len, trace))
    seen, expected = set(), []  # the infinite cache: blocks seen before, in a leading run
    for blocks in trace:
        run = 0
        while run < len(blocks) and blocks[run] in seen:
            run += 1
        expected.append(run)
        seen.update(blocks)
    infinite = replay_prefix_cache(trace, None, eviction, tail_first=tail_first).hits
    assert infinite == tuple(expected)
    assert all(h <= i for h, i in zip(result.hits, infinite, strict=True))


@pytest.mark.parametrize("eviction", EVICTIONS)
def test_fast_replay_agrees_with_the_reference_on_a_longer_trace(eviction):
    """2,000 requests of sessions that extend earlier prompts, at capacities where many counts
    and buckets come and go (LFU) and most requests evict."""
    rng = random.Random(7)
    trace, next_id = [], 0
    for _ in range(2000):
        if trace and rng.random() < 0.7:
            parent = trace[-1 - min(int(rng.expovariate(0.1)), len(trace) - 1)]
            request = parent[: rng.randint(0, len(parent))]
        else:
            request = list(rng.sample(range(5), rng.randint(0, 3)))  # a few shared prompts
        fresh = rng.randint(0, 4)
        trace.append(request + list(range(next_id + 10, next_id + 10 + fresh)))
        next_id += fresh
    for capacity in (3, 17, 60, 250):
        for tail_first in (False, True):
            result = replay_prefix_cache(trace, capacity, eviction, tail_first=tail_first)
            expected = reference_replay(trace, capacity, eviction, tail_first)
            assert (result.hits, result.evictions) == expected
            assert result.evictions > 0 and result.hit_blocks > 0


@settings(max_examples=200, deadline=None)
@given(trace=traces(), spare=st.integers(0, 6))
def test_head_first_lru_is_plain_block_lru_when_requests_fit(trace, spare):
    capacity = max([1, *map(len, trace)]) + spare  # no request longer than the cache
    head = replay_prefix_cache(trace, capacity, "lru", tail_first=False)
    assert head.hits == plain_block_lru(trace, capacity)


@settings(max_examples=200, deadline=None)
@given(
    trace=traces(),
    capacities=st.lists(st.integers(1, 16), min_size=2, max_size=4),
    tail_first=st.booleans(),
)
def test_lru_hits_never_drop_as_the_capacity_grows(trace, capacities, tail_first):
    """LRU is a stack algorithm, even with long requests cut to the capacity: a bigger cache holds
    all that a smaller one does, so every request hits at least as much. (Not so for LFU.)"""
    sizes = sorted(capacities) + [None]
    results = hit_rate_curve(trace, sizes, evictions=["lru"], tail_first=tail_first)["lru"]
    for smaller, larger in zip(results, results[1:], strict=False):
        assert all(a <= b for a, b in zip(smaller.hits, larger.hits, strict=True))
        assert smaller.hit_rate <= larger.hit_rate


# ---------------------------------------------------------------------------- argument errors


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: replay_prefix_cache([[1]], 0), ValueError, "at least 1 block"),
        (lambda: replay_prefix_cache([[1]], -5), ValueError, "at least 1 block"),
        (lambda: replay_prefix_cache([[1]], 10.0), TypeError, "capacity must be an int"),
        (lambda: replay_prefix_cache([[1]], True), TypeError, "capacity must be an int"),
        (lambda: replay_prefix_cache([[1]], 5, "fifo"), ValueError, "unknown eviction 'fifo'"),
        (lambda: replay_prefix_cache([[1]], 5, "LRU"), ValueError, "unknown eviction"),
        (lambda: replay_prefix_cache([[1]], 5, None), TypeError, "eviction must be one of"),
        (lambda: replay_prefix_cache(5, 5), TypeError, "requests must be a list"),
        (lambda: replay_prefix_cache("abc", 5), TypeError, "requests must be a list"),
        (lambda: replay_prefix_cache([1, 2, 3], 5), TypeError, "request 0 must be a list"),
        (lambda: replay_prefix_cache([[1], b"ab"], 5), TypeError, "request 1 must be a list"),
        (lambda: replay_prefix_cache([[1], "ab"], 5), TypeError, "one request instead"),
        (lambda: replay_prefix_cache([[1, [2]]], 5), TypeError, "cannot be hashed: \\[2\\]"),
        (lambda: replay_prefix_cache([[1, 2, 1]], 5), ValueError, "lists block 1 twice"),
        (lambda: hit_rate_curve([[1]], 5), TypeError, "capacities must be a list"),
        (lambda: replay_prefix_cache([[1]], 5, tail_first=1), TypeError, "tail_first must be"),
        (lambda: hit_rate_curve([[1]], [5], tail_first="yes"), TypeError, "tail_first must be"),
        (lambda: hit_rate_curve([[1]], []), ValueError, "capacities is empty"),
        (lambda: hit_rate_curve([[1]], [5, 0]), ValueError, "at least 1 block"),
        (lambda: hit_rate_curve([[1]], [5], "lru"), TypeError, "evictions must be a list"),
        (lambda: hit_rate_curve([[1]], [5], []), ValueError, "evictions is empty"),
        (lambda: hit_rate_curve([[1]], [5], ["lru", "lru"]), ValueError, "twice"),
        (lambda: hit_rate_curve([[1]], [5], ["lfu", "mru"]), ValueError, "unknown eviction"),
    ],
)
def test_argument_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()
