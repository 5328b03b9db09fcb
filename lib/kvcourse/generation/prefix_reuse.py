"""Few-shot prompts served through a prefix cache on the tiny transformer (§8.3, Ex 7): how many
prefill tokens the cache saves, and proof that it changes no logit.

The setting of the vLLM paper's Fig. 16 as the lecture runs it: ``num_requests`` requests share a
few-shot prefix (1-shot: 80 tokens, 5-shot: 341) and each adds its own question of 10–30 tokens.
They arrive one after another; each looks its prompt up in a
:class:`~kvcourse.kv.prefix_cache.PrefixCachingKVCache`, runs the model only on the part that is
not cached, names its full blocks, and finishes. The first request computes everything; the
others find the prefix's full blocks and compute the partial prefix block and their question.

:func:`few_shot_prefix_reuse` reports the tokens computed against the tokens the prompts hold,
beside Ex 7's estimate (the first prompt in full, every other one its prefix's partial block and
its question), and the largest difference between each request's last-token logits and those of
the same prompt computed from scratch in a contiguous cache (the cache must change nothing).

The share saved depends only on the question lengths a seed draws, not on the model:
:func:`few_shot_saved_shares` makes the same draws for many seeds and counts each by Ex 7's
formula, which a real run matches exactly (``tests/generation/test_prefix_reuse.py``), so the
spread over seeds costs a fraction of a second instead of a model run per seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from kvcourse._checks import check_count, check_positive_int
from kvcourse.blocks.pool import BlockPool
from kvcourse.kv.cache import ContiguousKVCache
from kvcourse.kv.prefix_cache import PrefixCachingKVCache
from kvcourse.model import TinyConfig, TinyTransformer

__all__ = [
    "PrefixReuseReport",
    "ex7_saved_share",
    "few_shot_prefix_reuse",
    "few_shot_saved_shares",
]


@dataclass(frozen=True)
class PrefixReuseReport:
    """What :func:`few_shot_prefix_reuse` measured: a ``prefix_len``-token shared prefix, each
    request's question length, the prompt tokens each request found cached (``cached_tokens``),
    and the largest absolute difference of any request's last-token logits from a computation
    without the cache (``max_logit_diff``: rounding level, ≤ 1e-12, when reuse is exact)."""

    prefix_len: int
    block_size: int
    question_lens: tuple[int, ...]
    cached_tokens: tuple[int, ...]
    max_logit_diff: float
    hit_rate: float

    @property
    def prompt_tokens(self) -> int:
        """Tokens of all the prompts together."""
        return sum(self.prefix_len + q for q in self.question_lens)

    @property
    def computed_tokens(self) -> int:
        """Prompt tokens the prefills computed (the rest came from the cache)."""
        return self.prompt_tokens - sum(self.cached_tokens)

    @property
    def saved_share(self) -> float:
        """The share of prefill tokens the cache saved: ``1 − computed / prompt tokens``."""
        return 1 - self.computed_tokens / self.prompt_tokens

    @property
    def ex7_estimate(self) -> float:
        """Ex 7's estimate for the same prompts (:func:`ex7_saved_share` at the mean question)."""
        mean_question = sum(self.question_lens) / len(self.question_lens)
        return ex7_saved_share(
            self.prefix_len, len(self.question_lens), mean_question, self.block_size
        )


def ex7_saved_share(
    prefix_len: int = 341, num_requests: int = 8, question_len: float = 20, block_size: int = 16
) -> float:
    """Ex 7: the share of prefill tokens a prefix cache saves when ``num_requests`` prompts share
    a ``prefix_len``-token prefix and add ``question_len`` tokens each. The first prompt is
    computed in full; each other one only its prefix's partial last block and its question:
    5-shot, 8 requests, 20-token questions, block 16: 341 = 21 full blocks + 5, so
    ``1 − (361 + 7 × 25) / (8 × 361) ≈ 0.81``."""
    check_positive_int("prefix_len", prefix_len)
    check_positive_int("num_requests", num_requests)
    check_positive_int("block_size", block_size)
    if not question_len >= 1:
        raise ValueError(f"question_len must be at least 1 token, got {question_len}")
    partial = prefix_len % block_size
    prompt = prefix_len + question_len
    computed = prompt + (num_requests - 1) * (partial + question_len)
    return 1 - computed / (num_requests * prompt)


