"""The synthetic workloads (kvcourse.workloads): seeded, with the documented and the paper's
means, lengths within bounds, Poisson arrivals, and clear errors for bad arguments."""

import math

import pytest

from kvcourse.workloads import (
    ALPACA,
    SHAREGPT,
    LengthDistribution,
    Request,
    alpaca_like,
    generate_requests,
    poisson_arrivals,
    sample_lengths,
    sharegpt_like,
    summarize,
)

# Realised means the workloads module documents (100,000 requests, seed 0), and the tolerance a
# 20,000-request sample must meet for any seed we try.
DOCUMENTED = {"ShareGPT-like": (160.8, 335.0, 495.8), "Alpaca-like": (19.0, 58.1, 77.1)}
PAPER = {"ShareGPT-like": (161, 338), "Alpaca-like": (19, 58)}
TOLERANCE = 0.03


def test_same_seed_same_workload_other_seed_other_workload():
    assert sharegpt_like(500, rate=2.0, seed=7) == sharegpt_like(500, rate=2.0, seed=7)
    assert sharegpt_like(500, seed=7) != sharegpt_like(500, seed=8)
    assert sample_lengths(300, ALPACA, seed=1) == sample_lengths(300, ALPACA, seed=1)


def test_the_rate_moves_arrivals_but_keeps_lengths():
    slow = sharegpt_like(200, rate=1.0, seed=4)
    fast = sharegpt_like(200, rate=10.0, seed=4)
    assert [(r.prompt_len, r.output_len) for r in slow] == [
        (r.prompt_len, r.output_len) for r in fast
    ]
    assert fast[-1].arrival_s < slow[-1].arrival_s


@pytest.mark.parametrize("dist", [SHAREGPT, ALPACA], ids=lambda d: d.name)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_means_match_the_documented_and_the_paper_means(dist, seed):
    stats = summarize(generate_requests(20_000, dist, seed=seed))
    prompt, output, total = DOCUMENTED[dist.name]
    for got, want, what in (
        (stats.mean_prompt, prompt, "prompt"),
        (stats.mean_output, output, "output"),
        (stats.mean_total, total, "total"),
    ):
        assert abs(got - want) <= TOLERANCE * want, f"{dist.name} seed {seed}: mean {what}"
    paper_prompt, paper_output = PAPER[dist.name]
    assert abs(stats.mean_prompt - paper_prompt) <= TOLERANCE * paper_prompt
    assert abs(stats.mean_output - paper_output) <= TOLERANCE * paper_output


TIGHT = LengthDistribution("tight", 50, 60, 1.5, 1.5, 64)


@pytest.mark.parametrize("dist", [SHAREGPT, ALPACA, TIGHT], ids=lambda d: d.name)
def test_lengths_stay_within_bounds(dist):
    requests = generate_requests(5_000, dist, seed=3)
    assert all(isinstance(r, Request) for r in requests)
    assert all(r.prompt_len >= 1 and r.output_len >= 1 for r in requests)
    assert all(r.total_len <= dist.max_total for r in requests)
    assert all(isinstance(r.prompt_len, int) and isinstance(r.output_len, int) for r in requests)
    assert [r.request_id for r in requests] == list(range(5_000))


def test_clipping_hits_the_limit_for_a_small_context():
    requests = generate_requests(2_000, TIGHT, seed=0)
    assert max(r.total_len for r in requests) == 64


def test_offline_batch_arrives_at_time_zero():
    assert {r.arrival_s for r in alpaca_like(50)} == {0.0}


@pytest.mark.parametrize("rate", [0.5, 3.0, 40.0])
def test_poisson_gaps_have_mean_one_over_rate(rate):
    times = poisson_arrivals(20_000, rate, seed=5)
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    assert all(g > 0 for g in gaps), "arrival times must increase"
    assert abs(sum(gaps) / len(gaps) - 1 / rate) <= 0.03 / rate
    assert abs(summarize(sharegpt_like(20_000, rate=rate, seed=5)).rate - rate) <= 0.03 * rate


def test_poisson_start_and_empty():
    assert poisson_arrivals(0, 1.0) == []
    assert min(poisson_arrivals(10, 1.0, start_s=100.0)) > 100.0
    assert sharegpt_like(0) == []


@pytest.mark.parametrize(
    "call",
    [
        lambda: sharegpt_like(-1),
        lambda: sharegpt_like(10, rate=0),
        lambda: sharegpt_like(10, rate=-3.0),
        lambda: sharegpt_like(10, rate=math.inf),
        lambda: sharegpt_like(10, rate=math.nan),
        lambda: sharegpt_like(10, seed=-1),
        lambda: poisson_arrivals(10, 1.0, start_s=math.nan),
        lambda: LengthDistribution("bad", 0, 10),
        lambda: LengthDistribution("bad", 10, 10, sigma_prompt=-0.1),
        lambda: LengthDistribution("bad", 10, 10, max_total=1),
        lambda: summarize([]),
    ],
)
def test_bad_arguments_raise_value_error(call):
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda: sharegpt_like(2.5),
        lambda: sharegpt_like(True),
        lambda: sharegpt_like(10, rate="fast"),
        lambda: sharegpt_like(10, seed=1.5),
        lambda: sample_lengths(10, dist="sharegpt"),
        lambda: summarize([(1, 2)]),
    ],
)
def test_bad_types_raise_type_error(call):
    with pytest.raises(TypeError):
        call()
