"""The prefill pool a Conductor drives: placement, local LRU caches, replication and rejection on
traces small enough to follow by hand, invariants on random traces, and the real trace."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcourse.cluster import (
    PLACEMENT_NAMES,
    ConductorConfig,
    Decision,
    PrefillCosts,
    cache_aware,
    cache_aware_replicating,
    compare_placements,
    load_balanced,
    simulate_conductor,
)
from kvcourse.traces import Trace, TraceRequest, load_mooncake_trace

COSTS = PrefillCosts()


def trace(*requests, block_size=512):
    return Trace(
        "hand",
        block_size,
        tuple(TraceRequest(t, n, 10, tuple(ids)) for t, n, ids in requests),
    )


def test_a_shared_prefix_follows_its_instance():
    # requests 1 and 3 share 3 of 4 blocks; request 2 arrives while instance 0 computes the
    # first, so it goes to instance 1; request 3 comes a minute later and finds its prefix on 0
    t = trace((0.0, 2048, [1, 2, 3, 4]), (0.05, 2048, [9, 8, 7, 6]), (60.0, 2048, [1, 2, 3, 5]))
    run = simulate_conductor(t, cache_aware, name="ca")
    assert run.requests_per_instance[:2] == (2, 1)
    assert run.hit_blocks == 3 and run.total_blocks == 12
    assert run.hit_rate == pytest.approx(0.25)
    assert run.tokens_computed == 2048 + 2048 + 512
    assert run.ttft_s[2] == pytest.approx(COSTS.prefill_s(2048, 3))
    # the second request found instance 0 busy with the first: load balancing chose instance 1
    assert run.ttft_s[1] == pytest.approx(COSTS.prefill_s(2048))
    assert simulate_conductor(t, load_balanced).hit_blocks == 3


def test_queues_add_up_on_one_instance():
    t = trace((0.0, 4096, [1, 2, 3, 4, 5, 6, 7, 8]), (0.0, 4096, [1, 2, 3, 4, 5, 6, 7, 9]))
    run = simulate_conductor(t, cache_aware, num_instances=1)
    full = COSTS.prefill_s(4096)
    # the shared blocks are not cached yet when the second arrives: it waits, then recomputes
    assert run.ttft_s == pytest.approx((full, 2 * full))
    t = trace((0.0, 4096, [1, 2, 3, 4, 5, 6, 7, 8]), (5.0, 4096, [1, 2, 3, 4, 5, 6, 7, 9]))
    run = simulate_conductor(t, cache_aware, num_instances=1)
    assert run.ttft_s == pytest.approx((full, COSTS.prefill_s(4096, 7)))


def test_replication_moves_the_prefix_and_keeps_the_copy():
    # a hot 16-block document, computed once on instance 0; two questions about it at once
    # (the second pulls the document to instance 1), then two more later (each instance has it)
    doc = list(range(1, 17))
    t = trace((0.0, 8192, doc), *[(10.0 * (1 + q // 2), 8704, [*doc, 100 + q]) for q in range(4)])
    run = simulate_conductor(t, cache_aware_replicating, num_instances=2)
    assert run.tokens_moved == 16 * 512  # instance 1 pulled the document once ...
    assert run.requests_per_instance == (3, 2)  # ... and kept it for the next question
    assert run.hit_blocks == 4 * 16
    plain = simulate_conductor(t, cache_aware, num_instances=2)
    assert plain.tokens_moved == 0 and plain.requests_per_instance == (5, 0)  # the hot spot
    assert plain.mean_ttft_s > run.mean_ttft_s
    assert run.ttft_s[2] == pytest.approx(COSTS.transfer_s(16) + COSTS.prefill_s(8704, 16))


def test_rejection_and_eviction():
    long_prompt = 60_000  # prefill alone takes longer than the 5 s SLO on an idle node
    assert COSTS.prefill_s(long_prompt) > 5
    t = trace((0.0, long_prompt, list(range(1, 119))), (1.0, 1024, [200, 201]))
    run = simulate_conductor(t, cache_aware)
    assert run.rejected == 1 and run.served == 1
    relaxed = simulate_conductor(t, cache_aware, config=ConductorConfig(ttft_slo_s=None))
    assert relaxed.rejected == 0
    # a 2-block cache: the third prompt evicts the first one's blocks
    t = trace((0.0, 1024, [1, 2]), (10.0, 1024, [3, 4]), (20.0, 1024, [1, 2]))
    assert simulate_conductor(t, cache_aware, num_instances=1, cache_blocks=2).hit_blocks == 0
    assert simulate_conductor(t, cache_aware, num_instances=1, cache_blocks=4).hit_blocks == 2


def test_speedup_compresses_arrivals():
    t = trace((0.0, 8192, list(range(16))), (1.0, 8192, list(range(100, 116))))
    slow = simulate_conductor(t, cache_aware, num_instances=1)
    fast = simulate_conductor(t, cache_aware, num_instances=1, speedup=4.0)
    assert slow.ttft_s[1] == pytest.approx(COSTS.prefill_s(8192))  # it waited for nobody
    assert fast.ttft_s[1] == pytest.approx(2 * COSTS.prefill_s(8192) - 0.25)


def test_a_placement_that_lies_is_caught():
    t = trace((0.0, 1024, [1, 2]))

    def greedy(view, config):
        return Decision(0, 2, None, 0.0)  # claims two cached blocks on an empty cache

    with pytest.raises(ValueError, match="cached_blocks must be between 0 and the 0 blocks"):
        simulate_conductor(t, greedy)
    with pytest.raises(TypeError, match="placement must be a function"):
        simulate_conductor(t, "cache-aware")
    with pytest.raises(ValueError, match="PrefillCosts\\(block_size=16\\)"):
        simulate_conductor(trace((0.0, 32, [1, 2]), block_size=16), cache_aware)
    with pytest.raises(ValueError, match="speedup"):
        simulate_conductor(t, cache_aware, speedup=0)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 5), st.integers(1, 3000), st.integers(0, 3)), min_size=1, max_size=25
    ),
    st.integers(1, 4),
    st.integers(1, 8),
)
def test_invariants_on_random_traces(raw, num_instances, cache_blocks):
    raw = sorted(raw)
    requests = [(t, n, [family * 100 + b for b in range(-(-n // 512))]) for t, n, family in raw]
    t = trace(*requests)
    for name, run in compare_placements(
        t, num_instances=num_instances, cache_blocks=cache_blocks, seed=1
    ).items():
        assert run.placement == name
        assert run.served + run.rejected == len(raw)
        assert sum(run.requests_per_instance) == run.served
        assert 0 <= run.hit_blocks <= run.total_blocks
        assert run.tokens_computed >= run.served  # the last token is always prefilled
        assert all(ttft > 0 for ttft in run.ttft_s)
        assert max(run.ttft_s, default=0) <= 5.0 + 1e-9
        if "replication" not in name:
            assert run.tokens_moved == 0


@pytest.mark.slow
def test_the_real_trace_ranks_the_placements_as_the_paper():
    runs = compare_placements(
        load_mooncake_trace("conversation"), config=ConductorConfig(ttft_slo_s=None)
    )
    assert list(runs) == list(PLACEMENT_NAMES)
    r, lb, ca, rep = runs.values()
    assert ca.hit_rate > 2 * lb.hit_rate and ca.hit_rate > 2 * r.hit_rate
    assert ca.tokens_computed < 0.85 * lb.tokens_computed
    # the order of the mean TTFTs in Fig. 5 of the Mooncake paper's FAST '25 version
    assert rep.mean_ttft_s < ca.mean_ttft_s < lb.mean_ttft_s < r.mean_ttft_s
    assert rep.tokens_moved > 0
