"""Tests for kvcourse.serving.vllm_metrics (vLLM's metric names from vllm/v1/metrics/loggers.py,
v0.33.0), the shared prefix in kvcourse.serving.paged_v1, and kvcourse.serving.vllm_startup, on
hand cases."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kvcourse.serving import IterationCost, PagedScheme, PagedV1Scheme, VllmV1Scheduler
from kvcourse.serving.vllm_metrics import (
    INTER_TOKEN_LATENCY_BUCKETS,
    METRIC_NAMES,
    TIME_TO_FIRST_TOKEN_BUCKETS,
    serve_with_metrics,
)
from kvcourse.serving.vllm_startup import vllm_kv_capacity
from kvcourse.specs import A10, LLAMA31_8B
from kvcourse.workloads import Request

UNIT = IterationCost(1.0, 0.0, 0.0)  # every iteration takes exactly one second


def samples(run) -> dict[str, float]:
    """Every sample of the text format by name (one label set per metric), bucket bounds kept."""
    found = {}
    for family in text_string_to_metric_families(run.text()):
        for s in family.samples:
            key = s.name + (f"[{s.labels['le']}]" if "le" in s.labels else "")
            found[key] = s.value
    return found


def test_names_and_buckets_are_vllm_v0_33_0s():
    assert METRIC_NAMES == (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:num_preemptions_total",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
    )
    assert TIME_TO_FIRST_TOKEN_BUCKETS[:3] == (0.001, 0.005, 0.01)
    assert TIME_TO_FIRST_TOKEN_BUCKETS[-1] == 2560.0 and len(TIME_TO_FIRST_TOKEN_BUCKETS) == 22
    assert INTER_TOKEN_LATENCY_BUCKETS[0] == 0.01 and INTER_TOKEN_LATENCY_BUCKETS[-1] == 80.0


def test_three_requests_share_a_system_prompt():
    """Three prompts of 10 tokens whose first 8 are one system prompt, blocks of 4, all arriving
    at once. The first computes the prefix and names its two blocks; the next two hit them:
    30 tokens queried, 16 hit. Five blocks hold the three requests (2 shared + 1 each), 14
    distinct tokens; the prefill runs 10 + 2 + 2 tokens. Without prefix caching nothing is
    counted and each request takes three blocks of its own."""
    requests = [Request(i, 0.0, 10, 2) for i in range(3)]
    run = VllmV1Scheduler(requests, PagedV1Scheme(4, shared_prefix=8), num_slots=64, cost=UNIT)
    first = next(iter(run))
    assert (first.stored, first.internal, first.new_tokens) == (14, 6, 14)
    assert first.stored + first.reserved + first.internal + first.external + first.free == 64
    assert [live.cached_tokens for live in first.admitted] == [0, 8, 8]
    assert (run.memory.queries, run.memory.hits) == (30, 16)
    off = VllmV1Scheduler(
        requests, PagedV1Scheme(4, shared_prefix=8, prefix_caching=False), num_slots=64, cost=UNIT
    )
    it = next(iter(off))
    assert (it.stored, it.internal, it.new_tokens) == (30, 6, 30)
    assert (off.memory.queries, off.memory.hits) == (0, 0)
    metrics = serve_with_metrics(requests, PagedV1Scheme(4, shared_prefix=8), num_slots=64)
    found = samples(metrics)
    assert found["vllm:prefix_cache_queries_total"] == 30
    assert found["vllm:prefix_cache_hits_total"] == 16
    assert metrics.hit_rate == pytest.approx(16 / 30)


def test_shared_blocks_are_freed_once_and_everything_finishes():
    requests = [Request(i, 0.5 * i, 9, 5) for i in range(6)]
    run = VllmV1Scheduler(requests, PagedV1Scheme(4, shared_prefix=8), num_slots=24, cost=UNIT)
    for it in run:
        assert it.stored + it.reserved + it.internal + it.external + it.free == 24
        assert it.internal >= 0
    assert run.memory.pool.num_used == 0 and run.memory.shared_slots() == 0
    assert run.memory.hits > 0


def test_one_preemption_its_wait_in_the_inter_token_latency():
    """Two requests of prompt 4 and output 3 on two blocks of 4. Both prefill in iteration 1
    (first token at 1 s); in iteration 2 each needs a second block, so the later one is
    preempted; the first decodes at 2 s and 3 s and finishes; the victim comes back in
    iteration 4 (its cached block was evicted by the first's second block) and decodes at 4 s
    and 5 s. One preemption; TTFT 1 s twice; inter-token latencies 1, 1 (the first), 3 (the
    victim's wait) and 1 s. Queries count the two new requests' prompts only (8 tokens), not the
    victim's return."""
    requests = [Request(0, 0.0, 4, 3), Request(1, 0.0, 4, 3)]
    run = serve_with_metrics(requests, PagedV1Scheme(4), num_slots=8, cost=UNIT)
    assert run.preemptions[-1] == 1
    assert sorted(run.ttft_s) == [1.0, 1.0]
    assert sorted(run.itl_s) == [1.0, 1.0, 1.0, 3.0]
    found = samples(run)
    assert found["vllm:num_preemptions_total"] == 1
    assert found["vllm:prefix_cache_queries_total"] == 8
    assert found["vllm:prefix_cache_hits_total"] == 0
    assert found["vllm:generation_tokens_total"] == 6
    assert found["vllm:time_to_first_token_seconds_count"] == 2
    assert found["vllm:time_to_first_token_seconds_bucket[1.0]"] == 2
    assert found["vllm:inter_token_latency_seconds_count"] == 4
    assert found["vllm:inter_token_latency_seconds_bucket[2.5]"] == 3
    assert found["vllm:inter_token_latency_seconds_sum"] == 6.0
    assert found["vllm:num_requests_running"] == 1  # the last iteration ran the victim alone
    assert list(run.running) == [2, 1, 1, 1, 1] and found["vllm:kv_cache_usage_perc"] == 1.0
    assert run.duration_s == 5.0 and run.output_tokens == 6


def test_text_parses_and_names_every_metric():
    requests = [Request(i, 0.1 * i, 20, 4) for i in range(5)]
    run = serve_with_metrics(requests, PagedV1Scheme(), num_slots=256, model_name="m")
    names = {s.name for f in text_string_to_metric_families(run.text()) for s in f.samples}
    for name in METRIC_NAMES:
        assert name in names or f"{name}_count" in names
    stable = run.text(created=False)
    assert "_created" not in stable and "vllm:num_preemptions_total" in stable
    assert 'model_name="m"' in stable and 'engine="0"' in stable


def test_argument_checks():
    requests = [Request(0, 0.0, 4, 2)]
    with pytest.raises(TypeError, match="PagedV1Scheme"):
        serve_with_metrics(requests, PagedScheme(4), num_slots=64)
    with pytest.raises(ValueError, match="num_slots"):
        serve_with_metrics(requests, PagedV1Scheme(4), num_slots=0)
    with pytest.raises(TypeError, match="prefix_caching"):
        PagedV1Scheme(prefix_caching=1)
    with pytest.raises(ValueError, match="shared prefix"):
        VllmV1Scheduler(requests, PagedV1Scheme(4, shared_prefix=8), num_slots=64)


def test_llama31_8b_on_an_a10_at_0_85():
    """vLLM's accounting: 24 GB × 0.85 = 20.4 GB requested; 16.06 GB of fp16 weights; the
    estimated activation, non-torch and CUDA-graph reserves; the rest in blocks of 16 tokens of
    128 KiB each (2 × 32 layers × 8 KV heads × 128 × 2 B)."""
    s = vllm_kv_capacity(LLAMA31_8B, A10, max_model_len=4096, gpu_memory_utilization=0.85)
    assert s.requested_bytes == 20_400_000_000 and s.weight_bytes == 16_059_990_016
    assert s.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2
    assert s.kv_tokens == s.num_blocks * 16 and s.kv_tokens % 16 == 0
    assert s.kv_cache_bytes // (16 * 131072) == s.num_blocks
    assert s.max_concurrency == s.kv_tokens / 4096
    assert s.log_line().startswith(f"GPU KV cache size: {s.kv_tokens:,} tokens")
    with pytest.raises(ValueError, match="no room"):
        vllm_kv_capacity(LLAMA31_8B, A10, gpu_memory_utilization=0.6)
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        vllm_kv_capacity(LLAMA31_8B, A10, gpu_memory_utilization=85)
