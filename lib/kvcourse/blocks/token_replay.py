"""One replay for both prefix-cache designs: a token workload driven through any cache that
answers ``acquire`` and ``release``, and the block-aligned cache behind that interface (the
page *Beyond block prefixes*).

:class:`~kvcourse.blocks.radix_cache.RadixCache` already speaks the interface
(:class:`TokenPrefixCache`). :class:`BlockPrefixAdapter` puts the library's block-aligned
:class:`~kvcourse.blocks.prefix_cache.PrefixCache` (full blocks only, named by chained hashes,
as vLLM's automatic prefix caching) behind it, on a pool of ``num_slots // block_size`` blocks,
so the two designs are compared with the same memory. Both keep in that memory only what they
cache between requests: a running request's own new KV is not counted against it.

:func:`replay_tokens` runs a workload through a cache: each request acquires its prompt, then
releases its whole sequence (prompt and answer), in workload order. By default one request runs
at a time; ``concurrency=k`` runs them in waves of ``k`` (all of a wave acquire, then all
release), so requests of a wave cannot reuse one another's tokens, as with a real batch.

>>> from kvcourse.blocks.radix_cache import RadixCache
>>> from kvcourse.token_workloads import TokenRequest
>>> work = [TokenRequest(0, tuple(range(1, 21)), (7, 7)),
...         TokenRequest(1, tuple(range(1, 11)) + (99, 98), (5,))]
>>> replay_tokens(RadixCache(64), work).hit_tokens  # all 10 shared tokens
10
>>> replay_tokens(BlockPrefixAdapter(8, 64), work).hit_tokens  # only one full block of 8
8
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from kvcourse._checks import check_positive_int
from kvcourse.blocks.hashing import ROOT_HASH, chained_block_hashes
from kvcourse.blocks.pool import BlockPool
from kvcourse.blocks.prefix_cache import PrefixCache
from kvcourse.blocks.radix_cache import _check_request_id, _check_tokens

__all__ = ["BlockPrefixAdapter", "TokenPrefixCache", "TokenReplay", "replay_tokens"]


@runtime_checkable
class TokenPrefixCache(Protocol):
    """What :func:`replay_tokens` needs of a prefix cache."""

    def acquire(self, request_id: Hashable, tokens: Sequence[int]) -> list[int]:
        """A request arrives: the slot ids of its prompt's reused prefix (one per hit token)."""
        ...

    def release(self, request_id: Hashable, tokens: Sequence[int]) -> int:
        """A request finishes with ``tokens`` (prompt then answer): the tokens newly stored."""
        ...


@dataclass(frozen=True)
class TokenReplay:
    """What a replay measured: ``hits`` (reused tokens, one entry per request, in workload
    order), their sum ``hit_tokens``, ``prompt_tokens`` (all prompts' tokens) and
    ``stored_tokens`` (tokens the releases newly stored)."""

    hits: tuple[int, ...]
    hit_tokens: int
    prompt_tokens: int
    stored_tokens: int

    @property
    def hit_rate(self) -> float:
        """``hit_tokens / prompt_tokens``: the share of prompt tokens whose KV was reused."""
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def replay_tokens(
    cache: TokenPrefixCache, workload: Sequence, *, concurrency: int = 1
) -> TokenReplay:
    """Drive ``workload`` (:class:`~kvcourse.token_workloads.TokenRequest` items, or anything
    with ``request_id``, ``prompt`` and ``answer``) through ``cache``: each request acquires its
    prompt and releases prompt + answer, in order, ``concurrency`` requests at a time."""
    if not isinstance(cache, TokenPrefixCache):
        raise TypeError(
            f"cache must have acquire() and release() (a TokenPrefixCache), got {cache!r}"
        )
    concurrency = check_positive_int("concurrency", concurrency, "e.g. 1 (one at a time)")
    requests = list(workload)
    for r in requests:
        if not all(hasattr(r, name) for name in ("request_id", "prompt", "answer")):
            raise TypeError(f"a workload item needs request_id, prompt and answer, got {r!r}")
    hits, stored = [], 0
    for start in range(0, len(requests), concurrency):
        wave = requests[start : start + concurrency]
        for r in wave:
            hits.append(len(cache.acquire(r.request_id, r.prompt)))
        for r in wave:
            stored += cache.release(r.request_id, tuple(r.prompt) + tuple(r.answer))
    prompt_tokens = sum(len(r.prompt) for r in requests)
    return TokenReplay(tuple(hits), sum(hits), prompt_tokens, stored)


