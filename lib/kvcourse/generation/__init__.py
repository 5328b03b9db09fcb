"""Sampling and beam search on shared blocks (§5), counted and with the tiny transformer.

Every driver runs on the three operations of :mod:`kvcourse.blocks.sharing` (fork, append with
copy-on-write, free) through any block manager with the
:class:`~kvcourse.blocks.sharing.ForkAppendFree` interface: pass ``manager_factory=YourClass`` to
run the book's numbers with your own piece. Memory *with* sharing is what the pool really holds
(``pool.num_used``); memory *without* sharing is what the same sequences would hold if each kept
its own copy of everything, ``Σ ceil(length / B)`` blocks.

Bookkeeping only (block ids and counts, no model):

* :mod:`kvcourse.generation.sampling_counts`: parallel sampling, Ex 4 (§5.1);
* :mod:`kvcourse.generation.beam_counts`: beam search with given parent choices, Ex 5 (§5.2);
* :mod:`kvcourse.generation.prefix_counts`: requests sharing one prefix (§5.3).

With K and V (the tiny transformer; outputs must not depend on sharing):

* :mod:`kvcourse.generation.kv_schemes`: fork on a sharing paged cache, or a full copy;
* :mod:`kvcourse.generation.beam_decoding`: real beam search under both schemes;
* :mod:`kvcourse.generation.sampling_decoding`: parallel sampling under both schemes;
* :mod:`kvcourse.generation.prefix_reuse`: few-shot prompts through a prefix cache, Ex 7 (§8.3).

Token eviction (§10, the course's own beyond the lecture):

* :mod:`kvcourse.generation.token_eviction`: H2O's heavy hitters and sinks + window on the tiny
  transformer, against the full cache.
"""

from __future__ import annotations

from kvcourse.generation._setup import ManagerFactory
from kvcourse.generation.beam_counts import (
    BeamCopyReport,
    expected_cow_count,
    full_copy_tokens,
    random_parent_choices,
    scripted_beam_search,
)
from kvcourse.generation.beam_decoding import (
    Beam,
    BeamComparison,
    BeamSearchRun,
    beam_search,
    compare_beam_search,
)
from kvcourse.generation.kv_schemes import copy_sequence
from kvcourse.generation.prefix_counts import SharedPrefixReport, shared_prefix
from kvcourse.generation.prefix_reuse import (
    PrefixReuseReport,
    ex7_saved_share,
    few_shot_prefix_reuse,
    few_shot_saved_shares,
)
from kvcourse.generation.sampling_counts import (
    ParallelSamplingReport,
    parallel_sampling,
    parallel_sampling_sweep,
)
from kvcourse.generation.sampling_decoding import SamplingRun, sample_in_parallel
from kvcourse.generation.token_eviction import (
    AttentionShares,
    EvictionPoint,
    EvictionRun,
    attention_map,
    attention_shares,
    evicted_decode,
    eviction_sweep,
    h2o_kept,
    h2o_victim,
)

__all__ = [
    "Beam",
    "EvictionPoint",
    "EvictionRun",
    "BeamComparison",
    "BeamCopyReport",
    "BeamSearchRun",
    "ManagerFactory",
    "ParallelSamplingReport",
    "SamplingRun",
    "PrefixReuseReport",
    "SharedPrefixReport",
    "AttentionShares",
    "attention_map",
    "attention_shares",
    "beam_search",
    "compare_beam_search",
    "copy_sequence",
    "ex7_saved_share",
    "evicted_decode",
    "eviction_sweep",
    "expected_cow_count",
    "few_shot_prefix_reuse",
    "few_shot_saved_shares",
    "full_copy_tokens",
    "h2o_kept",
    "h2o_victim",
    "parallel_sampling",
    "parallel_sampling_sweep",
    "random_parent_choices",
    "sample_in_parallel",
    "scripted_beam_search",
    "shared_prefix",
]
