"""A paged KV cache whose prompts reuse cached prefixes (kvcourse.kv.prefix_cache): the tiny
transformer's logits do not change, the blocks are shared rather than copied, and they stay cached
after their request ends."""

from __future__ import annotations

import random

import pytest
import torch

from kvcourse.blocks import BlockPool, BlockTable
from kvcourse.kv import ContiguousKVCache, PrefixCachingKVCache
from kvcourse.model import TinyConfig, TinyTransformer


def scratch_logits(model, prompt):
    c = model.config
    cache = ContiguousKVCache(c.num_layers, c.num_kv_heads, c.head_dim)
    cache.add_sequence(0)
    return model.forward({0: prompt}, cache)[0]


@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_prompts_served_from_the_cache_give_the_same_logits(block_size):
    model = TinyTransformer(TinyConfig(d_model=64, num_heads=8, num_kv_heads=2), seed=4)
    rng = random.Random(block_size)
    prefix = [rng.randrange(128) for _ in range(37)]
    cache = PrefixCachingKVCache.for_model(model, BlockPool(64, block_size))
    for i in range(4):
        prompt = prefix + [rng.randrange(128) for _ in range(rng.randint(1, 9))]
        cached = cache.add_prompt(i, prompt)
        assert cached == (0 if i == 0 else 37 // block_size * block_size)
        assert cache.length(i) == cached
        out = model.forward({i: prompt[cached:]}, cache)[i]
        cache.register_prompt(i)
        expected = scratch_logits(model, prompt)[cached:]
        assert torch.allclose(out, expected, rtol=0, atol=1e-12)
        # decoding on top of a cached prefix works as in any paged cache
        step = model.forward({i: [5]}, cache)[i]
        assert torch.allclose(step, scratch_logits(model, [*prompt, 5])[-1:], atol=1e-12)
        cache.free_sequence(i)


def test_cached_blocks_are_shared_by_live_requests_and_survive_their_end():
    model = TinyTransformer(seed=0)
    pool = BlockPool(16, 4)
    cache = PrefixCachingKVCache.for_model(model, pool)
    prompt = list(range(10))
    cache.add_prompt("a", prompt)
    model.forward({"a": prompt}, cache)
    assert cache.register_prompt("a") == 2  # two full blocks named, the partial one not
    assert cache.add_prompt("b", prompt[:8] + [99, 98]) == 8
    a, b = cache.block_table("a").block_ids, cache.block_table("b").block_ids
    assert a[:2] == b[:2] and [pool.ref_count(x) for x in a[:2]] == [2, 2]
    cache.free_sequence("a")
    cache.free_sequence("b")
    assert pool.num_used == 0 and pool.num_cached_free == 2
    assert cache.add_prompt("c", prompt) == 8  # still cached after both ended


def test_turn_two_hits_turn_one_answer_once_its_blocks_are_named():
    """vLLM v1 names the blocks a request's generated tokens fill (vllm/v1/request.py,
    Request.append_output_token_ids -> update_block_hashes, v0.33.0), so the next turn of a
    conversation, which repeats the answer, reuses them. register_prompt names the prompt only;
    register_sequence names the answer too, and the logits stay those computed from scratch."""
    model = TinyTransformer(seed=1)
    question, follow_up = [7, 3, 9, 4, 1, 8], [11, 12]
    hits = {}
    for rule in ("prompt", "sequence"):
        cache = PrefixCachingKVCache.for_model(model, BlockPool(16, 4))
        cache.add_prompt(0, question)
        logits, tokens = model.forward({0: question}, cache)[0], list(question)
        for _ in range(6):  # greedy decoding: each token is fed back, its KV stored
            tokens.append(int(logits[-1].argmax()))
            logits = model.forward({0: tokens[-1:]}, cache)[0]
        if rule == "prompt":
            cache.register_prompt(0)
        else:
            assert cache.register_sequence(0, tokens) == 3  # 12 tokens: 3 full blocks
        cache.free_sequence(0)
        turn2 = tokens + follow_up  # 14 tokens
        hits[rule] = cache.add_prompt(1, turn2)
        out = model.forward({1: turn2[hits[rule] :]}, cache)[1]
        assert torch.allclose(out, scratch_logits(model, turn2)[hits[rule] :], atol=1e-12)
    assert hits == {"prompt": 4, "sequence": 12}


def test_misuse_is_refused():
    model = TinyTransformer(seed=0)
    pool = BlockPool(8, 4)
    cache = PrefixCachingKVCache.for_model(model, pool)
    cache.add_prompt(0, [1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="already exists"):
        cache.add_prompt(0, [1, 2])
    with pytest.raises(ValueError, match="run the model on the rest"):
        cache.register_prompt(0)
    cache.add_sequence(1)
    with pytest.raises(ValueError, match="not started with add_prompt"):
        cache.register_prompt(1)
    with pytest.raises(ValueError, match="not started with add_prompt"):
        cache.register_sequence(1, [1])
    model.forward({0: [1, 2, 3, 4, 5]}, cache)
    with pytest.raises(ValueError, match="pass its prompt and then the generated tokens"):
        cache.register_sequence(0, [1, 2, 3, 4, 5, 6])  # 6 tokens, 5 stored
    with pytest.raises(ValueError, match="pass its prompt and then the generated tokens"):
        cache.register_sequence(0, [9, 2, 3, 4, 5])
    with pytest.raises(TypeError, match="PrefixCache over this cache's pool"):
        PrefixCachingKVCache(pool, 1, 1, 4, prefix_cache="cache")
    with pytest.raises(ValueError, match="is free"):
        BlockTable.adopt(pool, [7])
