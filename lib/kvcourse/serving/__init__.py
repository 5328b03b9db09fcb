"""Serving simulation (§3, §6, §7): iteration cost, memory schemes, the scheduler, preemption and
latency.

* :mod:`kvcourse.serving.cost`: how long one iteration takes, a roofline (:class:`IterationCost`);
* :mod:`kvcourse.serving.swap_cost`: what swapping a sequence's blocks over PCIe costs against
  recomputing them (:class:`SwapCost`, exercise 6);
* :mod:`kvcourse.serving.memory`: the KV memory of one run, contiguous runs or blocks, and the
  CPU block pool swapped blocks go to;
* :mod:`kvcourse.serving.schemes`: the three memory schemes, ways to hand it out (Max, Oracle and
  Paged), and how Paged brings a preempted request back (recompute, swap, or the cheaper);
* :mod:`kvcourse.serving.checks`: the checks on a run's requests and times;
* :mod:`kvcourse.serving.scheduler`: the serving loop, one iteration at a time, first come first
  served, with two hooks for preemption (:class:`IterationScheduler`);
* :mod:`kvcourse.serving.preemption_checks`: what the loop checks of those hooks
  (:class:`PreemptionError`);
* :mod:`kvcourse.serving.preemption`: the 2023 vLLM paper's hooks, preempt the latest-arrived,
  all or nothing, swap or recompute (:class:`VllmPaperScheduler`, the one the book runs);
* :mod:`kvcourse.serving.paged_v1`: vLLM v1's paged memory (release v0.33.0): admission for the
  prompt only, preempted requests' full blocks kept cached, no swapping (:class:`PagedV1Scheme`,
  :class:`VllmV1Scheduler`);
* :mod:`kvcourse.serving.vllm_metrics`: a run's metrics under vLLM v1's names (release v0.33.0),
  in Prometheus text format (:func:`serve_with_metrics`);
* :mod:`kvcourse.serving.vllm_startup`: the KV-cache size and maximum concurrency vLLM logs at
  start-up, with its memory accounting (:func:`vllm_kv_capacity`);
* :mod:`kvcourse.serving.records`: what a run reports, per iteration and in all, and the five
  kinds of KV memory;
* :mod:`kvcourse.serving.simulation`: :func:`simulate` and the §3.3, §3.4 comparisons;
* :mod:`kvcourse.serving.latency`: per-request times and normalized latency
  (:func:`measure_latency`);
* :mod:`kvcourse.serving.sweep`: latency against request rate and the highest sustainable rate
  (:func:`latency_rate_sweep`, and :func:`sweep_each_scheme` on a grid per scheme, §7);
* :mod:`kvcourse.serving.progress`: exercise 12 on a workload: every request finishes and the
  oldest is never preempted (:func:`check_progress`), and a scheduler for which that fails.
"""

from __future__ import annotations

from kvcourse.serving.checks import check_requests
from kvcourse.serving.cost import IterationCost
from kvcourse.serving.latency import LatencyResult, RequestTimes, measure_latency
from kvcourse.serving.memory import AllocatorContractError, LiveRequest
from kvcourse.serving.paged_v1 import PagedV1Memory, PagedV1Scheme, VllmV1Scheduler
from kvcourse.serving.preemption import VllmPaperScheduler, check_scheduler_class
from kvcourse.serving.preemption_checks import PreemptionError
from kvcourse.serving.progress import PreemptEarliest, ProgressCheck, check_progress
from kvcourse.serving.records import (
    KINDS,
    AccountingResult,
    Iteration,
    MemoryShares,
    MemoryTimeline,
)
from kvcourse.serving.scheduler import IterationScheduler
from kvcourse.serving.schemes import (
    A100_SLOTS,
    RECOVERIES,
    AllocatorSource,
    MemoryScheme,
    OracleScheme,
    PagedScheme,
    ReserveMaxScheme,
    default_schemes,
)
from kvcourse.serving.simulation import (
    a100_accounting,
    compare_schemes,
    concurrency_ratios,
    simulate,
    workload_lengths,
)
from kvcourse.serving.swap_cost import (
    EX6_RECOMPUTE_S,
    PCIE_BANDWIDTH,
    PCIE_PER_COPY_S,
    SwapCost,
    SwapVsRecompute,
    ex6,
    iteration_recompute_seconds,
    recompute_seconds,
    swap_crossover_block_size,
    swap_vs_recompute,
)
from kvcourse.serving.sweep import (
    LATENCY_TARGET_S,
    SHAREGPT_GRIDS,
    SHAREGPT_RATES,
    RateSweep,
    bisect_sustainable_rate,
    latency_rate_sweep,
    sustainable_rate,
    sweep_each_scheme,
)
from kvcourse.serving.vllm_metrics import MetricsRun, serve_with_metrics
from kvcourse.serving.vllm_startup import VllmStartup, vllm_kv_capacity

__all__ = [
    "KINDS",
    "AccountingResult",
    "MemoryShares",
    "MemoryTimeline",
    "A100_SLOTS",
    "AllocatorContractError",
    "AllocatorSource",
    "IterationCost",
    "Iteration",
    "LiveRequest",
    "MemoryScheme",
    "OracleScheme",
    "PagedScheme",
    "RECOVERIES",
    "ReserveMaxScheme",
    "IterationScheduler",
    "PreemptionError",
    "VllmPaperScheduler",
    "check_scheduler_class",
    # vLLM v1's memory and scheduler
    "PagedV1Memory",
    "PagedV1Scheme",
    "VllmV1Scheduler",
    "MetricsRun",
    "VllmStartup",
    "serve_with_metrics",
    "vllm_kv_capacity",
    "a100_accounting",
    "check_requests",
    "compare_schemes",
    "concurrency_ratios",
    "default_schemes",
    "simulate",
    "workload_lengths",
    # §6: swap or recompute, exercise 6
    "EX6_RECOMPUTE_S",
    "PCIE_BANDWIDTH",
    "PCIE_PER_COPY_S",
    "SwapCost",
    "SwapVsRecompute",
    "ex6",
    "iteration_recompute_seconds",
    "recompute_seconds",
    "swap_crossover_block_size",
    "swap_vs_recompute",
    # §6: exercise 12
    "PreemptEarliest",
    "ProgressCheck",
    "check_progress",
    # §7: latency against request rate
    "LATENCY_TARGET_S",
    "SHAREGPT_GRIDS",
    "SHAREGPT_RATES",
    "LatencyResult",
    "RateSweep",
    "RequestTimes",
    "bisect_sustainable_rate",
    "latency_rate_sweep",
    "measure_latency",
    "sustainable_rate",
    "sweep_each_scheme",
]
