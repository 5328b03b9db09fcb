"""Parallel sampling counted on block bookkeeping alone (§5.1, Ex 4): copy-on-writes, copied
slots and peak blocks, with no model.

One prompt of ``P`` tokens, ``n`` samples of ``T`` tokens each. The prompt sequence is sample 0
and the other ``n − 1`` samples fork from it; then every sample appends one token per step, in
sample order. Copy-on-writes: ``n − 1`` when ``P mod B ≠ 0``, 0 when the prompt fills its last
block. Memory *with* sharing is what the pool really holds; *without* it, every sample holds its
own ``ceil(length / B)`` blocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvcourse._checks import ceil_div, check_count, check_positive_int
from kvcourse.blocks.sharing import SharedBlockManager
from kvcourse.generation._setup import (
    ManagerFactory,
    append_counting,
    fraction_saved,
    free_all,
    new_manager,
)

__all__ = ["ParallelSamplingReport", "parallel_sampling", "parallel_sampling_sweep"]


@dataclass(frozen=True)
class ParallelSamplingReport:
    """Parallel sampling (§5.1) of ``num_samples`` samples of ``tokens_per_sample`` tokens each
    from one ``prompt_len``-token prompt, block size ``block_size``.

    ``cow_count`` copy-on-writes copied ``copied_tokens`` filled token slots. Peak memory in
    blocks: ``peak_blocks_shared`` (what the pool held) against ``peak_blocks_unshared`` (every
    sample holding its own copy of the prompt); ``memory_saved`` is the fraction saved.
    ``leaked_blocks`` is what the pool still held after every sample was freed (0 when right).
    """

    prompt_len: int
    num_samples: int
    tokens_per_sample: int
    block_size: int
    cow_count: int
    copied_tokens: int
    peak_blocks_shared: int
    peak_blocks_unshared: int
    leaked_blocks: int

    @property
    def memory_saved(self) -> float:
        """``1 − peak shared / peak unshared``, a fraction."""
        return fraction_saved(self.peak_blocks_shared, self.peak_blocks_unshared)


def parallel_sampling(
    prompt_len: int = 100,
    num_samples: int = 4,
    tokens_per_sample: int = 40,
    block_size: int = 16,
    *,
    manager_factory: ManagerFactory = SharedBlockManager,
) -> ParallelSamplingReport:
    """Count the copies and blocks of parallel sampling with fork and copy-on-write.

    The prompt is appended to sequence 0, which becomes sample 0; samples ``1 .. n−1`` fork from
    it (every prompt block's reference count becomes ``n``). Then, for each of
    ``tokens_per_sample`` steps, samples ``0 .. n−1`` append one token each. The first step makes
    ``n − 1`` copy-on-writes when the prompt's last block is partly filled (the last sample finds
    the count back at 1) and none when ``prompt_len`` is a multiple of ``block_size`` (Ex 4).
    """
    prompt_len = check_positive_int("prompt_len", prompt_len)
    n = check_positive_int("num_samples", num_samples)
    steps = check_count("tokens_per_sample", tokens_per_sample)
    size = check_positive_int("block_size", block_size)
    manager = new_manager(manager_factory, n * ceil_div(prompt_len + steps, size) + n, size)
    pool = manager.pool
    samples = list(range(n))
    manager.add_sequence(0)
    manager.append(0, prompt_len)
    for child in samples[1:]:
        manager.fork(0, child)
    peak_shared = pool.num_used
    peak_unshared = n * ceil_div(prompt_len, size)
    cows = copied = 0
    for step in range(steps):
        length = prompt_len + step
        for sample in samples:
            made, slots = append_counting(manager, sample, length, 1)
            cows, copied = cows + made, copied + slots
        peak_shared = max(peak_shared, pool.num_used)
        peak_unshared = max(peak_unshared, n * ceil_div(length + 1, size))
    leaked = free_all(manager, samples)
    return ParallelSamplingReport(
        prompt_len, n, steps, size, cows, copied, peak_shared, peak_unshared, leaked
    )


def parallel_sampling_sweep(
    num_samples: Sequence[int] = range(2, 9),
    *,
    prompt_len: int = 100,
    tokens_per_sample: int = 40,
    block_size: int = 16,
    manager_factory: ManagerFactory = SharedBlockManager,
) -> list[ParallelSamplingReport]:
    """:func:`parallel_sampling` for each ``n`` in ``num_samples`` (the lecture's n = 2..8)."""
    return [
        parallel_sampling(
            prompt_len, n, tokens_per_sample, block_size, manager_factory=manager_factory
        )
        for n in num_samples
    ]