class BlockPrefixAdapter:
    """The block-aligned prefix cache (:class:`~kvcourse.blocks.prefix_cache.PrefixCache`, LRU,
    the course's rules) behind :class:`TokenPrefixCache`, on ``num_slots // block_size`` blocks.

    ``acquire`` takes the cached leading run of the prompt's full blocks (at most
    ``(len - 1) // block_size`` blocks, so the last token is computed); ``release`` keeps the
    finished sequence's full blocks: those already cached are reused, the rest take fresh blocks
    (the pool evicts its least recently freed cached blocks for them; if the pool is still short,
    the longest prefix that fits is kept), every one is named, and all go back to the pool free
    but cached. A partial last block is never kept. Counters of the lookup's cost:
    ``tokens_hashed`` (the prompt's full-block tokens hashed on arrival) and ``table_lookups``
    (hash-table probes until the first miss).
    """

    def __init__(self, block_size: int, num_slots: int) -> None:
        block_size = check_positive_int("block_size", block_size, "e.g. 16")
        num_slots = check_positive_int("num_slots", num_slots, "e.g. 4096")
        if num_slots < block_size:
            raise ValueError(
                f"num_slots ({num_slots}) holds no whole block of {block_size}; pass at least "
                f"block_size slots"
            )
        self.num_slots = num_slots
        self.cache = PrefixCache(BlockPool(num_slots // block_size, block_size))
        # request -> (prompt, blocks taken, the prompt's full-block hashes)
        self._held: dict[Hashable, tuple[tuple[int, ...], tuple[int, ...], tuple[bytes, ...]]] = {}
        self.tokens_hashed = 0
        self.table_lookups = 0

    @property
    def block_size(self) -> int:
        """Tokens per block."""
        return self.cache.block_size

    @property
    def num_cached(self) -> int:
        """Tokens held by named blocks, used or free."""
        return self.cache.pool.num_cached * self.block_size

    def acquire(self, request_id: Hashable, tokens: Sequence[int]) -> list[int]:
        """Take the prompt's cached leading run of full blocks; returns their slot ids (block
        ``b`` holds slots ``b * block_size`` to ``b * block_size + block_size - 1``)."""
        _check_request_id(request_id)
        ids = _check_tokens(tokens)
        if request_id in self._held:
            raise ValueError(
                f"request {request_id!r} already holds an acquisition; release it first"
            )
        blocks: tuple[int, ...] = ()
        hashes: tuple[bytes, ...] = ()
        if ids:
            found = self.cache.take(ids)
            blocks, hashes = found.block_ids, found.hashes
            reusable = (len(ids) - 1) // self.block_size
            self.tokens_hashed += len(found.hashes) * self.block_size
            self.table_lookups += min(len(blocks) + 1, reusable)
        self._held[request_id] = (ids, blocks, hashes)
        bs = self.block_size
        return [b * bs + i for b in blocks for i in range(bs)]

    def release(self, request_id: Hashable, tokens: Sequence[int]) -> int:
        """Keep the finished sequence's full blocks cached and give the request's blocks back;
        returns the tokens newly stored (a multiple of the block size)."""
        _check_request_id(request_id)
        ids = _check_tokens(tokens)
        if request_id not in self._held:
            raise KeyError(f"request {request_id!r} holds no acquisition; acquire it first")
        prompt, held, known = self._held[request_id]
        if ids[: len(prompt)] != prompt:
            raise ValueError(
                f"request {request_id!r}'s sequence does not start with the prompt it acquired "
                f"with; pass the prompt followed by the generated tokens"
            )
        del self._held[request_id]
        pool, bs = self.cache.pool, self.block_size
        # the chain goes on from the prompt's last full block: hash only what follows it
        rest = ids[len(known) * bs :]
        hashes = [*known, *chained_block_hashes(rest, bs, root=known[-1] if known else ROOT_HASH)]
        blocks = list(held)
        while len(blocks) < len(hashes) and pool.cached_block(hashes[len(blocks)]) is not None:
            blocks.append(pool.touch(hashes[len(blocks)]))
        new = pool.allocate_many(min(len(hashes) - len(blocks), pool.num_free))
        blocks += new
        self.cache.register(blocks, ids[: len(blocks) * bs])
        stored = sum(pool.block_hash(b) is not None for b in new) * bs
        self.cache.free(blocks)
        return stored
