"""Tests for kvcourse.serving.swap_cost (§6.2, exercise 6): swapping a sequence's KV blocks over
PCIe against recomputing them, to the digits the lecture prints, and the two recompute models."""

from __future__ import annotations

import math

import pytest

from kvcourse.serving import (
    EX6_RECOMPUTE_S,
    PCIE_BANDWIDTH,
    PCIE_PER_COPY_S,
    IterationCost,
    SwapCost,
    ex6,
    iteration_recompute_seconds,
    recompute_seconds,
    swap_crossover_block_size,
    swap_vs_recompute,
)
from kvcourse.sizing import flops_per_token, prefill_flops
from kvcourse.specs import LLAMA2_70B, OPT_13B


def test_exercise_6_at_block_32_to_the_printed_digits():
    e = ex6()
    assert (e.model, e.tokens, e.block_size, e.blocks) == ("OPT-13B", 1024, 32, 32)
    assert e.copy_bytes == 32 * 40 * 128 * 2 == 327_680
    assert f"{e.copy_s * 1e6:.1f}" == "23.1"  # 10 µs + 327,680 B / 25 GB/s
    assert e.copies == 40 * 2 * 32 == 2560
    assert f"{e.swap_out_s * 1e3:.1f}" == "59.2"
    assert f"{e.swap_round_trip_s * 1e3:.1f}" == "118.3"
    assert e.recompute_s == EX6_RECOMPUTE_S == 143.77e-3
    assert e.faster == "swap"
    assert (PCIE_BANDWIDTH, PCIE_PER_COPY_S) == (25e9, 10e-6)


def test_the_crossover_lies_between_blocks_16_and_32():
    sixteen = ex6(16)
    assert sixteen.copies == 5120 and f"{sixteen.swap_round_trip_s * 1e3:.1f}" == "169.5"
    assert sixteen.faster == "recompute"
    crossover = swap_crossover_block_size()
    assert 16 < crossover < 32 and f"{crossover:.1f}" == "21.4"
    # Swept over powers of two, swapping first wins at 32, and keeps winning above it.
    winners = {b: ex6(b).faster for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)}
    assert [b for b, w in winners.items() if w == "swap"] == [32, 64, 128, 256]


def test_recompute_does_not_depend_on_the_block_size_and_swapping_does():
    rows = [swap_vs_recompute(1024, b) for b in (1, 4, 16, 64, 256)]
    assert len({r.recompute_s for r in rows}) == 1
    trips = [r.swap_round_trip_s for r in rows]
    assert trips == sorted(trips, reverse=True)  # fewer, larger copies: faster
    # The bytes moved are the same; only the number of copies (each 10 µs) changes.
    assert all(r.copies * r.copy_bytes == 1024 * 819_200 for r in rows)


def test_the_two_recompute_models_and_why_they_differ():
    flop_model = recompute_seconds(1024)  # prefill FLOPs at 0.6 of peak, as exercise 8 counts
    assert abs(flop_model / 143.77e-3 - 1) < 0.02 and f"{flop_model * 1e3:.2f}" == "142.77"
    iteration_model = iteration_recompute_seconds(1024)  # the book's iteration model, 0.5
    assert f"{iteration_model * 1e3:.2f}" == "168.57"
    assert iteration_model == pytest.approx(IterationCost.for_gpu().per_new_token_s * 1024)
    # The difference: compute efficiency 0.5 instead of 0.6 (x 1.2), and no attention term.
    at_half = recompute_seconds(1024, utilization=0.5)
    assert at_half == pytest.approx(flop_model * 1.2)
    linear_share = 1024 * flops_per_token(OPT_13B) / prefill_flops(OPT_13B, 1024)
    assert iteration_model == pytest.approx(at_half * linear_share)
    assert 0.98 < linear_share < 0.99
    # Swapping at block 32 beats all three recompute figures.
    assert ex6().swap_round_trip_s < min(flop_model, EX6_RECOMPUTE_S, iteration_model)
    assert swap_vs_recompute(1024, 32).recompute_s == flop_model  # the default comparison


def test_swap_cost_for_a_model():
    cost = SwapCost.for_model(OPT_13B, 16)
    assert (cost.copy_bytes, cost.copies_per_block) == (16 * 5120 * 2, 80)
    assert cost.block_bytes == 16 * 819_200
    assert cost.copies(3) == 240
    assert cost.seconds(3) == pytest.approx(240 * (10e-6 + 163_840 / 25e9))
    assert cost.seconds(0) == 0
    gqa = SwapCost.for_model(LLAMA2_70B, 16)  # 8 KV heads of 128: far fewer bytes per copy
    assert (gqa.copy_bytes, gqa.copies_per_block) == (16 * 8 * 128 * 2, 160)
    fast = SwapCost(copy_bytes=1000, copies_per_block=2, bandwidth=1e12, per_copy_s=0)
    assert fast.seconds(5) == pytest.approx(10 * 1e-9)
    assert math.isinf(swap_crossover_block_size(recompute_s=1e-6))  # the bytes alone lose


def test_bad_arguments_raise_clearly():
    with pytest.raises(ValueError, match="block_size must be positive"):
        SwapCost.for_model(OPT_13B, 0)
    with pytest.raises(ValueError, match="bandwidth must be a positive"):
        SwapCost.for_model(OPT_13B, 16, bandwidth=0)
    with pytest.raises(ValueError, match="per_copy_s must be a finite, non-negative"):
        SwapCost.for_model(OPT_13B, 16, per_copy_s=-1e-6)
    with pytest.raises(ValueError, match="copies_per_block must be positive"):
        SwapCost(copy_bytes=10, copies_per_block=0)
    with pytest.raises(TypeError, match="copy_bytes must be an int"):
        SwapCost(copy_bytes=1.5, copies_per_block=2)
    with pytest.raises(ValueError, match="blocks must be zero or more"):
        SwapCost.for_model().seconds(-1)
    with pytest.raises(ValueError, match="tokens must be positive"):
        swap_vs_recompute(0)
    with pytest.raises(ValueError, match="recompute_s must be a positive"):
        swap_vs_recompute(1024, 32, recompute_s=0)
    with pytest.raises(ValueError, match="num_tokens must be positive"):
        recompute_seconds(0)
    with pytest.raises(TypeError, match="IterationCost"):
        iteration_recompute_seconds(10, cost=0.1)
