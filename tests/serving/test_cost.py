"""Tests for kvcourse.serving.cost (§3.3): the roofline model of one iteration's time."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcourse.serving import A100_SLOTS, IterationCost
from kvcourse.serving.cost import check_cost
from kvcourse.specs import A100_40GB, OPT_13B


def test_iteration_cost_of_opt13b_on_an_a100():
    cost = IterationCost.for_gpu()
    assert cost.weights_s == pytest.approx(0.02752, rel=1e-3)
    assert cost.per_context_token_s == pytest.approx(0.878e-6, rel=1e-3)
    assert cost.per_new_token_s == pytest.approx(0.1646e-3, rel=1e-3)
    assert cost.seconds(12_000, 30) == pytest.approx(0.02752 + 12_000 * 0.878e-6, rel=1e-3)
    assert cost.seconds(0, 1000) == pytest.approx(0.1646, rel=1e-3)  # a long prefill: compute
    assert IterationCost.for_gpu(OPT_13B, A100_40GB) == cost
    # The docstring's "a decode iteration over a full KV cache takes ≈ 38.6 ms".
    assert round(cost.seconds(A100_SLOTS, 0) * 1e3, 1) == 38.6


def test_the_book_efficiencies_are_the_defaults():
    # §1 states these two constants for the whole book; the simulators use the defaults.
    stated = IterationCost.for_gpu(bandwidth_efficiency=0.6, compute_efficiency=0.5)
    assert IterationCost.for_gpu() == stated
    # At the data sheet's full bandwidth, OPT-13B's weights would take 16.5 ms, not 27.5 ms.
    sheet = IterationCost.for_gpu(bandwidth_efficiency=1.0)
    assert sheet.weights_s == pytest.approx(0.01651, rel=1e-3)


def test_efficiencies_scale_the_constants():
    base = IterationCost.for_gpu()
    slow_memory = IterationCost.for_gpu(bandwidth_efficiency=0.3)
    assert slow_memory.weights_s == pytest.approx(2 * base.weights_s)
    assert slow_memory.per_context_token_s == pytest.approx(2 * base.per_context_token_s)
    assert slow_memory.per_new_token_s == base.per_new_token_s
    fast_compute = IterationCost.for_gpu(compute_efficiency=1.0)
    assert fast_compute.per_new_token_s == pytest.approx(base.per_new_token_s / 2)


@given(
    stored=st.integers(0, 50_000),
    new=st.integers(0, 5_000),
    more=st.integers(0, 1_000),
)
def test_seconds_is_the_larger_roof_and_grows_with_the_work(stored, new, more):
    cost = IterationCost(0.02, 1e-6, 2e-4)
    seconds = cost.seconds(stored, new)
    assert seconds == max(0.02 + 1e-6 * stored, 2e-4 * new)
    assert seconds >= cost.weights_s  # every iteration reads the weights
    assert cost.seconds(stored + more, new) >= seconds
    assert cost.seconds(stored, new + more) >= seconds


def test_check_cost_defaults_to_the_a100():
    assert check_cost(None) == IterationCost.for_gpu()
    mine = IterationCost(1.0, 0.0, 0.0)
    assert check_cost(mine) is mine
    with pytest.raises(TypeError, match="IterationCost"):
        check_cost(0.04)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((-1.0, 0.0, 0.0), ValueError, "non-negative"),
        ((0.0, 0.0, 0.0), ValueError, "weights_s positive"),
        ((0.02, float("inf"), 0.0), ValueError, "finite"),
        (("1", 0.0, 0.0), TypeError, "number of seconds"),
        ((0.02, True, 0.0), TypeError, "number of seconds"),
    ],
)
def test_bad_constants_are_refused(args, error, message):
    with pytest.raises(error, match=message):
        IterationCost(*args)


def test_bad_efficiencies_are_refused():
    with pytest.raises(ValueError, match="fraction"):
        IterationCost.for_gpu(bandwidth_efficiency=1.5)
    with pytest.raises(ValueError, match="fraction"):
        IterationCost.for_gpu(compute_efficiency=0)
    with pytest.raises(TypeError, match="fraction"):
        IterationCost.for_gpu(compute_efficiency="x")
