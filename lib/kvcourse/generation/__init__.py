"""Sampling and beam search on shared blocks (§5), counted and with the tiny transformer."""

from __future__ import annotations

from kvcourse.generation.decoding_tmp import (
    Beam,
    BeamComparison,
    BeamCopyReport,
    BeamSearchRun,
    ManagerFactory,
    ParallelSamplingReport,
    SamplingRun,
    SharedPrefixReport,
    beam_search,
    compare_beam_search,
    copy_sequence,
    expected_cow_count,
    full_copy_tokens,
    parallel_sampling,
    parallel_sampling_sweep,
    random_parent_choices,
    sample_in_parallel,
    scripted_beam_search,
    shared_prefix,
)

__all__ = [
    "Beam",
    "BeamComparison",
    "BeamCopyReport",
    "BeamSearchRun",
    "ManagerFactory",
    "ParallelSamplingReport",
    "SamplingRun",
    "SharedPrefixReport",
    "beam_search",
    "compare_beam_search",
    "copy_sequence",
    "expected_cow_count",
    "full_copy_tokens",
    "parallel_sampling",
    "parallel_sampling_sweep",
    "random_parent_choices",
    "sample_in_parallel",
    "scripted_beam_search",
    "shared_prefix",
]
