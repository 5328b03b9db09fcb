"""A global prefix cache replayed over a block-id trace (§8.4; Table 1 of Mooncake's arXiv
report): how many of the trace's blocks a cache of ``capacity`` blocks already holds, under LRU or
LFU eviction.

A trace is a list of requests, each the list of its full blocks' ids, in order (ints, bytes, any
hashable values). Equal ids mean equal *whole prefixes* (chained block hashes, §8.2), as in the
Mooncake traces' ``hash_ids`` (512-token blocks): so one request never lists the same id twice,
and that is refused. :func:`replay_prefix_cache` counts exactly this:

1. **One request at a time, in trace order.** A request with blocks ``b_1 .. b_n`` first looks
   itself up: its *prefix hit* is the largest ``k`` such that ``b_1 .. b_k`` are all in the cache
   (the first miss ends the run; a block after a miss counts as a miss even if it is cached,
   because its KV cannot be used without the blocks before it).
2. **Then all of its blocks are in the cache** (at most the capacity ``C`` of them: see 4). Each
   one is *referenced* once: a cached one (hit or not) is touched, a missing one inserted. By
   default (*tail first*) they are referenced last block first, ``b_n`` .. ``b_1``, so afterwards
   ``b_1`` is the most recently used block of all and, of a request's blocks, its last is evicted
   first and its first, the one other prompts share, last. That is vLLM v1's order (release
   v0.33.0: ``SingleTypeKVCacheManager.free`` in ``vllm/v1/core/single_type_kv_cache_manager.py``
   hands a finished request's blocks to ``BlockPool.free_blocks`` reversed, which appends them to
   the free queue, whose head is evicted first) and
   :class:`~kvcourse.blocks.prefix_cache.PrefixCache`'s. ``tail_first=False`` (*head first*)
   references them in request order, ``b_n`` the most recent, so a request's first block is
   evicted first: the rule of assignment a5's caches, which evict blocks in the order they were
   inserted;
3. **Evictions.** Each insertion into a full cache evicts one block that is *not* in the request:
   ``"lru"`` the least recently referenced; ``"lfu"`` the one referenced by the fewest requests
   since it last entered the cache, ties broken by least recent reference. A block's count starts
   at 1 when it is inserted and does not survive eviction: an evicted block that comes back starts
   at 1 again. ``evictions`` counts every block evicted.
4. **A request longer than the cache** (``n > C``) keeps its *first* ``C`` blocks: they are
   referenced as in 2, every other block is evicted (the request's later blocks too, if they were
   cached), and ``b_{C+1} .. b_n`` are not inserted. The first blocks are the ones a later request
   can hit: a prefix hit needs the blocks before it.
5. **Hit rate** = prefix-hit blocks / blocks, summed over the whole trace (block-weighted).
   ``request_hit_rate`` is the mean over requests with at least one block of hit blocks / blocks;
   ``requests_with_hit`` counts requests with a prefix hit of at least one block. A trace with no
   blocks has hit rates 0.0.

``capacity=None`` (or ``math.inf``) is an infinite cache: nothing is evicted, so a block hits
exactly when it was seen before and every block before it in its request hit too, the ceiling of
Mooncake's table. With every request at most ``C`` blocks long, the head-first ``"lru"`` replay
(``tail_first=False``) is plain LRU over the trace's blocks one by one (look up, then touch or
insert and evict the oldest), counting the leading run of hits; a request longer than the cache is
where 4 differs from that. LRU is a stack algorithm here too, head or tail first: a larger cache
always holds what a smaller one holds, so its hit rate never drops as the capacity grows. LFU's
can.

Speed: LRU is an ``OrderedDict`` in recency order; LFU keeps one ``OrderedDict`` per count (least
recent first) and a heap of the counts in use, so every reference and eviction is O(1) (O(log)
for a new count). ``bench/prefix_replay_speed.py`` times both, checks included, against their
budget.
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from kvcourse._checks import as_index

__all__ = ["EVICTIONS", "ReplayResult", "hit_rate_curve", "replay_prefix_cache"]

#: The evictions :func:`replay_prefix_cache` knows: least recently or least frequently used.
EVICTIONS: tuple[str, ...] = ("lru", "lfu")


@dataclass(frozen=True)
class ReplayResult:
    """What one replay of a trace through a prefix cache counted (module docstring, rules 1-5).

    ``eviction`` is the rule that chose what to evict (``"lru"`` or ``"lfu"``), ``capacity``
    ``None`` for an infinite cache, ``evictions`` the blocks it evicted. ``hits[i]`` is request
    ``i``'s prefix hit in blocks. ``hit_rate`` is ``hit_blocks / total_blocks`` (the number
    in Table 1 of Mooncake's arXiv report). ``tail_first``: a request's last block was evicted
    before its first (vLLM v1's order, the default), not after (head first; rule 2).
    """

    eviction: str
    capacity: int | None
    num_requests: int
    total_blocks: int
    hit_blocks: int
    hit_rate: float
    request_hit_rate: float
    requests_with_hit: int
    evictions: int
    hits: tuple[int, ...]
    tail_first: bool = True

    @property
    def miss_blocks(self) -> int:
        """Blocks whose KV a request had to compute (prefill) because the cache lacked them."""
        return self.total_blocks - self.hit_blocks


def replay_prefix_cache(
    requests: Sequence[Sequence[Hashable]],
    capacity: int | float | None,
    eviction: str = "lru",
    *,
    tail_first: bool = True,
) -> ReplayResult:
    """Replay a trace of block-id lists through a global prefix cache of ``capacity`` blocks and
    count its prefix hits, by the rules of the module docstring.

    ``requests`` is the trace in arrival order, each request the list of its blocks' ids;
    ``capacity`` a number of blocks (1 or more), or ``None`` / ``math.inf`` for an infinite cache;
    ``eviction`` ``"lru"`` or ``"lfu"``; ``tail_first`` (the default) evicts a request's blocks
    last block first, as vLLM v1 does (rule 2); ``tail_first=False`` evicts them first block
    first, as assignment a5's caches do.

    Blocks 1, 2 are a shared system prompt. Request 3's two new blocks push out of a 4-block LRU
    cache the tails 3 and 4, each request's last block, so request 4 hits blocks 1 and 2:

    >>> trace = [[1, 2, 3], [1, 2, 4], [5, 6], [1, 2, 3]]
    >>> lru = replay_prefix_cache(trace, capacity=4, eviction="lru")
    >>> lru.hits, lru.hit_blocks, lru.total_blocks, lru.evictions
    ((0, 2, 0, 2), 4, 11, 3)
    >>> lfu = replay_prefix_cache(trace, capacity=4, eviction="lfu")
    >>> lfu.hits, lfu.hit_blocks, lfu.hit_rate, lfu.evictions
    ((0, 2, 0, 2), 4, 0.36363636363636365, 3)

    Head first, the shared prefix is each request's least recently used block, so LRU loses it
    (the cache then holds 2, 4, 5, 6: block 1 went first); LFU keeps it, evicting the once-used
    3 and 4:

    >>> head = replay_prefix_cache(trace, capacity=4, eviction="lru", tail_first=False)
    >>> head.hits, head.evictions
    ((0, 2, 0, 0), 4)
    """
    trace = _check_trace(requests)
    return _replay(
        trace, _check_capacity(capacity), _check_eviction(eviction), _check_flag(tail_first)
    )


def hit_rate_curve(
    requests: Sequence[Sequence[Hashable]],
    capacities: Iterable[int | float | None],
    evictions: Sequence[str] = EVICTIONS,
    *,
    tail_first: bool = True,
) -> dict[str, list[ReplayResult]]:
    """Table 1 of Mooncake's arXiv report, on a trace: one replay per eviction and capacity, as
    ``{eviction: [result for each capacity, in the order given]}``.

    The trace is checked once for all the replays; ``capacities`` may include ``None`` or
    ``math.inf`` (an infinite cache, the ceiling of the curve). ``tail_first`` (the default):
    evict each request's blocks last block first, vLLM v1's order; ``tail_first=False``: first
    block first, assignment a5's order (module docstring, rule 2).
    """
    tail_first = _check_flag(tail_first)
    trace = _check_trace(requests)
    if isinstance(capacities, (str, bytes)) or not isinstance(capacities, Iterable):
        raise TypeError(
            f"capacities must be a list of cache sizes in blocks, e.g. [1000, 10000, None], "
            f"got {capacities!r}"
        )
    sizes = [_check_capacity(c) for c in capacities]
    if not sizes:
        raise ValueError("capacities is empty; pass at least one cache size, e.g. [1000, None]")
    if isinstance(evictions, str) or not isinstance(evictions, Iterable):
        raise TypeError(
            f"evictions must be a list of eviction names, e.g. ['lru'], got {evictions!r}"
        )
    names = [_check_eviction(e) for e in evictions]
    if not names:
        raise ValueError(f"evictions is empty; pass some of {list(EVICTIONS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"evictions lists an eviction twice ({names}); list each once")
    return {name: [_replay(trace, size, name, tail_first) for size in sizes] for name in names}


# ---------------------------------------------------------------------------- the replays


def _replay(
    trace: list[Sequence[Hashable]], capacity: int | None, eviction: str, tail_first: bool
) -> ReplayResult:
    if capacity is None:
        hits, evictions = _replay_infinite(trace), 0
    elif eviction == "lru":
        hits, evictions = _replay_lru(trace, capacity, tail_first)
    else:
        hits, evictions = _replay_lfu(trace, capacity, tail_first)
    total = sum(map(len, trace))
    hit_blocks = sum(hits)
    fractions = [h / len(blocks) for h, blocks in zip(hits, trace, strict=True) if blocks]
    return ReplayResult(
        eviction=eviction,
        capacity=capacity,
        num_requests=len(trace),
        total_blocks=total,
        hit_blocks=hit_blocks,
        hit_rate=hit_blocks / total if total else 0.0,
        request_hit_rate=math.fsum(fractions) / len(fractions) if fractions else 0.0,
        requests_with_hit=sum(1 for h in hits if h),
        evictions=evictions,
        hits=tuple(hits),
        tail_first=tail_first,
    )


def _leading_run(blocks: Sequence[Hashable], cache: object) -> int:
    """How many of ``blocks``, from the first, are in ``cache`` before the first one that is not."""
    hit = 0
    for block in blocks:
        if block not in cache:  # type: ignore[operator]
            break
        hit += 1
    return hit


def _replay_infinite(trace: list[Sequence[Hashable]]) -> list[int]:
    seen: set[Hashable] = set()
    hits = []
    for blocks in trace:
        hits.append(_leading_run(blocks, seen))
        seen.update(blocks)
    return hits


def _replay_lru(
    trace: list[Sequence[Hashable]], capacity: int, tail_first: bool
) -> tuple[list[int], int]:
    cache: OrderedDict[Hashable, None] = OrderedDict()  # least recently referenced first
    touch = cache.move_to_end
    pop_oldest = cache.popitem
    hits = []
    evictions = 0
    for blocks in trace:
        hit = 0
        for block in blocks:
            if block not in cache:
                break
            if not tail_first:
                touch(block)  # the leading run, in request order
            hit += 1
        hits.append(hit)
        kept = blocks if len(blocks) <= capacity else blocks[:capacity]
        rest = reversed(kept) if tail_first else (kept[i] for i in range(hit, len(kept)))
        for block in rest:  # tail first: the first block is referenced last, evicted last
            if block in cache:
                touch(block)
            else:
                cache[block] = None
        excess = len(cache) - capacity
        if excess > 0:  # the request's blocks are at the end, so these are all older blocks
            evictions += excess
            for _ in range(excess):
                pop_oldest(last=False)
    return hits, evictions


def _replay_lfu(
    trace: list[Sequence[Hashable]], capacity: int, tail_first: bool
) -> tuple[list[int], int]:
    count: dict[Hashable, int] = {}  # the cached blocks and their reference counts
    buckets: dict[int, OrderedDict[Hashable, None]] = {}  # count -> blocks, least recent first
    heap: list[int] = []  # the counts that may have a bucket (lazily cleaned)
    in_heap: set[int] = set()
    hits = []
    evictions = 0
    for blocks in trace:
        hits.append(_leading_run(blocks, count))
        kept = blocks if len(blocks) <= capacity else blocks[:capacity]
        if tail_first:  # referenced last block first: among equal counts, the tail goes first
            kept = kept[::-1]
        # Take the request's cached blocks out of their buckets: they cannot be evicted now, and
        # they go back in at the most recent end of the next bucket.
        new_counts = []
        for block in kept:
            old = count.get(block, 0)
            if old:
                bucket = buckets[old]
                del bucket[block]
                if not bucket:
                    del buckets[old]
            new_counts.append(old + 1)
        excess = len(count) + new_counts.count(1) - capacity
        if excess > 0:
            evictions += excess
            while excess:
                lowest = heap[0]
                bucket = buckets.get(lowest)
                if bucket is None:
                    heapq.heappop(heap)
                    in_heap.discard(lowest)
                    continue
                while excess and bucket:
                    victim, _ = bucket.popitem(last=False)
                    del count[victim]
                    excess -= 1
                if not bucket:
                    del buckets[lowest]
        for block, new in zip(kept, new_counts, strict=True):
            count[block] = new
            bucket = buckets.get(new)
            if bucket is None:
                bucket = buckets[new] = OrderedDict()
                if new not in in_heap:
                    heapq.heappush(heap, new)
                    in_heap.add(new)
            bucket[block] = None
    return hits, evictions


# ---------------------------------------------------------------------------- argument checks


def _check_capacity(capacity: object) -> int | None:
    """``None`` for an infinite cache, else the capacity as an ``int`` of at least 1."""
    if capacity is None:
        return None
    if isinstance(capacity, float) and capacity == math.inf:
        return None
    capacity = as_index(capacity, "capacity")
    if capacity < 1:
        raise ValueError(
            f"capacity must be at least 1 block, got {capacity}; pass a number of blocks, or "
            f"None (or math.inf) for an infinite cache"
        )
    return capacity


def _check_flag(tail_first: object) -> bool:
    if not isinstance(tail_first, bool):
        raise TypeError(f"tail_first must be True or False, got {tail_first!r}")
    return tail_first


def _check_eviction(eviction: object) -> str:
    if not isinstance(eviction, str):
        raise TypeError(f"eviction must be one of {list(EVICTIONS)}, got {eviction!r}")
    if eviction not in EVICTIONS:
        raise ValueError(f"unknown eviction {eviction!r}; pass one of {list(EVICTIONS)}")
    return eviction


def _check_trace(requests: object) -> list[Sequence[Hashable]]:
    """The trace as a list of lists or tuples of block ids, each request checked."""
    if isinstance(requests, (str, bytes, bytearray)) or not isinstance(requests, Iterable):
        raise TypeError(
            f"requests must be a list of requests, each a list of block ids, got {requests!r}"
        )
    trace = []
    for index, request in enumerate(requests):
        if isinstance(request, (list, tuple)):
            blocks = request
        elif isinstance(request, (str, bytes, bytearray, dict, set, frozenset)) or not isinstance(
            request, Iterable
        ):
            raise TypeError(
                f"request {index} must be a list of block ids, got {request!r} "
                f"({type(request).__name__}); did you pass one request instead of a list of them?"
            )
        else:
            tolist = getattr(request, "tolist", None)  # a NumPy array: plain ints hash faster
            blocks = tolist() if callable(tolist) else list(request)
        try:
            distinct = len(set(blocks))
        except TypeError:
            bad = next(b for b in blocks if not _hashable(b))
            raise TypeError(
                f"request {index} has a block id that cannot be hashed: {bad!r} "
                f"({type(bad).__name__}); use ints or bytes"
            ) from None
        if distinct != len(blocks):
            seen: set[Hashable] = set()
            repeated = next(b for b in blocks if b in seen or seen.add(b))
            raise ValueError(
                f"request {index} lists block {repeated!r} twice; equal ids mean equal whole "
                f"prefixes, so a request's blocks are all different"
            )
        trace.append(blocks)
    return trace


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
