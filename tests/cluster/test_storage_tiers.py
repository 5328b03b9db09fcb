"""Storage for compute: reading KV back from a tier against recomputing it
(kvcourse.cluster.storage_tiers, Exercise 8)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcourse.cluster import PrefillNode
from kvcourse.cluster.storage_tiers import (
    HBM_TIER,
    LOCAL_DRAM_TIER,
    NODE_SSD_TIER,
    NODE_TIERS,
    ONE_SSD_TIER,
    REMOTE_DRAM_TIER,
    StorageTier,
    TierComparison,
    get_tier,
    mean_recompute_seconds_per_token,
    read_seconds_per_token,
    recompute_seconds_per_token,
    storage_vs_compute,
    tiers_losing_to_recompute,
)
from kvcourse.sizing import kv_bytes_per_token, prefill_flops
from kvcourse.specs import H200, LLAMA2_70B, OPT_13B

NODE_RATE = 8 * 312e12 * 0.6  # 8 × A800 at 60 % of peak, FLOP/s


def test_node_tiers_are_the_stated_node_totals():
    assert [t.name for t in NODE_TIERS] == [
        "HBM",
        "local DRAM",
        "remote DRAM",
        "node SSDs",
        "one SSD",
    ]
    assert HBM_TIER.bandwidth_bytes_per_s == pytest.approx(8 * 2.039e12)
    assert LOCAL_DRAM_TIER.bandwidth_bytes_per_s == 200e9
    assert REMOTE_DRAM_TIER.bandwidth_bytes_per_s == 100e9
    assert NODE_SSD_TIER.bandwidth_bytes_per_s == 48e9
    assert ONE_SSD_TIER.bandwidth_bytes_per_s == 6e9
    speeds = [t.bandwidth_bytes_per_s for t in NODE_TIERS]
    assert speeds == sorted(speeds, reverse=True)  # fastest first
    assert all(t.assumption for t in NODE_TIERS)
    assert get_tier("node SSDs") is NODE_SSD_TIER
    with pytest.raises(KeyError, match="the tiers are: HBM"):
        get_tier("tape")
    with pytest.raises(dataclasses.FrozenInstanceError):
        NODE_SSD_TIER.bandwidth_bytes_per_s = 1.0  # type: ignore[misc]


def test_storage_tier_checks_its_fields():
    with pytest.raises(ValueError, match="positive, finite"):
        StorageTier("broken", 0.0, "nothing")
    with pytest.raises(ValueError, match="non-empty name"):
        StorageTier("", 1e9, "nameless")


def test_exercise_8_numbers():
    assert kv_bytes_per_token(LLAMA2_70B) == 327_680
    # The library's count, 137.43 GFLOP of linear layers / (8 × 312 TFLOP/s × 0.6) = 91.8 µs;
    # Exercise 8's answer divides the lecture's given 137 GFLOP: 91 µs (tests/test_sizing.py).
    assert recompute_seconds_per_token() * 1e6 == pytest.approx(91.76, abs=0.01)
    # With attention averaged over an 8,700-token causal prefill: ≈99.4 µs.
    assert mean_recompute_seconds_per_token(8700) * 1e6 == pytest.approx(99.38, abs=0.01)
    assert read_seconds_per_token(LLAMA2_70B, REMOTE_DRAM_TIER) * 1e6 == pytest.approx(3.2768)
    assert read_seconds_per_token(LLAMA2_70B, ONE_SSD_TIER) * 1e6 == pytest.approx(54.613, 1e-4)


def test_opt_13b_when_ssd_loses_to_recompute():
    assert kv_bytes_per_token(OPT_13B) == 819_200
    recompute = mean_recompute_seconds_per_token(8700, PrefillNode(OPT_13B))
    assert recompute * 1e6 == pytest.approx(19.53, abs=0.01)
    assert 2.0 < recompute / read_seconds_per_token(OPT_13B, REMOTE_DRAM_TIER) < 2.5
    assert read_seconds_per_token(OPT_13B, ONE_SSD_TIER) > recompute  # 136.5 µs: 7× slower
    assert tiers_losing_to_recompute() == {"LLaMA2-70B": [], "OPT-13B": ["one SSD"]}


def test_recompute_per_token_counts_context_and_hardware():
    with_context = recompute_seconds_per_token(context_len=8700)
    assert with_context > recompute_seconds_per_token()
    faster = recompute_seconds_per_token(node=PrefillNode(gpu=H200, num_gpus=4, utilization=0.5))
    assert faster == pytest.approx(
        recompute_seconds_per_token() * (8 * 312e12 * 0.6) / (4 * 989e12 * 0.5)
    )
    with pytest.raises(TypeError, match="PrefillNode"):
        recompute_seconds_per_token(node=LLAMA2_70B)
    with pytest.raises(ValueError, match="prompt_len must be positive"):
        mean_recompute_seconds_per_token(0)
    with pytest.raises(TypeError, match="StorageTier"):
        read_seconds_per_token(LLAMA2_70B, 100e9)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 200_000))
def test_prefill_mean_lies_between_its_first_and_last_token(n):
    mean = mean_recompute_seconds_per_token(n)
    assert mean * n * NODE_RATE == pytest.approx(prefill_flops(LLAMA2_70B, n))
    first = recompute_seconds_per_token(context_len=1)
    last = recompute_seconds_per_token(context_len=n)
    assert first * (1 - 1e-12) <= mean <= last * (1 + 1e-12)


def test_storage_vs_compute_table():
    rows = storage_vs_compute()
    assert len(rows) == 2 * len(NODE_TIERS)
    assert all(isinstance(r, TierComparison) for r in rows)
    assert [r.model for r in rows[:5]] == ["LLaMA2-70B"] * 5
    by_key = {(r.model, r.tier): r for r in rows}
    rdma = by_key["LLaMA2-70B", "remote DRAM"]
    assert rdma.speedup == pytest.approx(99.38 / 3.2768, rel=1e-3)  # ≈30×
    assert not rdma.loses_to_recompute
    ssd = by_key["OPT-13B", "one SSD"]
    assert ssd.loses_to_recompute and ssd.speedup == pytest.approx(0.143, abs=0.001)
    # Recompute is the same for every tier of one model; read time grows as the tier slows.
    for model in ("LLaMA2-70B", "OPT-13B"):
        mine = [r for r in rows if r.model == model]
        assert len({r.recompute_s for r in mine}) == 1
        assert [r.read_s for r in mine] == sorted(r.read_s for r in mine)
    shorter = storage_vs_compute((PrefillNode(),), (ONE_SSD_TIER,), prompt_len=1)
    assert shorter[0].recompute_s == pytest.approx(recompute_seconds_per_token(context_len=1))
    with pytest.raises(ValueError, match="at least one"):
        storage_vs_compute(())
    assert math.isfinite(by_key["OPT-13B", "HBM"].speedup)


def test_the_lectures_7x_from_ssd_is_about_four_ssds():
    """§9.3: the lecture's pitfall (70B reads back from SSD 7x faster, OPT-13B slower) matches
    neither SSD tier; 7x over the 8,700-token prefill needs ≈23 GB/s, about four 6 GB/s SSDs."""
    recompute = mean_recompute_seconds_per_token(8700)
    assert round(kv_bytes_per_token(LLAMA2_70B) / (recompute / 7) / 1e9) == 23
    four = StorageTier("four SSDs", 4 * ONE_SSD_TIER.bandwidth_bytes_per_s, "four 6 GB/s SSDs")
    rows = {r.model: r for r in storage_vs_compute(tiers=[four])}
    assert f"{rows['LLaMA2-70B'].speedup:.2f}" == "7.28"
    assert rows["OPT-13B"].loses_to_recompute
    assert f"{1 / rows['OPT-13B'].speedup:.2f}" == "1.75"
    speedups = {t.name: r.speedup for t in NODE_TIERS for r in [storage_vs_compute(tiers=[t])[0]]}
    assert round(speedups["node SSDs"]) != 7 and round(speedups["one SSD"]) != 7
