"""Overload and early rejection in a disaggregated cluster (kvcourse.cluster.overload, the rules
of kvcourse.cluster.rejection and the simulation of kvcourse.cluster.overload_sim, §9.6)."""

from __future__ import annotations

import bisect
import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcourse.cluster.overload import (
    OUTCOMES,
    OverloadConfig,
    OverloadRequest,
    poisson_requests,
    prefill_seconds,
    trace_requests,
)
from kvcourse.cluster.overload_sim import (
    compare_rejection_rules,
    load_correlation,
    simulate_overload,
)
from kvcourse.cluster.rejection import (
    REJECTION_RULES,
    check_rejection_rule,
    predicted_decode_load,
    rejects_at_arrival,
)
from kvcourse.sizing import prefill_flops
from kvcourse.specs import LLAMA2_70B
from kvcourse.traces import Trace, TraceRequest, load_mooncake_trace

#: One prefill and one decode instance, one request per decode batch, 1 s per output token.
TINY = OverloadConfig(num_prefill=1, num_decode=1, max_batch=1, tbt_s=1.0, ttft_slo_s=100.0)
N = 1000  # prompt tokens of every tiny request
P = prefill_seconds(N, TINY)  # ≈ 0.09 s


def outcomes(results):
    return {r.rule: r.outcomes for r in results}


def test_prefill_time_is_the_flops_at_sixty_percent_of_eight_a800s():
    assert math.isclose(prefill_seconds(N), prefill_flops(LLAMA2_70B, N) / (8 * 312e12 * 0.6))
    assert 1.20 < prefill_seconds(12_035) < 1.25  # the conversation trace's mean prompt
    assert 0.05 < P < 0.2
    config = OverloadConfig()
    assert config.decode_slots == 64
    assert math.isclose(config.decode_capacity(343), 64 / (343 * 0.05))


def test_a_long_answer_fools_the_prediction():
    # A decodes for 10 s from P. B arrives at 1 s and C at P + 9.5 s, both while A decodes,
    # and both prefills end before A does. t_d is the mean answer, (10 + 5 + 3) / 3 = 6 s.
    requests = [(0.0, N, 10), (1.0, N, 5), (P + 9.5, N, 3)]
    base, early, pred = compare_rejection_rules(requests, TINY)
    assert base.outcomes == ("completed", "wasted", "wasted")  # both prefills found A there
    assert base.ends_s == pytest.approx((P + 10, 1 + P, 9.5 + 2 * P))
    assert base.wasted_prefill_s == pytest.approx(2 * P) and base.prefill_s == pytest.approx(3 * P)
    assert early.outcomes == ("completed", "early", "early")  # the slot was full at arrival
    assert early.ends_s == pytest.approx((P + 10, 1.0, P + 9.5))
    assert early.wasted_prefills == 0 and early.prefill_s == pytest.approx(P)
    # Predictive rejects B (A expected to run until P + 6 > 1 + P) but admits C: A was expected
    # to be done by P + 6, yet its 10-token answer holds the slot until P + 10.
    assert pred.outcomes == ("completed", "early", "wasted")
    assert pred.ends_s == pytest.approx((P + 10, 1.0, 9.5 + 2 * P))
    for r in (base, early, pred):
        assert (r.arrived, r.completed, r.rejected) == (3, 1, 2)
        assert r.rejected_for_ttft == 0 and r.peak_decode_batch == 1


def test_prediction_sees_the_requests_still_in_prefill():
    # B arrives while A is still in prefill (queued behind it); early rejection sees an empty
    # decode pool and admits B, whose prefill is then wasted; the prediction counts A. C's
    # queue would break the TTFT SLO of 2.2 P unless B was turned away.
    config = OverloadConfig(num_prefill=1, num_decode=1, max_batch=1, tbt_s=1.0, ttft_slo_s=2.2 * P)
    requests = [(0.0, N, 10), (0.25 * P, N, 10), (0.5 * P, N, 10)]
    base, early, pred = compare_rejection_rules(requests, config)
    assert base.outcomes == early.outcomes == ("completed", "wasted", "ttft")
    assert base.ends_s == pytest.approx((P + 10, 2 * P, 0.5 * P))
    assert base.rejected_at_arrival == base.rejected_for_ttft == 1
    assert early.wasted_prefill_s == pytest.approx(P)
    assert pred.outcomes == ("completed", "early", "early")  # C fits the SLO, A is in the way
    assert pred.ends_s == pytest.approx((P + 10, 0.25 * P, 0.5 * P))
    assert (pred.rejected_at_arrival, pred.rejected_for_ttft, pred.wasted_prefills) == (2, 0, 0)


