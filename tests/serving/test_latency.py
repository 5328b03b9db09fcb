"""Tests for kvcourse.serving.latency (§7): per-request first-token and finish times, the vLLM
paper's normalized latency and its percentiles, throughput, batch size and what preemption cost,
which requests count when a horizon cuts the run, and §6.3's overload figure."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvcourse.serving import (
    IterationCost,
    LatencyResult,
    OracleScheme,
    PagedScheme,
    ReserveMaxScheme,
    VllmPaperScheduler,
    measure_latency,
)
from kvcourse.workloads import LengthDistribution, Request, generate_requests, sharegpt_like

UNIT = IterationCost(1.0, 0.0, 0.0)  # every iteration takes exactly one second
SMALL = LengthDistribution("small", mean_prompt=20, mean_output=60, max_total=256)


def test_times_of_a_hand_worked_run():
    # Request 0 arrives at 0.5 (the clock jumps there), prefills and gets its first token at the
    # end of that iteration, 1.5, and its 4th and last at 4.5: 4 s for 4 tokens, 1 s a token.
    # Request 1 (arrives at 2.0) joins at 2.5, first token 3.5, its 2 tokens done at 4.5.
    requests = [Request(0, 0.5, 3, 4), Request(1, 2.0, 2, 2)]
    result = measure_latency(requests, PagedScheme(4), num_slots=64, cost=UNIT)
    t = result.times
    assert list(t.request_id) == [0, 1]
    assert list(t.first_token_s) == [1.5, 3.5] and list(t.finish_s) == [4.5, 4.5]
    assert list(t.ttft_s) == [1.0, 1.5] and list(t.latency_s) == [4.0, 2.5]
    assert list(t.normalized_latency_s) == [1.0, 1.25]
    assert result.normalized_latency_s == pytest.approx(1.125)
    assert result.normalized_latency_p50_s == pytest.approx(1.125)  # halfway between the two
    assert result.normalized_latency_p90_s == pytest.approx(1.0 + 0.9 * 0.25)
    assert (result.finished, result.unfinished, result.iterations) == (2, 0, 4)
    assert result.duration_s == 4.0  # first arrival to the end of the last iteration
    assert result.throughput_rps == 0.5 and result.tokens_per_s == 6 / 4
    assert result.mean_batch_size == (1 + 1 + 2 + 2) / 4
    assert result.rate == pytest.approx(1 / 1.5) and result.recovery == "recompute"
    assert result.summary()["mean ms/token"] == pytest.approx(1125.0)


def test_a_horizon_leaves_the_unfinished_out_and_counts_them():
    requests = [Request(i, float(i), 2, 10) for i in range(6)]
    full = measure_latency(requests, PagedScheme(4), num_slots=64, cost=UNIT)
    cut = measure_latency(requests, PagedScheme(4), num_slots=64, cost=UNIT, horizon_s=12.0)
    assert full.finished == 6 and full.unfinished == 0
    # Request i runs the 10 iterations from t = i and finishes at i + 10: three by t = 12.
    assert cut.finished == 3 and cut.unfinished == 3
    assert np.isnan(cut.times.finish_s[3:]).all() and cut.times.finished.sum() == 3
    assert not np.isnan(cut.times.first_token_s).any()  # all six had started
    assert cut.normalized_latency_s == pytest.approx(full.times.normalized_latency_s[:3].mean())
    nothing = measure_latency(requests, PagedScheme(4), num_slots=64, cost=UNIT, horizon_s=3.0)
    assert nothing.finished == 0 and math.isnan(nothing.normalized_latency_s)
    assert math.isnan(nothing.normalized_latency_p90_s) and nothing.throughput_rps == 0


def test_the_result_agrees_with_the_scheduler_and_its_own_times():
    requests = generate_requests(300, SMALL, rate=40.0, seed=3)
    result = measure_latency(requests, PagedScheme(16), num_slots=1500)
    run = VllmPaperScheduler(requests, PagedScheme(16), num_slots=1500)
    its = list(run)
    assert result.iterations == len(its) and result.preemptions == run.preemptions > 0
    assert result.recomputed_tokens == run.recomputed_tokens
    assert result.mean_batch_size == pytest.approx(np.mean([it.running for it in its]))
    t = result.times
    assert result.finished == 300 and t.finished.all()
    assert (t.first_token_s > t.arrival_s).all() and (t.finish_s >= t.first_token_s).all()
    norm = t.normalized_latency_s
    assert result.normalized_latency_s == pytest.approx(norm.mean())
    assert result.normalized_latency_p50_s == pytest.approx(np.median(norm))
    assert result.normalized_latency_p50_s <= result.normalized_latency_p90_s
    assert t.preemptions.sum() == result.preemptions
    assert result.prompt_tokens == sum(r.prompt_len for r in requests)
    again = measure_latency(requests, PagedScheme(16), num_slots=1500)
    assert again == result and np.array_equal(again.times.finish_s, t.finish_s)


def test_swapping_reports_the_bytes_it_moved():
    requests = generate_requests(300, SMALL, rate=40.0, seed=3)
    result = measure_latency(requests, PagedScheme(16, recovery="swap"), num_slots=1500)
    assert result.recovery == "swap" and result.swap_outs == result.preemptions > 0
    block = 16 * 819_200  # an OPT-13B block of 16 tokens, all layers, K and V
    assert result.swapped_out_bytes == result.swapped_in_bytes  # everyone came back
    assert result.swapped_out_bytes % block == 0 and result.swapped_out_bytes > 0
    assert result.recomputed_tokens == 0 and result.swap_s > 0
    blocks = result.swapped_out_bytes // block
    assert result.swap_s == pytest.approx(2 * blocks * 80 * (10e-6 + 16 * 10_240 / 25e9))


def test_paged_waits_less_than_oracle_and_max_when_memory_is_the_limit():
    requests = sharegpt_like(400, rate=1.0, seed=0)
    results = {p.name: measure_latency(requests, p) for p in (ReserveMaxScheme(), OracleScheme())}
    results["Paged"] = measure_latency(requests, PagedScheme())
    latency = {name: r.normalized_latency_s for name, r in results.items()}
    assert latency["Paged"] < 0.05 and latency["Paged"] < latency["Oracle"] < latency["Max"]
    assert results["Paged"].mean_batch_size > results["Max"].mean_batch_size
    assert isinstance(results["Max"], LatencyResult) and results["Max"].preemptions == 0


def test_overloaded_recomputation_can_exceed_the_prompts_themselves():
    # §6.3: 1500 ShareGPT-like requests at 3 req/s, far past Paged's knee (≈ 1.7 req/s):
    # preempted requests are recomputed again and again, more tokens than all the prompts hold.
    result = measure_latency(sharegpt_like(1500, rate=3.0, seed=0), PagedScheme())
    print(
        f"recomputed {result.recomputed_tokens:,} tokens, prompts {result.prompt_tokens:,}, "
        f"{result.preemptions:,} preemptions, {result.normalized_latency_s * 1e3:.0f} ms/token"
    )
    assert result.recomputed_tokens > result.prompt_tokens
    assert result.normalized_latency_s > 0.2 and result.finished == 1500


def test_bad_arguments_raise_clearly():
    requests = [Request(0, 0.0, 1, 1)]
    with pytest.raises(ValueError, match="non-empty list"):
        measure_latency([], PagedScheme())
    with pytest.raises(TypeError, match="MemoryScheme"):
        measure_latency(requests, "paged")
    with pytest.raises(ValueError, match="num_slots must be positive"):
        measure_latency(requests, PagedScheme(), num_slots=0)
    with pytest.raises(ValueError, match="horizon_s must be a finite, non-negative"):
        measure_latency(requests, PagedScheme(), horizon_s=-1.0)
    with pytest.raises(TypeError, match="IterationCost"):
        measure_latency(requests, PagedScheme(), cost="fast")
