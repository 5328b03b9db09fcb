"""Cluster-level KV caching (§8.4, §8.5, §9): what a KV cache shared by a whole serving cluster
would hold, what it saves, where its KV lives, and how Mooncake places, prefills and turns away
requests around it. One module per job:

* :mod:`kvcourse.cluster.prefill_node`: the prefill node every model below prices its prefill
  on (model, GPUs, share of their peak; the lecture's LLaMA2-70B on 8 × A800 at 60 %);
* :mod:`kvcourse.cluster.prefix_replay`: a global prefix cache of a given capacity replayed over a
  trace of block-id lists under LRU or LFU eviction, and its hit rate against capacity (Table 1
  of Mooncake's arXiv report);
* :mod:`kvcourse.cluster.prefill_savings`: the prefill GPU time those hits save, and the storage
  the cache needs (§8.5);
* :mod:`kvcourse.cluster.storage_tiers`: storage for compute, reading a token's KV back from a
  memory tier against recomputing it (Exercise 8);
* :mod:`kvcourse.cluster.layerwise`: layer-wise prefill, the KV loads and stores of one request
  hidden behind its compute;
* :mod:`kvcourse.cluster.chunked_pipeline`: one long prompt prefilled on a pipeline of nodes in
  chunks;
* :mod:`kvcourse.cluster.conductor`: the Conductor's decision for one request, its time model and
  its four placements;
* :mod:`kvcourse.cluster.conductor_sim`: a prefill pool the Conductor drives over a trace, and the
  four placements compared;
* :mod:`kvcourse.cluster.overload`: a disaggregated cluster under overload, its requests and what a
  run counts;
* :mod:`kvcourse.cluster.rejection`: the three rejection rules, when an overloaded cluster turns a
  request away;
* :mod:`kvcourse.cluster.overload_sim`: the event simulation that runs them.
"""

from __future__ import annotations

from kvcourse.cluster.chunked_pipeline import (
    PipelineSchedule,
    PipelineSlot,
    chunk_lengths,
    chunked_pipeline,
)
from kvcourse.cluster.conductor import (
    ClusterView,
    ConductorConfig,
    Decision,
    Placement,
    PrefillCosts,
    RandomPlacement,
    cache_aware,
    cache_aware_replicating,
    check_decision,
    check_placement,
    estimate_ttft,
    load_balanced,
)
from kvcourse.cluster.conductor_sim import (
    PLACEMENT_NAMES,
    ConductorRun,
    compare_placements,
    simulate_conductor,
)
from kvcourse.cluster.layerwise import (
    INTERVAL_KINDS,
    SCHEDULES,
    LayerInterval,
    LayerTimes,
    LayerwiseTimeline,
    layer_times,
    layerwise_prefill,
)
from kvcourse.cluster.overload import (
    DEFAULT_CONFIG,
    OUTCOMES,
    OverloadConfig,
    OverloadRequest,
    OverloadResult,
    poisson_requests,
    prefill_seconds,
    trace_requests,
)
from kvcourse.cluster.overload_sim import (
    compare_rejection_rules,
    load_correlation,
    simulate_overload,
)
from kvcourse.cluster.prefill_node import DEFAULT_NODE, PrefillNode
from kvcourse.cluster.prefill_savings import (
    PrefillSavings,
    kv_block_bytes,
    node_hbm_bytes,
    prefill_gpu_seconds,
    prefill_savings,
)
from kvcourse.cluster.prefix_replay import (
    EVICTIONS,
    ReplayResult,
    hit_rate_curve,
    replay_prefix_cache,
)
from kvcourse.cluster.rejection import (
    REJECTION_RULE_LABELS,
    REJECTION_RULES,
    check_rejection_rule,
    predicted_decode_load,
    rejects_at_arrival,
)
from kvcourse.cluster.storage_tiers import (
    HBM_TIER,
    LOCAL_DRAM_TIER,
    NODE_SSD_TIER,
    NODE_TIERS,
    ONE_SSD_TIER,
    REMOTE_DRAM_TIER,
    TABLE_NODES,
    StorageTier,
    TierComparison,
    get_tier,
    mean_recompute_seconds_per_token,
    read_seconds_per_token,
    recompute_seconds_per_token,
    storage_vs_compute,
    tiers_losing_to_recompute,
)

__all__ = [
    "DEFAULT_CONFIG",
    "DEFAULT_NODE",
    "OUTCOMES",
    "OverloadConfig",
    "OverloadRequest",
    "OverloadResult",
    "poisson_requests",
    "prefill_seconds",
    "trace_requests",
    "REJECTION_RULES",
    "REJECTION_RULE_LABELS",
    "check_rejection_rule",
    "compare_rejection_rules",
    "load_correlation",
    "predicted_decode_load",
    "rejects_at_arrival",
    "simulate_overload",
    "HBM_TIER",
    "LOCAL_DRAM_TIER",
    "NODE_SSD_TIER",
    "NODE_TIERS",
    "ONE_SSD_TIER",
    "REMOTE_DRAM_TIER",
    "TABLE_NODES",
    "StorageTier",
    "TierComparison",
    "get_tier",
    "mean_recompute_seconds_per_token",
    "read_seconds_per_token",
    "recompute_seconds_per_token",
    "storage_vs_compute",
    "tiers_losing_to_recompute",
    "INTERVAL_KINDS",
    "SCHEDULES",
    "LayerInterval",
    "LayerTimes",
    "LayerwiseTimeline",
    "layer_times",
    "layerwise_prefill",
    "PipelineSchedule",
    "PipelineSlot",
    "chunk_lengths",
    "chunked_pipeline",
    "ClusterView",
    "ConductorConfig",
    "ConductorRun",
    "Decision",
    "PLACEMENT_NAMES",
    "Placement",
    "PrefillCosts",
    "RandomPlacement",
    "cache_aware",
    "cache_aware_replicating",
    "check_decision",
    "check_placement",
    "compare_placements",
    "estimate_ttft",
    "load_balanced",
    "simulate_conductor",
    "EVICTIONS",
    "PrefillNode",
    "PrefillSavings",
    "kv_block_bytes",
    "node_hbm_bytes",
    "prefill_gpu_seconds",
    "prefill_savings",
    "ReplayResult",
    "hit_rate_curve",
    "replay_prefix_cache",
]