def test_the_forecast_and_the_rules_by_hand():
    assert predicted_decode_load(10.0, [0.0, 4.0, 7.0], [8.0, 12.0], 5.0) == 2
    assert predicted_decode_load(10.0, [5.0], [10.0], 5.0) == 1  # ends exactly at 10: gone
    assert predicted_decode_load(10.0, [], [], 5.0) == 0
    kwargs = dict(slots=2, occupied=2, finish_s=10.0, running_starts=[0.0, 1.0],
                  prefill_finishes=[], decode_s=5.0)  # fmt: skip
    assert not rejects_at_arrival("baseline", **kwargs)
    assert rejects_at_arrival("early", **kwargs)
    assert not rejects_at_arrival("predictive", **kwargs)  # both expected done by 10


def test_load_correlation():
    t = [0.0, 1.0, 2.0, 3.0]
    assert load_correlation(t, [0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0)
    assert load_correlation(t, [0, 1, 0, 1], [0, 2, 0, 2]) == pytest.approx(1.0)
    assert math.isnan(load_correlation(t, [0, 1, 0, 1], [1, 1, 1, 1]))  # constant: undefined
    assert load_correlation(t, [5, 0, 1, 2], [5, 0, 1, 2.5], warmup_s=1.0) > 0.99
    assert math.isnan(load_correlation(t, [0, 1, 0, 1], [1, 0, 1, 0], warmup_s=3.0))
    with pytest.raises(ValueError, match="one length"):
        load_correlation(t, [0, 1], [1, 0, 1, 0])


def test_loads_are_sampled_every_step_until_the_last_arrival():
    config = OverloadConfig(
        num_prefill=1, num_decode=1, max_batch=1, tbt_s=1.0, ttft_slo_s=10.0, warmup_s=0.0
    )
    r = simulate_overload([(0.0, N, 3), (2.5, N, 1)], config, "baseline")
    assert r.times == (0.0, 1.0, 2.0)
    assert r.prefill_load == pytest.approx((P / 10, 0.0, 0.0))  # A's prefill, over 1 × 10 s
    assert r.decode_load == (0.0, 1.0, 1.0)  # sampled after the arrival at 0; A decodes P..P+3
    assert r.outcomes == ("completed", "wasted")


# ---------------------------------------------------------------------------- invariants

requests_strategy = st.lists(
    st.tuples(st.floats(0, 5, allow_nan=False), st.integers(0, 30_000), st.integers(0, 40)),
    max_size=30,
).map(lambda rs: sorted(rs))
config_strategy = st.builds(
    OverloadConfig,
    num_prefill=st.integers(1, 3),
    num_decode=st.integers(1, 3),
    max_batch=st.integers(1, 3),
    tbt_s=st.sampled_from([0.01, 0.1, 0.5]),
    ttft_slo_s=st.sampled_from([0.2, 1.0, 5.0]),
    sample_every_s=st.sampled_from([0.25, 1.0]),
    warmup_s=st.just(0.0),
)


@settings(max_examples=150, deadline=None)
@given(requests=requests_strategy, config=config_strategy, rule=st.sampled_from(REJECTION_RULES))
def test_every_request_is_accounted_for_and_no_batch_overflows(requests, config, rule):
    r = simulate_overload(requests, config, rule)
    assert r.arrived == len(requests) == r.completed + r.rejected  # run until drained
    counts = Counter(r.outcomes)
    assert set(counts) <= set(OUTCOMES)
    assert counts["completed"] == r.completed and counts["wasted"] == r.wasted_prefills
    assert counts["ttft"] == r.rejected_for_ttft
    assert counts["early"] == r.rejected_at_arrival - r.rejected_for_ttft
    assert rule != "baseline" or counts["early"] == 0
    assert r.peak_decode_batch <= config.max_batch
    # Rebuild the decode pool's occupancy from the completed requests' decode intervals.
    changes = []
    for (arrival, _, out), fate, end in zip(requests, r.outcomes, r.ends_s, strict=True):
        assert end >= arrival
        if fate in ("ttft", "early"):
            assert end == arrival
        elif fate == "wasted":
            assert end - arrival <= config.ttft_slo_s + 1e-9
        else:
            start = end - out * config.tbt_s
            assert start - arrival <= config.ttft_slo_s + 1e-9  # the TTFT check held
            changes += [(start, 1), (end, -1)]
    held = 0
    for _, change in sorted(changes, key=lambda c: (c[0], c[1])):
        held += change
        assert held <= config.decode_slots
    fates = zip(requests, r.outcomes, strict=True)
    wasted = sum(prefill_seconds(n, config) for (_, n, _), f in fates if f == "wasted")
    assert r.wasted_prefill_s == pytest.approx(wasted)
    assert r.wasted_prefill_s <= r.prefill_s + 1e-12
    assert all(0 <= x <= 1 + 1e-12 for x in r.prefill_load + r.decode_load)


# ---------------------------------------------------------------------------- requests


def small_trace() -> Trace:
    lengths = [(1000, 10), (3000, 300), (600, 2000)]
    return Trace("small", 512, tuple(
        TraceRequest(float(i), n, m, tuple(range(-(-n // 512)))) for i, (n, m) in enumerate(lengths)
    ))  # fmt: skip


def test_poisson_requests_are_seeded_at_the_asked_rate_with_the_traces_lengths():
    trace = small_trace()
    config = OverloadConfig()
    a = poisson_requests(trace, load=2.0, duration_s=1000.0, config=config, seed=3)
    assert a == poisson_requests(trace, load=2.0, duration_s=1000.0, config=config, seed=3)
    assert a != poisson_requests(trace, load=2.0, duration_s=1000.0, config=config, seed=4)
    rate = 2.0 * config.decode_capacity(trace.mean_output_len)  # 2 × 64 / (770 × 0.05) = 3.3/s
    assert abs(len(a) - rate * 1000) < 4 * math.sqrt(rate * 1000)
    assert all(0 <= r.arrival_s < 1000 for r in a)
    assert [r.arrival_s for r in a] == sorted(r.arrival_s for r in a)
    pairs = {(r.prompt_len, r.output_len) for r in trace.requests}
    assert {(r.prompt_len, r.output_len) for r in a} == pairs
    assert isinstance(a[0], OverloadRequest)


def test_trace_requests_keep_the_traces_arrivals_sped_up():
    trace = small_trace()
    fast = trace_requests(trace, speedup=2.0)
    assert [r.arrival_s for r in fast] == [0.0, 0.5, 1.0]
    assert [(r.prompt_len, r.output_len) for r in fast] == [(1000, 10), (3000, 300), (600, 2000)]
    assert trace_requests(trace)[2].arrival_s == 2.0


def test_runs_are_deterministic():
    trace = small_trace()
    config = OverloadConfig(warmup_s=10.0)
    requests = poisson_requests(trace, duration_s=200.0, config=config, seed=1)
    first = compare_rejection_rules(requests, config)
    assert [r.rule for r in first] == list(REJECTION_RULES)
    assert all(not math.isnan(r.correlation) for r in first)
    assert first == compare_rejection_rules(requests, config)
    assert first[1] == simulate_overload(requests, config, "early")


def test_no_requests_is_an_empty_run():
    r = simulate_overload([], TINY, "predictive")
    assert (r.arrived, r.completed, r.rejected, r.times) == (0, 0, 0, ())
    assert math.isnan(r.correlation)


def test_bad_inputs_are_refused_clearly():
    with pytest.raises(ValueError, match="unknown rejection rule 'late'"):
        simulate_overload([], TINY, "late")
    with pytest.raises(TypeError, match="rule must be a str"):
        check_rejection_rule(None)
    with pytest.raises(ValueError, match=r"requests\[1\] arrives before requests\[0\]"):
        simulate_overload([(2.0, N, 1), (1.0, N, 1)], TINY)
    with pytest.raises(ValueError, match=r"requests\[0\] prompt_len must be zero or more"):
        simulate_overload([(0.0, -5, 1)], TINY)
    with pytest.raises(TypeError, match=r"requests\[0\] must be an OverloadRequest"):
        simulate_overload([(0.0, N)], TINY)
    with pytest.raises(ValueError, match="arrival_s must be a finite number of seconds >= 0"):
        simulate_overload([(-1.0, N, 1)], TINY)
    with pytest.raises(TypeError, match="requests must be a sequence"):
        simulate_overload(iter([]), TINY)
    with pytest.raises(TypeError, match="config must be an OverloadConfig"):
        compare_rejection_rules([], {"num_prefill": 8})
    with pytest.raises(ValueError, match="max_batch must be positive"):
        OverloadConfig(max_batch=0)
    with pytest.raises(TypeError, match="node must be a kvcourse.cluster.PrefillNode"):
        OverloadConfig(node=LLAMA2_70B)
    with pytest.raises(ValueError, match="ttft_slo_s must be a positive"):
        OverloadConfig(ttft_slo_s=0.0)
    with pytest.raises(ValueError, match="warmup_s must be"):
        OverloadConfig(warmup_s=-1.0)
    with pytest.raises(ValueError, match="load must be a positive"):
        poisson_requests(small_trace(), load=0)
    with pytest.raises(TypeError, match="Trace"):
        poisson_requests([(0.0, 1, 1)])
    with pytest.raises(ValueError, match="no requests"):
        poisson_requests(Trace("empty", 512, ()))
    with pytest.raises(ValueError, match="speedup must be a positive"):
        trace_requests(small_trace(), speedup=0)
    silent = Trace("silent", 512, (TraceRequest(0.0, 10, 0, (0,)),))
    with pytest.raises(ValueError, match="answers are all empty"):
        poisson_requests(silent)
    with pytest.raises(TypeError, match="config must be an OverloadConfig"):
        poisson_requests(small_trace(), config=None)
    with pytest.raises(ValueError, match="unknown rejection rule 'late'"):
        rejects_at_arrival("late", slots=1, occupied=0, finish_s=1.0, running_starts=[],
                           prefill_finishes=[], decode_s=1.0)  # fmt: skip


@pytest.mark.slow
def test_the_default_hour_on_the_conversation_trace_goes_the_lectures_way():
    trace = load_mooncake_trace("conversation")
    requests = poisson_requests(trace)  # 8P + 8D, 2 × the decode capacity, one hour
    base, early, pred = compare_rejection_rules(requests)
    assert 26_000 < base.arrived < 28_500
    assert early.wasted_prefills <= 0.5 * base.wasted_prefills  # early rejection wastes far less
    assert pred.wasted_prefills < base.wasted_prefills
    assert abs(early.completed / base.completed - 1) < 0.03  # decode is the bottleneck
    assert abs(pred.completed / base.completed - 1) < 0.08
    assert early.correlation < -0.1 < base.correlation  # early rejection: loads in anti-phase
    assert all(r.peak_decode_batch == 8 for r in (base, early, pred))


def test_on_the_default_hour_the_forecast_under_counts_the_decode_slots(monkeypatch):
    # kvcourse.cluster.rejection says why predictive rejection cuts so little with the 5 s SLO:
    # at each arrival the forecast counts fewer slots than the completed decodes then hold.
    import kvcourse.cluster.overload_sim as overload_sim

    forecasts = []  # (when the prefill would end, the slots predicted then)

    def noting(rule, **kwargs):
        if rule == "predictive":
            at = kwargs["finish_s"]
            running, finishing = kwargs["running_starts"], kwargs["prefill_finishes"]
            forecasts.append(
                (at, predicted_decode_load(at, running, finishing, kwargs["decode_s"]))
            )
        return rejects_at_arrival(rule, **kwargs)

    monkeypatch.setattr(overload_sim, "rejects_at_arrival", noting)
    config = OverloadConfig()
    hour = poisson_requests(load_mooncake_trace("conversation"))
    run = simulate_overload(hour, config, "predictive")
    fates = zip(hour, run.outcomes, run.ends_s, strict=True)
    decoded = [(end - r.output_len * config.tbt_s, end) for r, f, end in fates if f == "completed"]
    starts = sorted(start for start, _ in decoded)
    ends = sorted(end for _, end in decoded)
    taken = [bisect.bisect_right(starts, t) - bisect.bisect_right(ends, t) for t, _ in forecasts]
    predicted = [f for _, f in forecasts]
    assert len(forecasts) > 20_000
    assert sum(predicted) / len(predicted) < 0.85 * sum(taken) / len(taken)
