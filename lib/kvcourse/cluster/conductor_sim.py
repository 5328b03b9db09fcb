"""A prefill pool driven by a Conductor (§9.4): requests of a trace arrive, a placement puts each
on one of the prefill instances (or rejects it), and every instance serves its queue in order and
keeps the KV blocks it computed or pulled in a local LRU cache.

The model, stated once:

* an instance is one prefill node (:class:`~kvcourse.cluster.conductor.PrefillCosts`, by default
  LLaMA2-70B on 8 × A800 at 60 % of peak) that prefills one request at a time, first come first
  served; its *queue* when a request arrives is the time until it finishes the work already placed
  on it;
* its cache holds ``cache_blocks`` KV blocks (Mooncake's 512-token blocks, named by the trace's
  prefix-block ids) under LRU: a request placed on it touches its prefix hit and inserts the rest
  of its blocks as soon as it is placed (the Conductor knows where every block will be), evicting
  the least recently used blocks of other requests;
* a pulled prefix (hot-spot replication) crosses RDMA before the prefill starts, is counted as
  *tokens moved*, and stays in the puller's cache as a replica;
* a block counts as cached, locally or as a source to pull from, once the prefill that computes
  it has ended (its KV is then in the instance's store), so the Conductor's TTFT estimate is
  exactly what the request gets;
* the request's TTFT is the time from its arrival to the end of its prefill (the decode side and
  the layer-wise KV transfer to it, which overlaps the prefill, are left out here; §9.6 adds them).

A request's hit is the leading run of its blocks already cached where it runs, pulled or local;
hit rate = reused blocks / all blocks of the served requests, as on §8.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kvcourse._checks import check_positive_int, check_positive_number
from kvcourse.cluster.conductor import (
    ClusterView,
    ConductorConfig,
    Placement,
    RandomPlacement,
    cache_aware,
    cache_aware_replicating,
    check_decision,
    check_placement,
    load_balanced,
)
from kvcourse.traces import Trace

__all__ = ["PLACEMENT_NAMES", "ConductorRun", "compare_placements", "simulate_conductor"]

#: The four placements of the book's comparison, in the order the page lists them.
PLACEMENT_NAMES = ("random", "load-balanced", "cache-aware", "cache-aware + replication")


@dataclass(frozen=True)
class ConductorRun:
    """What one placement did with one trace: requests served and rejected, blocks reused, tokens
    prefilled and moved, and the TTFT of every served request in seconds (arrival order)."""

    placement: str
    num_requests: int
    rejected: int
    hit_blocks: int
    total_blocks: int
    tokens_computed: int
    prompt_tokens: int
    tokens_moved: int
    ttft_s: tuple[float, ...]
    requests_per_instance: tuple[int, ...]

    @property
    def served(self) -> int:
        """Requests that got a prefill instance."""
        return self.num_requests - self.rejected

    @property
    def hit_rate(self) -> float:
        """Reused blocks over all blocks of the served requests (nan if none was served)."""
        return self.hit_blocks / self.total_blocks if self.total_blocks else math.nan

    @property
    def mean_ttft_s(self) -> float:
        """Mean TTFT of the served requests, seconds (nan if none)."""
        return float(np.mean(self.ttft_s)) if self.ttft_s else math.nan

    @property
    def p90_ttft_s(self) -> float:
        """90th percentile TTFT of the served requests, seconds (nan if none)."""
        return float(np.percentile(self.ttft_s, 90)) if self.ttft_s else math.nan


class _Instance:
    """One prefill instance: when its queue drains, and its LRU block cache, each block with the
    time its KV is ready (the end of the prefill that computes or copies it)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.busy_until = 0.0
        self.cache: OrderedDict[int, float] = OrderedDict()  # least recently used first
        self.placed = 0

    def leading_run(self, blocks: Sequence[int], now: float) -> int:
        cache = self.cache
        hit = 0
        for block in blocks:
            if cache.get(block, math.inf) > now:
                break
            hit += 1
        return hit

    def touch(self, blocks: Sequence[int], ready: float | None = None) -> None:
        cache = self.cache
        for block in blocks[: self.capacity]:
            if block in cache:
                cache.move_to_end(block)
                if ready is not None and ready < cache[block]:
                    cache[block] = ready
            else:
                cache[block] = math.inf if ready is None else ready
        for _ in range(len(cache) - self.capacity):  # the newest blocks are this request's
            cache.popitem(last=False)