def few_shot_prefix_reuse(
    prefix_len: int = 341,
    *,
    num_requests: int = 8,
    question_lens: tuple[int, int] = (10, 30),
    block_size: int = 16,
    seed: int = 0,
    model: TinyTransformer | None = None,
) -> PrefixReuseReport:
    """Serve ``num_requests`` prompts of a shared ``prefix_len``-token prefix plus a question of
    ``question_lens[0]``–``question_lens[1]`` random tokens, one after another, through a prefix
    cache with blocks of ``block_size`` on the tiny transformer (``model``, default seed 0), and
    compare every request's last-token logits with a computation from scratch (module docstring).
    Deterministic for ``seed``."""
    prefix_len, num_requests, block_size, low, high = _check_setting(
        prefix_len, num_requests, question_lens, block_size
    )
    model = TinyTransformer(seed=0) if model is None else model
    rng = random.Random(seed)
    vocab = model.config.vocab_size
    prefix, lengths = _draw_prompts(rng, prefix_len, num_requests, low, high, vocab)
    longest = prefix_len + max(lengths)
    pool = BlockPool(2 * -(-longest // block_size) + 2, block_size)
    cache = PrefixCachingKVCache.for_model(model, pool)
    cached, worst = [], 0.0
    with torch.no_grad():
        for i, n in enumerate(lengths):
            prompt = prefix + [rng.randrange(vocab) for _ in range(n)]
            hit = cache.add_prompt(i, prompt)
            logits = model.forward({i: prompt[hit:]}, cache)[i][-1]
            cache.register_prompt(i)
            cache.free_sequence(i)
            c = model.config
            scratch = ContiguousKVCache(c.num_layers, c.num_kv_heads, c.head_dim)
            scratch.add_sequence(0)
            reference = model.forward({0: prompt}, scratch)[0][-1]
            worst = max(worst, float((logits - reference).abs().max()))
            cached.append(hit)
    return PrefixReuseReport(
        prefix_len=prefix_len,
        block_size=block_size,
        question_lens=lengths,
        cached_tokens=tuple(cached),
        max_logit_diff=worst,
        hit_rate=cache.prefix_cache.hit_rate,
    )


def few_shot_saved_shares(
    prefix_len: int = 341,
    seeds: range | tuple[int, ...] = range(1000),
    *,
    num_requests: int = 8,
    question_lens: tuple[int, int] = (10, 30),
    block_size: int = 16,
    vocab_size: int = TinyConfig.vocab_size,
) -> tuple[float, ...]:
    """The share of prefill tokens :func:`few_shot_prefix_reuse` saves with the same arguments, for
    each of ``seeds``, without running the model: each seed's question lengths are drawn exactly
    as the run draws them (its shared prefix first, on the tiny model's ``vocab_size`` tokens),
    and counted by Ex 7's formula (:func:`ex7_saved_share` at their mean), which a run matches
    whenever its later requests find exactly the prefix's full blocks cached."""
    prefix_len, num_requests, block_size, low, high = _check_setting(
        prefix_len, num_requests, question_lens, block_size
    )
    vocab_size = check_positive_int("vocab_size", vocab_size)
    seeds = tuple(seeds)
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise ValueError(f"seeds must be a non-empty range or tuple of ints, got {seeds!r:.80}")
    shares = []
    for seed in seeds:
        rng = random.Random(seed)
        _, lengths = _draw_prompts(rng, prefix_len, num_requests, low, high, vocab_size)
        mean_question = sum(lengths) / num_requests
        shares.append(ex7_saved_share(prefix_len, num_requests, mean_question, block_size))
    return tuple(shares)


def _check_setting(
    prefix_len: int, num_requests: int, question_lens: tuple[int, int], block_size: int
) -> tuple[int, int, int, int, int]:
    prefix_len = check_positive_int("prefix_len", prefix_len)
    num_requests = check_positive_int("num_requests", num_requests)
    block_size = check_positive_int("block_size", block_size)
    low, high = (check_count("question_lens", n) for n in question_lens)
    if not 1 <= low <= high:
        raise ValueError(
            f"question_lens must be (low, high) with 1 <= low <= high, got {question_lens}"
        )
    return prefix_len, num_requests, block_size, low, high


def _draw_prompts(
    rng: random.Random, prefix_len: int, num_requests: int, low: int, high: int, vocab: int
) -> tuple[list[int], tuple[int, ...]]:
    """The shared prefix's tokens, then each request's question length, in this order: the
    seeded draws :func:`few_shot_prefix_reuse` and :func:`few_shot_saved_shares` share."""
    prefix = [rng.randrange(vocab) for _ in range(prefix_len)]
    lengths = tuple(rng.randint(low, high) for _ in range(num_requests))
    return prefix, lengths
