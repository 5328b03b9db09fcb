"""Automatic prefix caching on the block pool (§8.3): a new request reuses the blocks of any earlier
request that began with the same tokens, found by their chained hashes.

The cache adds no memory of its own. It names the full blocks a request has computed by their
chained hashes (:mod:`kvcourse.blocks.hashing`) in the pool (:meth:`BlockPool.set_block_hash`), and
when the request finishes its blocks go back to the pool *free but cached*: still holding their KV
and their names, in the pool's free queue, the least recently used at its head. A later request:

1. **looks itself up** (:meth:`PrefixCache.match`): the leading run of its full blocks whose
   hashes the pool holds. The first miss ends the run, since a block's KV is of no use without
   the blocks before it; and the run stops one token short of the prompt, so that at least the
   last prompt token is computed (its logits choose the first output token). A prompt that is an
   exact multiple of the block size therefore recomputes its whole last block;
2. **takes its blocks** (:meth:`PrefixCache.allocate`): one reference on each hit (a used block is
   shared, a free cached one is revived out of the free queue) and fresh blocks for the rest, all
   or nothing. A fresh block may evict a free cached block: under ``eviction="lru"`` the head
   of the pool's free queue (the least recently freed), under ``"lfu"`` the free cached block
   used by the fewest requests since it was computed (ties: the least recently used), a free
   block holding nothing always first. A block someone holds is never evicted: only free
   blocks are candidates;
3. **names what it computed** (:meth:`PrefixCache.register`) once its KV is written: every full
   block gets its hash, so the next request can hit it;
4. **gives its blocks back** (:meth:`PrefixCache.free`), last block first: a sequence's tail is the
   part least likely to be shared, so it should be evicted first (vLLM's order: v1 frees a
   request's blocks last first, and v0's prefix-caching evictor breaks a tie toward the block
   with more hashed tokens, the tail).

Invariants: a hit returns only a block whose whole prefix equals the request's (equal chained
hash); every block a request holds has one reference from it; cached tokens are always fewer than
the prompt's. The counters (``queries``, ``queried_blocks``, ``hit_blocks``) measure the hit rate
block by block, as the replay of :mod:`kvcourse.cluster.prefix_replay` does for a whole cluster.

**Beside vLLM v1.** Rules 1, 2 and 4 and LRU are those of vLLM v1's prefix caching (release
v0.33.0: ``vllm/v1/core/kv_cache_manager.py``, ``get_computed_blocks`` and ``free``), which the
2023 paper predates. Four of v1's rules differ from the course's defaults; each is an option:

* **when a block is named**: v1 names a request's full blocks as soon as it allocates them, before
  their KV is computed (``KVCacheManager.allocate_slots`` calls ``cache_blocks``), so a second
  request scheduled in the same step already hits them. The course names after the prefill
  (:meth:`PrefixCache.register`), so a request allocated before that misses:
  ``naming="allocated"`` is v1's rule, ``"computed"`` (default) the course's;
* **blocks filled by generated tokens**: v1 names them too (a request's block hashes grow with its
  output), so turn 2 of a conversation hits turn 1's answer. :meth:`PrefixCache.grow` takes a
  decoding sequence's new blocks, and names them at once under ``naming="allocated"``;
  :meth:`PrefixCache.register` names whatever tokens it is given, prompt and output alike (the
  course's pages register prompts only);
* **duplicate copies**: v1 names a second block that computed a prefix already cached, so the
  prefix stays cached while either copy is; the course's pool keeps the first name only (the
  pool's ``keep_duplicates``);
* **free order**: v1 reuses freed blocks that hold no hash before evicting any cached block (the
  pool's ``uncached_first``).

:meth:`PrefixCache.like_vllm_v1` builds a cache with all four of v1's rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvcourse.blocks.errors import OutOfBlocksError
from kvcourse.blocks.hashing import ROOT_HASH, chained_block_hashes
from kvcourse.blocks.pool import BlockPool

__all__ = ["EVICTIONS", "NAMINGS", "PrefixAllocation", "PrefixCache", "PrefixMatch"]

#: The evictions :class:`PrefixCache` knows: how :meth:`PrefixCache.allocate` chooses the free
#: cached block to evict.
EVICTIONS: tuple[str, ...] = ("lru", "lfu")

#: When :class:`PrefixCache` names a full block: once its KV is computed (:meth:`PrefixCache.
#: register`, the course's rule) or as soon as it is allocated (vLLM v1's).
NAMINGS: tuple[str, ...] = ("computed", "allocated")


@dataclass(frozen=True)
class PrefixMatch:
    """What the cache holds of a prompt: ``hashes`` of its full blocks, and ``block_ids`` of the
    leading run of them that is cached (at most ``(len(tokens) - 1) // block_size`` blocks), with
    ``cached_tokens`` the tokens whose KV they hold."""

    hashes: tuple[bytes, ...]
    block_ids: tuple[int, ...]
    cached_tokens: int


@dataclass(frozen=True)
class PrefixAllocation:
    """The blocks a request got for its ``num_tokens``-token prompt, in logical order: the first
    ``num_cached_blocks`` came from the cache (their KV is already there, ``cached_tokens`` of
    them); the rest are fresh, for the ``tokens_to_compute`` tokens the prefill must compute."""

    block_ids: tuple[int, ...]
    num_tokens: int
    num_cached_blocks: int
    cached_tokens: int

    @property
    def tokens_to_compute(self) -> int:
        """Prompt tokens the prefill must still compute (at least 1)."""
        return self.num_tokens - self.cached_tokens


class PrefixCache:
    """Automatic prefix caching over ``pool``, by the course's rules or vLLM v1's (the module
    docstring says where they differ).

    ``eviction`` chooses the block :meth:`allocate` evicts (:data:`EVICTIONS`): ``"lru"`` takes the
    pool's free-queue order, O(1), as vLLM's v0 and v1 do; ``"lfu"`` scans the free blocks, O(free
    blocks). ``naming`` (:data:`NAMINGS`) says when a full block gets its name: ``"computed"``, once
    :meth:`register` is called after its KV is written (the course's default); ``"allocated"``, as
    soon as :meth:`allocate` or :meth:`grow` hands it out (vLLM v1's). The pool's own options give
    v1's duplicate copies and free order. ``naming="allocated"`` on a pool without
    ``keep_duplicates`` is a mix vLLM never runs (the tests use it to show one rule at a time):
    there a second copy of a named block stays unnamed, and a later :meth:`grow` of its sequence
    names it once the first copy has been evicted; :meth:`like_vllm_v1` sets both.

    ``root`` is the chained hashes' root (:data:`~kvcourse.blocks.hashing.ROOT_HASH`); give two
    models different roots so that they never share blocks. The counters, for the hit rate:
    ``queries`` (prompts looked up by :meth:`allocate`), ``queried_blocks`` (their full blocks
    that could be reused, i.e. before the last token) and ``hit_blocks`` (those that were).
    """

    def __init__(
        self,
        pool: BlockPool,
        *,
        eviction: str = "lru",
        root: bytes = ROOT_HASH,
        naming: str = "computed",
    ) -> None:
        if not isinstance(pool, BlockPool):
            raise TypeError(f"PrefixCache needs a BlockPool, got {pool!r}")
        if eviction not in EVICTIONS:
            raise ValueError(f"eviction must be one of {EVICTIONS}, got {eviction!r}")
        if naming not in NAMINGS:
            raise ValueError(f"naming must be one of {NAMINGS}, got {naming!r}")
        self.eviction = eviction
        self.naming = naming
        self._uses: dict[int, int] = {}  # block -> requests that used it since it was filled
        self._last_use: dict[int, int] = {}  # block -> the query that used it last

        if not isinstance(root, bytes) or not root:
            raise TypeError(f"root must be non-empty bytes such as ROOT_HASH, got {root!r}")
        self._pool = pool
        self._root = root
        self.queries = 0
        self.queried_blocks = 0
        self.hit_blocks = 0

    @classmethod
    def like_vllm_v1(
        cls, num_blocks: int, block_size: int, *, root: bytes = ROOT_HASH
    ) -> PrefixCache:
        """A cache with vLLM v1's rules (release v0.33.0) on a new pool of ``num_blocks`` blocks
        of ``block_size`` slots: blocks named at allocation, generated blocks named as they fill
        (:meth:`grow`), duplicate copies named, blocks without a hash reused before cached ones
        are evicted, LRU."""
        pool = BlockPool(num_blocks, block_size, uncached_first=True, keep_duplicates=True)
        return cls(pool, root=root, naming="allocated")

    @property
    def pool(self) -> BlockPool:
        """The block pool the cache names blocks in."""
        return self._pool

    @property
    def block_size(self) -> int:
        """Tokens per block."""
        return self._pool.block_size

    @property
    def hit_rate(self) -> float:
        """``hit_blocks / queried_blocks`` so far (0.0 before any reusable block was asked for)."""
        return self.hit_blocks / self.queried_blocks if self.queried_blocks else 0.0

    def match(self, tokens: Sequence[int]) -> PrefixMatch:
        """The leading run of ``tokens``' full blocks that the pool caches, stopping one token
        short of the end (changes nothing). Raises ``ValueError`` for an empty prompt."""
        if not isinstance(tokens, Sequence) or isinstance(tokens, (str, bytes)) or not tokens:
            raise ValueError(f"a prompt is a non-empty sequence of token ids, got {tokens!r}")
        hashes = tuple(chained_block_hashes(tokens, self.block_size, root=self._root))
        reusable = (len(tokens) - 1) // self.block_size  # the last token is always computed
        found = []
        for h in hashes[:reusable]:
            block_id = self._pool.cached_block(h)
            if block_id is None:
                break
            found.append(block_id)
        return PrefixMatch(hashes, tuple(found), len(found) * self.block_size)

    def take(self, tokens: Sequence[int]) -> PrefixMatch:
        """Look ``tokens`` up and take one reference on each block of the cached leading run (a
        used block is shared, a free cached one revived), counting the lookup; for a KV cache
        that allocates the rest of the prompt's blocks itself as it writes them
        (:class:`~kvcourse.kv.prefix_cache.PrefixCachingKVCache`). Give the blocks back with
        :meth:`free`."""
        found = self.match(tokens)
        self._take(found, len(tokens))
        return found

    def _take(self, found: PrefixMatch, num_tokens: int) -> None:
        """One reference on each block of ``found``'s cached run, and the lookup counted."""
        for h in found.hashes[: len(found.block_ids)]:
            block_id = self._pool.touch(h)
            self._uses[block_id] = self._uses.get(block_id, 0) + 1
            self._last_use[block_id] = self.queries
        self.queries += 1
        self.queried_blocks += (num_tokens - 1) // self.block_size
        self.hit_blocks += len(found.block_ids)

    def allocate(self, tokens: Sequence[int]) -> PrefixAllocation:
        """The blocks for a new prompt ``tokens``: the cached leading run (one reference each,
        as :meth:`take`) and fresh blocks for the rest, all or nothing; under
        ``naming="allocated"`` the prompt's full blocks are named at once (vLLM v1). Raises
        :class:`~kvcourse.blocks.errors.OutOfBlocksError`, changing nothing, when the pool lacks
        free blocks for the part that is not cached."""
        found = self.match(tokens)
        pool = self._pool
        fresh = -(-len(tokens) // self.block_size) - len(found.block_ids)
        revived = sum(1 for b in found.block_ids if pool.is_free(b))
        if fresh > pool.num_free - revived:
            raise OutOfBlocksError(
                f"a {len(tokens)}-token prompt needs {fresh} fresh blocks beyond its "
                f"{len(found.block_ids)} cached ones, but only {pool.num_free - revived} of the "
                f"pool's {pool.num_blocks} blocks are free; free or preempt a sequence first"
            )
        self._take(found, len(tokens))
        if self.eviction == "lru":
            new = pool.allocate_many(fresh)
        else:
            new = [
                pool.allocate_block(min(pool.free_queue(), key=self._lfu_rank))
                for _ in range(fresh)
            ]
        for block_id in new:
            self._uses[block_id] = 1
            self._last_use[block_id] = self.queries
        block_ids = (*found.block_ids, *new)
        if self.naming == "allocated":
            self._name(block_ids, found.hashes)
        return PrefixAllocation(block_ids, len(tokens), len(found.block_ids), found.cached_tokens)

    def grow(self, block_ids: Sequence[int], tokens: Sequence[int]) -> list[int]:
        """A decoding sequence grows: it holds ``block_ids`` (logical order) and now ``tokens``,
        its prompt and the tokens generated so far, the newest about to be written. Takes the
        fresh blocks the new tokens need from the pool, all or nothing
        (:class:`~kvcourse.blocks.errors.OutOfBlocksError`), and returns them; append them to the
        sequence's blocks. Under ``naming="allocated"`` every full block of ``tokens`` is named
        now, those filled by generated tokens included, as vLLM v1 does (``allocate_slots`` then
        ``cache_blocks``, v0.33.0); under ``"computed"`` call :meth:`register` with the tokens
        once their KV is written."""
        if not isinstance(tokens, Sequence) or isinstance(tokens, (str, bytes)):
            raise TypeError(f"tokens must be a sequence of token ids, got {tokens!r}")
        ids = list(block_ids)
        named = self.naming == "allocated"
        hashes = chained_block_hashes(tokens, self.block_size, root=self._root) if named else []
        fresh = -(-len(tokens) // self.block_size) - len(ids)
        if fresh < 0:
            raise ValueError(
                f"{len(tokens)} tokens fill {-(-len(tokens) // self.block_size)} blocks, but the "
                f"sequence already holds {len(ids)}; pass all of its tokens, prompt and output"
            )
        new = self._pool.allocate_many(fresh)
        for block_id in new:
            self._uses[block_id] = 1
            self._last_use[block_id] = self.queries
        self._name((*ids, *new), hashes)
        return new

    def _name(self, block_ids: Sequence[int], hashes: Sequence[bytes]) -> int:
        """Give each full block its hash (the blocks and hashes in logical order); returns how
        many blocks hold their hash now."""
        return sum(
            self._pool.set_block_hash(block_id, h) == block_id
            for block_id, h in zip(block_ids, hashes, strict=False)
        )

    def _lfu_rank(self, block_id: int) -> tuple[int, int, int]:
        """LFU's order of free blocks to evict: blocks holding nothing first, then the fewest
        uses, then the least recent use."""
        if self._pool.block_hash(block_id) is None:
            return (0, 0, 0)
        return (1, self._uses.get(block_id, 0), self._last_use.get(block_id, 0))

    def register(self, block_ids: Sequence[int], tokens: Sequence[int]) -> int:
        """Name the full blocks of a sequence whose KV for ``tokens`` is now in ``block_ids``
        (logical order), so that later prompts can hit them; returns how many blocks hold their
        hash now. Pass the prompt to name the prompt's blocks, the prompt and the generated tokens
        to name the blocks generation filled too (as vLLM v1 and nano-vllm do). A block whose
        prefix another block already caches keeps no name (the first computed copy stays the
        cached one), unless the pool keeps duplicates. Raises ``ValueError`` if ``block_ids`` is
        too short for ``tokens``."""
        hashes = chained_block_hashes(tokens, self.block_size, root=self._root)
        if len(block_ids) < -(-len(tokens) // self.block_size):
            raise ValueError(
                f"{len(tokens)} tokens need {-(-len(tokens) // self.block_size)} blocks, "
                f"got {len(block_ids)}"
            )
        return self._name(block_ids, hashes)

    def free(self, block_ids: Sequence[int]) -> None:
        """Give a finished sequence's blocks back, last block first: each drops one reference and,
        at zero, joins the free queue still cached (evicted only when a fresh block needs it);
        a block without a hash joins it by the pool's rule (the head, with ``uncached_first``)."""
        self._pool.release_many(reversed(tuple(block_ids)))
