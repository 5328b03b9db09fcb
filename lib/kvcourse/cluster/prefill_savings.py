"""What a prefix cache saves a cluster, and what it costs to keep (§8.5): prefill GPU time against
cache capacity, and the storage those blocks need.

A trace's request prefills its prompt; with a prefix cache it prefills only what follows its
prefix hit (:mod:`kvcourse.cluster.prefix_replay`), attending to the cached tokens as well. Its
FLOPs are :func:`~kvcourse.sizing.prefill_flops` (linear layers plus causal attention over the
whole context) and they run on one :class:`~kvcourse.cluster.prefill_node.PrefillNode`, by
default the lecture's setting: LLaMA2-70B on 8 × A800 at 60 %. A hit of ``k`` blocks saves ``k ×
block_size`` prompt tokens, but never the last one: at least one token is always prefilled (its
logits choose the first output token), so a prompt whose every block hit still computes one.

The price is storage: one 512-token block of LLaMA2-70B's KV is 168 MB (80 layers, 8 KV heads of
128, BF16), so 10,000 blocks are 1.68 TB, against 0.64 TB of HBM in a whole 8-GPU node, most of
it taken by the weights. A cache that hits often cannot live in GPU memory: Mooncake keeps it in
the cluster's CPU memory and SSDs (§9).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kvcourse._checks import check_positive_int
from kvcourse.cluster.prefill_node import DEFAULT_NODE, PrefillNode
from kvcourse.cluster.prefix_replay import replay_prefix_cache
from kvcourse.sizing import kv_bytes_per_token, prefill_flops
from kvcourse.specs import LLAMA2_70B, ModelSpec
from kvcourse.traces import Trace

__all__ = [
    "PrefillSavings",
    "kv_block_bytes",
    "node_hbm_bytes",
    "prefill_gpu_seconds",
    "prefill_savings",
]


def kv_block_bytes(model: ModelSpec = LLAMA2_70B, block_size: int = 512) -> int:
    """Bytes of KV in one block of ``block_size`` tokens of ``model``; LLaMA2-70B's 512-token block
    is 168 MB, and 10,000 of them 1.68 TB:

    >>> round(kv_block_bytes() / 1e6), round(10_000 * kv_block_bytes() / 1e12, 2)
    (168, 1.68)
    """
    return kv_bytes_per_token(model) * check_positive_int("block_size", block_size)


def node_hbm_bytes(node: PrefillNode = DEFAULT_NODE) -> int:
    """GPU memory of a whole ``node`` (:attr:`PrefillNode.memory_bytes`; 8 × A800-80GB: 0.64 TB):

    >>> node_hbm_bytes() / 1e12
    0.64
    """
    return _check_node(node).memory_bytes


def _check_node(node: object) -> PrefillNode:
    if not isinstance(node, PrefillNode):
        raise TypeError(f"node must be a kvcourse.cluster.PrefillNode, got {node!r}")
    return node


def prefill_gpu_seconds(
    trace: Trace, hits: Sequence[int] | None = None, *, node: PrefillNode = DEFAULT_NODE
) -> float:
    """Seconds of prefill for every request of ``trace`` on ``node`` (by default LLaMA2-70B on
    8 × A800 at 60 % of peak), with ``hits[i]`` blocks of request ``i``'s prefix already cached
    (none when ``hits`` is None). Cached tokens are ``min(hits[i] × block_size, prompt_len − 1)``.
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"trace must be a kvcourse.traces.Trace, got {trace!r}")
    if hits is not None and len(hits) != trace.num_requests:
        raise ValueError(
            f"hits must give one count per request ({trace.num_requests}), got {len(hits)}"
        )
    node = _check_node(node)
    model = node.model
    flops = 0.0
    size = trace.block_size
    for i, request in enumerate(trace.requests):
        if request.prompt_len == 0:
            continue
        cached = 0 if hits is None else min(int(hits[i]) * size, request.prompt_len - 1)
        flops += prefill_flops(model, request.prompt_len - cached, cached)
    return node.seconds(flops)


@dataclass(frozen=True)
class PrefillSavings:
    """One point of §8.5's curve: replaying ``trace`` through a cache of ``capacity`` blocks
    (None: infinite) under ``eviction`` hit ``hit_rate`` of its blocks, and its prefills took
    ``seconds_with`` instead of ``seconds_without``; ``storage_bytes`` is what the cache holds
    when full."""

    trace: str
    eviction: str
    capacity: int | None
    hit_rate: float
    seconds_without: float
    seconds_with: float
    storage_bytes: float

    @property
    def speedup(self) -> float:
        """``seconds_without / seconds_with``: how much less prefill GPU time the cache costs."""
        return self.seconds_without / self.seconds_with


def prefill_savings(
    trace: Trace,
    capacities: Sequence[int | None] = (1_000, 10_000, None),
    *,
    eviction: str = "lru",
    node: PrefillNode = DEFAULT_NODE,
    tail_first: bool = True,
) -> list[PrefillSavings]:
    """Replay ``trace`` through a prefix cache with ``eviction`` (``"lru"`` or ``"lfu"``) at each
    capacity (blocks; None is infinite) and convert its hits into prefill GPU time on ``node``
    (:func:`prefill_gpu_seconds`), beside the storage the cache needs (the distinct blocks it can
    hold, at :func:`kv_block_bytes` of the node's model). ``tail_first`` is the replay's order
    (:func:`~kvcourse.cluster.prefix_replay.replay_prefix_cache`): by default a request's last
    block is evicted first, as in vLLM v1; ``False`` evicts its first block first."""
    without = prefill_gpu_seconds(trace, node=node)
    block = kv_block_bytes(node.model, trace.block_size)
    points = []
    for capacity in capacities:
        result = replay_prefix_cache(
            trace.block_id_lists(), capacity, eviction, tail_first=tail_first
        )
        held = trace.num_distinct_blocks if result.capacity is None else result.capacity
        points.append(
            PrefillSavings(
                trace=trace.name,
                eviction=result.eviction,
                capacity=result.capacity,
                hit_rate=result.hit_rate,
                seconds_without=without,
                seconds_with=prefill_gpu_seconds(trace, result.hits, node=node),
                storage_bytes=float(held * block) if math.isfinite(held) else math.inf,
            )
        )
    return points
