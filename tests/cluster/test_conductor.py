"""The Conductor's decision for one request: TTFT estimates, the four placements, replication and
rejection, on cluster states whose right answer is known by hand."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcourse.cluster import (
    ClusterView,
    ConductorConfig,
    Decision,
    PrefillCosts,
    RandomPlacement,
    cache_aware,
    cache_aware_replicating,
    check_decision,
    estimate_ttft,
    load_balanced,
)
from kvcourse.sizing import prefill_flops
from kvcourse.specs import LLAMA2_70B

COSTS = PrefillCosts()
CONFIG = ConductorConfig()


def view(prompt_len, queues, prefixes):
    return ClusterView(prompt_len, tuple(queues), tuple(prefixes))


def test_costs_follow_the_lecture_node():
    assert COSTS.node.flops_per_second == pytest.approx(8 * 312e12 * 0.6)
    assert COSTS.prefill_s(8700) == pytest.approx(prefill_flops(LLAMA2_70B, 8700) / 1.4976e15)
    assert COSTS.prefill_s(8700) == pytest.approx(0.865, abs=0.001)  # lecture ≈ 0.87 s
    assert COSTS.transfer_s(1) == pytest.approx(512 * 327_680 / 100e9)  # 168 MB: 1.68 ms


def test_cached_prefix_never_covers_the_last_token():
    assert COSTS.cached_tokens(1024, 2) == 1023
    assert COSTS.cached_tokens(1500, 2) == 1024
    assert COSTS.prefill_s(1024, 2) == pytest.approx(prefill_flops(LLAMA2_70B, 1, 1023) / 1.4976e15)


def test_cache_aware_goes_where_the_prefix_is():
    v = view(8192, [0.5, 0.5, 0.5], [0, 12, 4])
    assert cache_aware(v, CONFIG) == Decision(1, 12, None, 0.5 + COSTS.prefill_s(8192, 12))
    assert load_balanced(v, CONFIG).instance == 0  # ties go to the lowest number
    assert load_balanced(v, CONFIG).cached_blocks == 0


def test_cache_aware_trades_queue_against_prefix():
    # instance 0 holds 8 of 16 blocks but is 1 s busy; instance 1 is idle and holds nothing
    v = view(8192, [1.0, 0.0], [8, 0])
    ttft = [1.0 + COSTS.prefill_s(8192, 8), COSTS.prefill_s(8192, 0)]
    assert cache_aware(v, CONFIG).instance == (0 if ttft[0] < ttft[1] else 1)
    v = view(8192, [0.1, 0.0], [8, 0])
    assert cache_aware(v, CONFIG).instance == 0
    v = view(8192, [2.0, 0.0], [8, 0])
    assert cache_aware(v, CONFIG).instance == 1


def test_replication_pulls_from_the_busy_holder():
    v = view(8192, [2.0, 0.0], [8, 0])
    decision = cache_aware_replicating(v, CONFIG)
    expected = COSTS.transfer_s(8) + COSTS.prefill_s(8192, 8)
    assert decision == Decision(1, 8, 0, pytest.approx(expected))
    assert estimate_ttft(v, CONFIG, 1, pull_from=0) == pytest.approx(expected)


def test_replication_needs_a_prefix_longer_by_the_threshold():
    v = view(8192, [2.0, 0.0], [8, 5])  # 8 < 2 × 5: the idle instance uses its own 5 blocks
    decision = cache_aware_replicating(v, CONFIG)
    assert decision.pull_from is None and decision.cached_blocks == 5
    lower = ConductorConfig(replication_threshold=1.5)
    assert cache_aware_replicating(v, lower) == Decision(
        1, 8, 0, pytest.approx(COSTS.transfer_s(3) + COSTS.prefill_s(8192, 8))
    )


def test_rejects_when_no_instance_meets_the_slo():
    v = view(8192, [6.0, 7.0], [4, 0])
    for placement in (load_balanced, cache_aware, cache_aware_replicating, RandomPlacement(3)):
        decision = placement(v, CONFIG)
        assert decision.rejected and decision.instance is None
        assert decision.ttft_s > 5.0
        assert not placement(v, ConductorConfig(ttft_slo_s=None)).rejected


def test_random_placement_is_seeded_and_uniform():
    v = view(512, [0.0] * 4, [0] * 4)
    first = [RandomPlacement(7)(v, CONFIG).instance for _ in range(1)]
    placement = RandomPlacement(7)
    picks = [placement(v, CONFIG).instance for _ in range(4000)]
    assert picks[:1] == first
    assert all(800 < picks.count(i) < 1200 for i in range(4))


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 30_000),
    st.lists(st.tuples(st.floats(0, 8), st.integers(0, 60)), min_size=1, max_size=6),
    st.sampled_from([1.0, 1.5, 2.0, 4.0]),
)
def test_replicating_is_the_minimum_over_the_rule(prompt_len, state, threshold):
    queues, prefixes = zip(*state, strict=True)
    v = view(prompt_len, queues, prefixes)
    config = ConductorConfig(replication_threshold=threshold)
    longest = max(prefixes)
    best = None
    for i, own in enumerate(prefixes):
        sources = [None]
        if longest > own and longest >= threshold * own:
            sources.append(prefixes.index(longest))
        for source in sources:
            t = estimate_ttft(v, config, i, source)
            if best is None or t < best[0]:
                best = (t, i)
    decision = cache_aware_replicating(v, config)
    assert decision.ttft_s == pytest.approx(best[0])
    if not decision.rejected:
        assert decision.ttft_s <= 5.0
        assert decision.cached_blocks >= prefixes[decision.instance]
    # never worse than the cache-aware choice when it may also pull
    assert decision.ttft_s <= cache_aware(v, config).ttft_s + 1e-12


def test_view_and_config_validate():
    with pytest.raises(ValueError, match="one entry per prefill instance"):
        view(10, [0.0, 1.0], [0])
    with pytest.raises(ValueError, match="queue_s\\[1\\]"):
        view(10, [0.0, -1.0], [0, 0])
    with pytest.raises(ValueError, match="prompt_len"):
        view(0, [0.0], [0])
    with pytest.raises(ValueError, match="at least 1"):
        ConductorConfig(replication_threshold=0.5)
    with pytest.raises(ValueError, match="ttft_slo_s"):
        ConductorConfig(ttft_slo_s=0)
    with pytest.raises(TypeError, match="node must be a kvcourse.cluster.PrefillNode"):
        PrefillCosts(LLAMA2_70B)


def test_check_decision_names_what_is_wrong():
    v = view(4096, [0.0, 0.0], [3, 1])
    assert check_decision(Decision(None, 0, None, 9.0), v).rejected
    with pytest.raises(ValueError, match="instance must be None or 0..1"):
        check_decision(Decision(2, 0, None, 0.0), v)
    with pytest.raises(ValueError, match="the 1 blocks its own cache holds"):
        check_decision(Decision(1, 3, None, 0.0), v)
    with pytest.raises(ValueError, match="instance 0"):
        check_decision(Decision(1, 4, 0, 0.0), v)
    with pytest.raises(TypeError, match="must return a kvcourse.cluster.Decision"):
        check_decision((1, 3), v)
    for instance, blocks in itertools.product(range(2), range(2)):
        assert check_decision(Decision(instance, blocks, None, 0.0), v)