def simulate_conductor(
    trace: Trace,
    placement: Placement,
    *,
    config: ConductorConfig | None = None,
    num_instances: int = 8,
    cache_blocks: int = 3000,
    speedup: float = 1.0,
    name: str = "",
) -> ConductorRun:
    """Replay ``trace`` (arrivals ``speedup`` times faster) on ``num_instances`` prefill instances
    with ``cache_blocks``-block LRU caches, each request placed by ``placement(view, config)``.

    The placement's decision is checked (a valid instance, a prefix that instance or its source
    really holds); the TTFT is the simulator's own, from the decision's instance and prefix, not
    the placement's estimate.
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"trace must be a kvcourse.traces.Trace, got {trace!r:.80}")
    placement = check_placement(placement)
    config = ConductorConfig() if config is None else config
    if not isinstance(config, ConductorConfig):
        raise TypeError(f"config must be a kvcourse.cluster.ConductorConfig, got {config!r:.80}")
    if trace.block_size != config.costs.block_size:
        raise ValueError(
            f"the trace's blocks are {trace.block_size} tokens but the costs' are "
            f"{config.costs.block_size}: build PrefillCosts(block_size={trace.block_size})"
        )
    num_instances = check_positive_int("num_instances", num_instances)
    cache_blocks = check_positive_int("cache_blocks", cache_blocks)
    speedup = check_positive_number("speedup", speedup, " (1 replays the trace in real time)")
    costs = config.costs
    instances = [_Instance(cache_blocks) for _ in range(num_instances)]
    rejected = hit_blocks = total_blocks = computed = prompt = moved = 0
    ttfts: list[float] = []
    for request in trace.requests:
        if request.prompt_len == 0:
            continue
        now = request.arrival_s / speedup
        blocks = request.block_ids
        view = ClusterView(
            request.prompt_len,
            tuple(max(0.0, inst.busy_until - now) for inst in instances),
            tuple(inst.leading_run(blocks, now) for inst in instances),
        )
        decision = check_decision(placement(view, config), view)
        if decision.instance is None:
            rejected += 1
            continue
        chosen = instances[decision.instance]
        own = view.prefix_blocks[decision.instance]
        pulled = max(0, decision.cached_blocks - own) if decision.pull_from is not None else 0
        begin = max(now, chosen.busy_until)
        if pulled:
            instances[decision.pull_from].touch(blocks[: decision.cached_blocks])
        cached_tokens = costs.cached_tokens(request.prompt_len, decision.cached_blocks)
        transfer = costs.transfer_s(pulled)
        chosen.busy_until = (
            begin + transfer + costs.prefill_s(request.prompt_len, decision.cached_blocks)
        )
        chosen.touch(blocks, ready=chosen.busy_until)
        chosen.placed += 1
        ttfts.append(chosen.busy_until - now)
        hit_blocks += decision.cached_blocks
        total_blocks += len(blocks)
        computed += request.prompt_len - cached_tokens
        prompt += request.prompt_len
        moved += min(pulled * costs.block_size, request.prompt_len)
    return ConductorRun(
        placement=name or getattr(placement, "__name__", type(placement).__name__),
        num_requests=sum(1 for r in trace.requests if r.prompt_len > 0),
        rejected=rejected,
        hit_blocks=hit_blocks,
        total_blocks=total_blocks,
        tokens_computed=computed,
        prompt_tokens=prompt,
        tokens_moved=moved,
        ttft_s=tuple(ttfts),
        requests_per_instance=tuple(inst.placed for inst in instances),
    )


def compare_placements(
    trace: Trace,
    *,
    config: ConductorConfig | None = None,
    num_instances: int = 8,
    cache_blocks: int = 3000,
    speedup: float = 1.0,
    seed: int = 0,
    placements: Mapping[str, Placement] | None = None,
) -> dict[str, ConductorRun]:
    """The book's comparison: ``trace`` replayed under random, load-balanced, cache-aware and
    cache-aware-with-replication placement (or the given ``placements``), the same cluster for
    each. Returns ``{placement name: ConductorRun}`` in :data:`PLACEMENT_NAMES` order."""
    if placements is None:
        placements = dict(
            zip(
                PLACEMENT_NAMES,
                (RandomPlacement(seed), load_balanced, cache_aware, cache_aware_replicating),
                strict=True,
            )
        )
    return {
        label: simulate_conductor(
            trace,
            placement,
            config=config,
            num_instances=num_instances,
            cache_blocks=cache_blocks,
            speedup=speedup,
            name=label,
        )
        for label, placement in placements.items()
    }
