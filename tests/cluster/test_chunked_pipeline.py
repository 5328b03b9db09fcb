"""Chunked pipeline parallelism across prefill nodes (kvcourse.cluster.chunked_pipeline)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcourse.cluster.chunked_pipeline import (
    PipelineSchedule,
    chunk_lengths,
    chunked_pipeline,
)
from kvcourse.cluster.prefill_node import PrefillNode
from kvcourse.sizing import prefill_flops
from kvcourse.specs import LLAMA2_70B, OPT_13B

NODE_RATE = 8 * 312e12 * 0.6


def test_chunk_lengths():
    assert chunk_lengths(10_000, 4096) == [4096, 4096, 1808]
    assert chunk_lengths(8192, 4096) == [4096, 4096]
    assert chunk_lengths(100, 4096) == [100]
    with pytest.raises(ValueError, match="chunk_len must be positive"):
        chunk_lengths(100, 0)


def test_128k_prompt_on_four_nodes_nears_four_times():
    schedule = chunked_pipeline(131_072, 4, 4096)
    assert isinstance(schedule, PipelineSchedule)
    assert schedule.num_chunks == 32 and len(schedule.slots) == 32 * 4
    assert schedule.single_node_s == pytest.approx(prefill_flops(LLAMA2_70B, 131_072) / NODE_RATE)
    assert schedule.single_node_s == pytest.approx(27.06, abs=0.01)
    assert schedule.total_s == pytest.approx(7.74, abs=0.01)
    assert 3.4 < schedule.speedup < 4
    # What is lost is the fill and drain: the last chunk still has three stages to go when the
    # first stage is done with it.
    last = [s for s in schedule.slots if s.chunk == 31]
    first_stage_done = max(s.end_s for s in schedule.slots if s.stage == 0)
    assert schedule.total_s - first_stage_done == pytest.approx(
        3 * (last[0].end_s - last[0].start_s) + 3 * schedule.hop_s
    )
    # Finer chunks fill the pipeline faster; coarser ones slower.
    assert chunked_pipeline(131_072, 4, 2048).speedup > schedule.speedup
    assert chunked_pipeline(131_072, 4, 16_384).speedup < schedule.speedup


def test_later_chunks_cost_more_because_they_attend_to_more():
    schedule = chunked_pipeline(131_072, 4, 4096)
    durations = [s.end_s - s.start_s for s in schedule.slots if s.stage == 0]
    assert durations == sorted(durations)
    assert durations[-1] > 2 * durations[0]


def test_a_short_prompt_gains_nothing_and_loses_almost_nothing():
    schedule = chunked_pipeline(2000, 4, 4096)
    assert schedule.num_chunks == 1
    hop = 2000 * 8192 * 2 / 100e9  # activations of 2,000 tokens over 100 GB/s RDMA
    assert schedule.hop_s == pytest.approx(hop)
    assert schedule.total_s == pytest.approx(schedule.single_node_s + 3 * hop)
    assert 0.99 < schedule.speedup < 1
    free = chunked_pipeline(2000, 4, 4096, link_bandwidth=None)
    assert free.total_s == pytest.approx(free.single_node_s) and free.hop_s == 0


@settings(max_examples=40, deadline=None)
@given(
    prompt=st.integers(1, 60_000),
    chunk=st.integers(256, 16_384),
    stages=st.sampled_from([1, 2, 4, 5, 8]),
)
def test_schedule_obeys_pipeline_and_causality(prompt, chunk, stages):
    schedule = chunked_pipeline(prompt, stages, chunk)
    at = {(s.chunk, s.stage): s for s in schedule.slots}
    lengths = chunk_lengths(prompt, chunk)
    for (c, s), slot in at.items():
        if s > 0:  # its activations came from the stage before, over 100 GB/s
            hop = lengths[c] * LLAMA2_70B.hidden_size * 2 / 100e9
            assert slot.start_s >= at[c, s - 1].end_s + hop * (1 - 1e-9)
        if c > 0:  # the earlier chunk's KV of these layers is on this stage
            assert slot.start_s >= at[c - 1, s].end_s
    busy = sum(s.end_s - s.start_s for s in schedule.slots)
    assert busy == pytest.approx(schedule.single_node_s)  # no FLOP lost or added
    assert schedule.total_s >= schedule.single_node_s / stages * (1 - 1e-9)
    assert schedule.total_s == max(s.end_s for s in schedule.slots)
    if stages == 1:
        assert schedule.total_s == pytest.approx(schedule.single_node_s)


def test_inputs_are_checked():
    with pytest.raises(ValueError, match="do not split evenly into 3 stages"):
        chunked_pipeline(10_000, 3)
    opt = chunked_pipeline(10_000, 8, node=PrefillNode(OPT_13B))
    assert opt.num_stages == 8  # 40 layers: 5 each
    with pytest.raises(ValueError, match="num_stages must be positive"):
        chunked_pipeline(10_000, 0)
    with pytest.raises(ValueError, match="prompt_len must be positive"):
        chunked_pipeline(0)
    with pytest.raises(ValueError, match="link_bandwidth"):
        chunked_pipeline(10_000, link_bandwidth=0)
    with pytest.raises(TypeError, match="PrefillNode"):
        chunked_pipeline(10_000, node="LLaMA2-70B")
