"""One replay for both prefix-cache designs (kvcourse.blocks.token_replay): the block-aligned
adapter's rules on hand-made cases, and both caches driven by the same workloads."""

from __future__ import annotations

import pytest

from kvcourse.blocks import (
    BlockPrefixAdapter,
    RadixCache,
    TokenPrefixCache,
    TokenReplay,
    replay_tokens,
)
from kvcourse.token_workloads import TokenRequest, agent_branching_workload, multi_turn_workload


def test_both_caches_speak_the_interface():
    assert isinstance(RadixCache(8), TokenPrefixCache)
    assert isinstance(BlockPrefixAdapter(4, 8), TokenPrefixCache)
    with pytest.raises(TypeError, match="acquire"):
        replay_tokens(object(), [])


def test_the_adapter_reuses_full_blocks_only_and_keeps_the_finished_sequence():
    cache = BlockPrefixAdapter(4, 32)  # 8 blocks of 4
    assert cache.acquire("a", list(range(10))) == []
    assert cache.release("a", list(range(13))) == 12  # 3 full blocks kept, the 13th token not
    assert cache.num_cached == 12
    got = cache.acquire("b", list(range(11)) + [99])  # shares 11 tokens: 2 full blocks
    assert len(got) == 8 and got == sorted(got)
    assert cache.release("b", list(range(11)) + [99]) == 4  # block 3 is new: 8, 9, 10, 99
    assert (cache.tokens_hashed, cache.table_lookups) == (8 + 12, 1 + 2)  # a miss is one probe


def test_the_adapter_refuses_bad_calls_without_changing_anything():
    cache = BlockPrefixAdapter(4, 16)
    cache.acquire("a", [1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="already holds"):
        cache.acquire("a", [1])
    with pytest.raises(ValueError, match="does not start with"):
        cache.release("a", [1, 2, 3])
    with pytest.raises(KeyError):
        cache.release("b", [1])
    assert cache.release("a", [1, 2, 3, 4, 5, 6, 7, 8]) == 8
    with pytest.raises(ValueError, match="no whole block"):
        BlockPrefixAdapter(16, 8)


def test_a_hit_past_a_block_boundary_counts_only_for_the_radix_tree():
    work = [
        TokenRequest(0, tuple(range(1, 31)), (7,)),
        TokenRequest(1, tuple(range(1, 21)) + (99,), (5,)),  # shares 20 tokens
    ]
    radix = replay_tokens(RadixCache(64), work)
    assert radix.hits == (0, 20) and radix.prompt_tokens == 51
    assert replay_tokens(BlockPrefixAdapter(16, 64), work).hits == (0, 16)
    assert replay_tokens(BlockPrefixAdapter(1, 64), work).hits == (0, 20)
    assert isinstance(radix, TokenReplay) and radix.hit_rate == 20 / 51


def test_block_size_one_and_the_radix_tree_agree_when_nothing_is_evicted():
    work = agent_branching_workload(2, 8, system_len=40, seed=3)
    room = sum(len(r.prompt) + len(r.answer) for r in work)
    radix = replay_tokens(RadixCache(room), work)
    blocks = replay_tokens(BlockPrefixAdapter(1, room), work)
    assert radix.hits == blocks.hits and radix.hit_tokens > 0
    coarse = replay_tokens(BlockPrefixAdapter(16, room), work)
    assert all(c <= r for c, r in zip(coarse.hits, radix.hits, strict=True))


def test_requests_of_one_wave_cannot_reuse_each_other():
    work = multi_turn_workload(1, 3, seed=0)
    serial = replay_tokens(RadixCache(10_000), work)
    batched = replay_tokens(RadixCache(10_000), work, concurrency=3)
    assert serial.hits[1] > 0 and batched.hits == (0, 0, 0)
    with pytest.raises(TypeError, match="request_id"):
        replay_tokens(RadixCache(8), [(1, 2)])


def test_capacity_is_never_exceeded_in_a_replay():
    work = multi_turn_workload(4, 4, seed=1)
    for cache in (RadixCache(200), BlockPrefixAdapter(16, 200)):
        replay_tokens(cache, work)
        assert cache.num_cached <= 200
