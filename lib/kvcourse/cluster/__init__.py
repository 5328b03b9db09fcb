"""Cluster-level KV caching (§8.4, §9): what a KV cache shared by a whole serving cluster would
hold, replayed over request traces.

* :mod:`kvcourse.cluster.prefix_replay`: a global prefix cache of a given capacity replayed over a
  trace of block-id lists under LRU or LFU, and its hit rate against capacity (Mooncake Table 1).
"""

from __future__ import annotations

from kvcourse.cluster.prefix_replay import (
    POLICIES,
    ReplayResult,
    hit_rate_curve,
    replay_prefix_cache,
)

__all__ = [
    "POLICIES",
    "ReplayResult",
    "hit_rate_curve",
    "replay_prefix_cache",
]
