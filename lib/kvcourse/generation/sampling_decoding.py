"""Parallel sampling over the tiny transformer on real K and V (§5.1): the samples forked from one
prefilled prompt on a sharing paged cache, or each given a full copy of the prompt's KV; with a
fixed, seeded sampler the samples must not depend on which."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvcourse._checks import ceil_div, check_count, check_positive_int, check_positive_number
from kvcourse.blocks.sharing import SharedBlockManager
from kvcourse.generation._setup import ManagerFactory, check_model_and_prompt, fraction_saved
from kvcourse.generation.kv_schemes import Scheme, SchemeCache, check_scheme
from kvcourse.model import TinyTransformer

__all__ = ["SamplingRun", "sample_in_parallel"]


@dataclass(frozen=True)
class SamplingRun:
    """Parallel sampling over the tiny transformer under ``scheme``: each sample's tokens, the
    copies made (paged: copy-on-writes and their filled slots; full copy: ``n − 1`` prompt
    copies), and the peak blocks stored beside the peak without sharing."""

    scheme: str
    samples: tuple[tuple[int, ...], ...]
    cow_count: int
    copied_tokens: int
    peak_blocks: int
    peak_blocks_unshared: int
    leaked_blocks: int

    @property
    def memory_saved(self) -> float:
        """``1 − peak blocks / peak blocks without sharing``, a fraction."""
        return fraction_saved(self.peak_blocks, self.peak_blocks_unshared)


def sample_in_parallel(
    model: TinyTransformer,
    prompt: Sequence[int],
    num_samples: int,
    tokens_per_sample: int,
    *,
    scheme: Scheme = "paged",
    block_size: int = 16,
    temperature: float = 1.0,
    seed: int = 0,
    manager_factory: ManagerFactory = SharedBlockManager,
) -> SamplingRun:
    """Draw ``num_samples`` continuations of ``prompt``, ``tokens_per_sample`` tokens each.

    The prompt is prefilled once as sample 0. ``scheme="paged"``: samples ``1 .. n−1`` fork it on
    a :class:`~kvcourse.kv.sharing_cache.SharingPagedKVCache`; ``"full_copy"``: they get a full
    copy of its KV in a contiguous cache. Each step every sample draws a token from
    ``softmax(logits / temperature)`` with its own generator (seeded ``seed + i`` for sample
    ``i``), and all samples run one forward pass together. The sampler sees only the logits, so
    the samples are the same under both schemes exactly when the logits are.
    """
    prompt = check_model_and_prompt(model, prompt)
    n = check_positive_int("num_samples", num_samples)
    steps = check_count("tokens_per_sample", tokens_per_sample)
    size = check_positive_int("block_size", block_size)
    check_scheme(scheme)
    temperature = check_positive_number("temperature", temperature)
    p = len(prompt)
    kv = SchemeCache(
        model,
        scheme,
        num_blocks=n * ceil_div(p + steps, size) + n,
        block_size=size,
        manager_factory=manager_factory,
    )
    kv.cache.add_sequence(0)
    last = model.forward({0: prompt}, kv.cache)[0][-1]
    for sample in range(1, n):
        kv.fork(0, sample)
    logits = {sample: last for sample in range(n)}
    generators = [torch.Generator().manual_seed(seed + i) for i in range(n)]
    drawn: list[list[int]] = [[] for _ in range(n)]
    peak_unshared = n * ceil_div(p, size)
    peak = peak_unshared if kv.manager is None else kv.manager.pool.num_used
    for step in range(steps):
        batch = {}
        for sample in range(n):
            probs = torch.softmax(logits[sample] / temperature, dim=-1)
            token = int(torch.multinomial(probs, 1, generator=generators[sample]))
            drawn[sample].append(token)
            batch[sample] = [token]
        out = model.forward(batch, kv.cache)
        logits = {sample: out[sample][-1] for sample in range(n)}
        unshared = n * ceil_div(p + step + 1, size)
        peak_unshared = max(peak_unshared, unshared)
        peak = max(peak, unshared if kv.manager is None else kv.manager.pool.num_used)
    copied, cows = kv.copied_tokens, kv.cow_count
    leaked = kv.free(range(n))
    return SamplingRun(
        scheme, tuple(tuple(d) for d in drawn), cows, copied, peak, peak_unshared, leaked
    )
