"""Layer-wise prefill: overlapping KV loads and stores with compute (kvcourse.cluster.layerwise)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcourse.cluster.layerwise import LayerwiseTimeline, layer_times, layerwise_prefill
from kvcourse.cluster.prefill_node import PrefillNode
from kvcourse.cluster.storage_tiers import (
    LOCAL_DRAM_TIER,
    NODE_SSD_TIER,
    NODE_TIERS,
    ONE_SSD_TIER,
    REMOTE_DRAM_TIER,
)
from kvcourse.sizing import prefill_flops
from kvcourse.specs import LLAMA2_70B, OPT_13B

NODE_RATE = 8 * 312e12 * 0.6


def test_no_cache_is_the_lectures_870_ms():
    timeline = layerwise_prefill(8700)
    assert isinstance(timeline, LayerwiseTimeline)
    assert timeline.total_s == pytest.approx(0.870, rel=0.02)
    compute = prefill_flops(LLAMA2_70B, 8700) / NODE_RATE  # 864.6 ms
    assert timeline.busy_s("compute") == pytest.approx(compute)
    assert timeline.of_kind("load") == ()
    # Only the last layer's store (8,700 × 327,680 B / 80 at 48 GB/s = 0.74 ms) sticks out.
    assert timeline.total_s - compute == pytest.approx(8700 * 327_680 / 80 / 48e9)
    assert layerwise_prefill(8700, store=False).total_s == pytest.approx(compute)


@pytest.mark.parametrize("tier", [NODE_SSD_TIER, LOCAL_DRAM_TIER, REMOTE_DRAM_TIER])
def test_half_hit_overlapped_hides_the_io(tier):
    timeline = layerwise_prefill(8700, 4350, tier)
    assert 0.449 <= timeline.total_s <= 0.4545  # the lecture's 454 ms
    assert timeline.total_s == pytest.approx(0.454, rel=0.02)
    compute = prefill_flops(LLAMA2_70B, 4350, 4350) / NODE_RATE
    times = layer_times(8700, 4350, tier)
    # Overlap hides all I/O but the first layer's load and the last layer's store.
    assert timeline.total_s == pytest.approx(compute + times.load_s + times.store_s)


def test_half_hit_serial_from_the_node_ssds_adds_60_ms():
    serial = layerwise_prefill(8700, 4350, NODE_SSD_TIER, schedule="serial")
    overlapped = layerwise_prefill(8700, 4350, NODE_SSD_TIER)
    read = 4350 * 327_680 / 48e9  # 1.43 GB at 48 GB/s = 29.7 ms, and as much written
    assert read == pytest.approx(0.0297, abs=1e-4)
    assert serial.busy_s("load") == pytest.approx(read)
    assert serial.busy_s("store") == pytest.approx(read)
    assert serial.total_s == pytest.approx(serial.busy_s("compute") + 2 * read)
    assert serial.total_s - overlapped.total_s == pytest.approx(0.0594, abs=0.0015)
    # Serial: every load ends before any compute, every compute before any store.
    assert max(i.end_s for i in serial.of_kind("load")) <= serial.of_kind("compute")[0].start_s
    assert max(i.end_s for i in serial.of_kind("compute")) <= serial.of_kind("store")[0].start_s


def test_a_slow_tier_makes_the_prefill_load_bound():
    # One 6 GB/s SSD: 4.8 ms of load per layer still fits under 5.6 ms of compute...
    assert layerwise_prefill(8700, 4350, ONE_SSD_TIER).total_s < 0.46
    # ...but OPT-13B's fat MHA KV from one SSD takes longer to read than to compute.
    timeline = layerwise_prefill(8700, 4350, ONE_SSD_TIER, node=PrefillNode(OPT_13B))
    times = layer_times(8700, 4350, ONE_SSD_TIER, node=PrefillNode(OPT_13B))
    assert times.load_s > times.compute_s
    # Loads run back to back; the GPUs wait for each, then the last layer computes and stores.
    assert timeline.total_s == pytest.approx(
        timeline.busy_s("load") + times.compute_s + times.store_s
    )
    assert timeline.total_s > timeline.busy_s("compute")


def overlap_rules_hold(timeline: LayerwiseTimeline) -> None:
    loads = timeline.of_kind("load")
    computes = timeline.of_kind("compute")
    stores = timeline.of_kind("store")
    assert [c.layer for c in computes] == list(range(LLAMA2_70B.num_layers))
    for layer, compute in enumerate(computes):
        if loads:
            assert compute.start_s >= loads[layer].end_s - 1e-15
            if layer > 0:  # one-layer prefetch
                assert loads[layer].start_s >= computes[layer - 1].start_s - 1e-15
        if layer > 0:
            assert compute.start_s >= computes[layer - 1].end_s - 1e-15
        if stores:
            assert stores[layer].start_s >= compute.end_s - 1e-15
    for lane in (loads, computes, stores):  # one thing at a time on each link and on the GPUs
        for a, b in zip(lane, lane[1:], strict=False):
            assert b.start_s >= a.end_s - 1e-15


@settings(max_examples=40, deadline=None)
@given(
    prompt=st.integers(1, 40_000),
    share=st.floats(0, 1),
    tier=st.sampled_from(NODE_TIERS),
    store=st.booleans(),
)
def test_overlap_never_loses_and_keeps_its_rules(prompt, share, tier, store):
    cached = min(int(prompt * share), prompt - 1)
    serial = layerwise_prefill(prompt, cached, tier, schedule="serial", store=store)
    overlapped = layerwise_prefill(prompt, cached, tier, store=store)
    overlap_rules_hold(overlapped)
    compute = serial.busy_s("compute")
    assert overlapped.busy_s("compute") == pytest.approx(compute)
    assert serial.total_s == pytest.approx(compute + serial.busy_s("load") + serial.busy_s("store"))
    io_bound = max(overlapped.busy_s("load"), overlapped.busy_s("store"))
    assert max(compute, io_bound) * (1 - 1e-9) <= overlapped.total_s <= serial.total_s * (1 + 1e-9)


def test_inputs_are_checked():
    with pytest.raises(ValueError, match="cannot exceed prompt_len"):
        layerwise_prefill(100, 101)
    with pytest.raises(ValueError, match="at least one new token"):
        layerwise_prefill(100, 100)
    with pytest.raises(ValueError, match="prompt_len must be positive"):
        layerwise_prefill(0)
    with pytest.raises(ValueError, match="zero or more"):
        layerwise_prefill(100, -1)
    with pytest.raises(TypeError, match="StorageTier"):
        layerwise_prefill(100, 10, 48e9)
    with pytest.raises(ValueError, match="unknown schedule"):
        layerwise_prefill(100, schedule="pipelined")
    with pytest.raises(TypeError, match="PrefillNode"):
        layerwise_prefill(100, node=OPT_13B)
    with pytest.raises(ValueError, match="unknown interval kind"):
        layerwise_prefill(100).of_kind("compute ")
