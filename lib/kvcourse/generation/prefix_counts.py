"""A shared prefix counted on block bookkeeping alone (§5.3): requests whose block tables point at
one set of system-prompt blocks, and the memory that saves."""

from __future__ import annotations

import random
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

__all__ = ["SharedPrefixReport", "shared_prefix"]


@dataclass(frozen=True)
class SharedPrefixReport:
    """Requests that start with one shared prefix (a system prompt, few-shot examples; §5.3).

    The prefix's ``prefix_blocks`` blocks are stored once and every request's block table points
    at them; each request adds ``suffix_lens[i]`` tokens of its own. A partly filled last prefix
    block is copied once per request (``cow_count``) when the request writes its own tokens.
    Memory in blocks with sharing (``blocks_shared``, prefix included) and without
    (``blocks_unshared``: each request with its own copy of the prefix).
    """

    prefix_len: int
    suffix_lens: tuple[int, ...]
    block_size: int
    prefix_blocks: int
    cow_count: int
    blocks_shared: int
    blocks_unshared: int
    leaked_blocks: int

    @property
    def memory_saved(self) -> float:
        """``1 − shared / unshared``, a fraction."""
        return fraction_saved(self.blocks_shared, self.blocks_unshared)


def shared_prefix(
    prefix_len: int = 341,
    suffix_lens: Sequence[int] | None = None,
    *,
    num_requests: int = 8,
    block_size: int = 16,
    seed: int = 0,
    manager_factory: ManagerFactory = SharedBlockManager,
) -> SharedPrefixReport:
    """Memory of ``len(suffix_lens)`` requests sharing one ``prefix_len``-token prefix.

    The prefix is a sequence of its own, kept alive (like a shared library); each request forks
    it and appends its suffix. By default ``num_requests`` suffixes of 10–30 tokens are drawn
    with ``random.Random(seed)``; the default prefix is §8's 5-shot prompt of 341 tokens.
    """
    p = check_positive_int("prefix_len", prefix_len)
    size = check_positive_int("block_size", block_size)
    if suffix_lens is None:
        rng = random.Random(seed)
        count = check_positive_int("num_requests", num_requests)
        suffix_lens = [rng.randint(10, 30) for _ in range(count)]
    suffixes = tuple(check_count("each suffix length", q) for q in suffix_lens)
    if not suffixes:
        raise ValueError("suffix_lens is empty; give at least one request")
    unshared = sum(ceil_div(p + q, size) for q in suffixes)
    manager = new_manager(manager_factory, unshared + ceil_div(p, size), size)
    manager.add_sequence("prefix")
    manager.append("prefix", p)
    prefix_blocks = manager.pool.num_used
    cows = 0
    for request, q in enumerate(suffixes):
        manager.fork("prefix", request)
        cows += append_counting(manager, request, p, q)[0]
    shared = manager.pool.num_used
    leaked = free_all(manager, ["prefix", *range(len(suffixes))])
    return SharedPrefixReport(p, suffixes, size, prefix_blocks, cows, shared, unshared, leaked)
