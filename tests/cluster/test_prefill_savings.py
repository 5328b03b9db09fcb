"""Prefill GPU time a prefix cache saves, and its storage (kvcourse.cluster.prefill_savings)."""

from __future__ import annotations

import math

import pytest

from kvcourse.cluster import (
    PrefillNode,
    kv_block_bytes,
    node_hbm_bytes,
    prefill_gpu_seconds,
    prefill_savings,
)
from kvcourse.sizing import prefill_flops
from kvcourse.specs import LLAMA2_70B
from kvcourse.traces import Trace, TraceRequest, synthetic_prefix_trace


def test_storage_figures_of_the_lecture():
    assert round(kv_block_bytes() / 1e6) == 168  # one 512-token block of LLaMA2-70B's KV
    assert round(10_000 * kv_block_bytes() / 1e12, 2) == 1.68
    assert node_hbm_bytes() / 1e12 == 0.64


def tiny_trace() -> Trace:
    return Trace(
        name="tiny",
        block_size=4,
        requests=(
            TraceRequest(0.0, 10, 1, (1, 2, 3)),
            TraceRequest(1.0, 8, 1, (1, 2)),  # both blocks cached: still computes one token
        ),
    )


def test_prefill_time_counts_cached_tokens_but_always_computes_one():
    trace = tiny_trace()
    rate = 8 * 312e12 * 0.6
    assert math.isclose(
        prefill_gpu_seconds(trace),
        (prefill_flops(LLAMA2_70B, 10) + prefill_flops(LLAMA2_70B, 8)) / rate,
    )
    with_cache = prefill_gpu_seconds(trace, [0, 2])
    assert math.isclose(
        with_cache, (prefill_flops(LLAMA2_70B, 10) + prefill_flops(LLAMA2_70B, 1, 7)) / rate
    )
    with pytest.raises(ValueError, match="one count per request"):
        prefill_gpu_seconds(trace, [0])
    half = prefill_gpu_seconds(trace, node=PrefillNode(utilization=0.3))
    assert math.isclose(half, 2 * prefill_gpu_seconds(trace))
    with pytest.raises(TypeError, match="PrefillNode"):
        prefill_gpu_seconds(trace, node=0.6)
    with pytest.raises(TypeError, match="Trace"):
        prefill_gpu_seconds([1, 2])


def test_the_lecture_style_trace_lands_near_the_lecture():
    # The lecture: 1.05 h of prefill -> 0.42 h with an infinite cache (2.46x), 2.34x at 10,000
    # blocks, 1.46x at 1,000; our seeded stand-in for its trace comes within about 10 %.
    points = prefill_savings(synthetic_prefix_trace(seed=0), (1_000, 10_000, None))
    hours = points[0].seconds_without / 3600
    assert 0.95 < hours < 1.15
    speedups = [p.speedup for p in points]
    assert speedups == sorted(speedups)
    assert 1.3 < speedups[0] < 1.6 and 2.0 < speedups[-1] < 2.7
    assert points[-1].capacity is None and points[-1].storage_bytes > points[1].storage_bytes


def test_the_replay_order_is_passed_on():
    """Tail first (vLLM v1's order) by default; head first when asked. Blocks 1, 2 are shared and
    a third request pushes two blocks out of 4: head first, the shared prefix goes."""
    requests = [(1, 2, 3), (1, 2, 4), (5, 6), (1, 2, 3)]
    trace = Trace(
        name="shared",
        block_size=4,
        requests=tuple(TraceRequest(float(t), 4 * len(r), 1, r) for t, r in enumerate(requests)),
    )
    (tail,) = prefill_savings(trace, (4,))
    (head,) = prefill_savings(trace, (4,), tail_first=False)
    assert (tail.hit_rate, head.hit_rate) == (4 / 11, 2 / 11)
    assert tail.seconds_with < head.seconds_with
    with pytest.raises(TypeError, match="tail_first"):
        prefill_savings(trace, (4,), tail_first=None)
