"""Where the KV memory went (§3.3, §3.4): serve a workload under each scheme and account its memory.

:func:`simulate` runs the :class:`~kvcourse.serving.preemption.VllmPaperScheduler` over a workload
under one memory scheme and measures it into an :class:`~kvcourse.serving.records.AccountingResult`;
:func:`compare_schemes` does it for several schemes on the same requests, :func:`a100_accounting` is
the §3.3 demo (OPT-13B on an A100-40GB serving a seeded workload), and :func:`concurrency_ratios`
the §3.4 comparison of how many requests each scheme runs at once.

**What is measured.** The run stops at the last request's arrival (``horizon_s``), so an
overloaded system is measured while its queue is still full rather than while it drains;
iterations that start before ``warmup_s`` (default: the first 20 % of the horizon) are simulated
but not measured. Shares of the five kinds of memory are memory-weighted over the measured
iterations (:mod:`kvcourse.serving.records`). **Concurrency** is the mean number of running
requests per measured iteration, and depends on the request rate, so every figure comes with its
rate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from kvcourse._checks import check_positive_int
from kvcourse.blocks.buddy import BuddyAllocator
from kvcourse.serving.checks import check_requests, check_seconds
from kvcourse.serving.cost import IterationCost, check_cost
from kvcourse.serving.preemption import VllmPaperScheduler
from kvcourse.serving.records import KINDS, AccountingResult, MemoryShares, MemoryTimeline
from kvcourse.serving.schemes import (
    A100_SLOTS,
    AllocatorSource,
    MemoryScheme,
    check_scheme,
    default_schemes,
)
from kvcourse.workloads import ALPACA, SHAREGPT, LengthDistribution, Request, generate_requests

__all__ = [
    "a100_accounting",
    "compare_schemes",
    "concurrency_ratios",
    "simulate",
    "workload_lengths",
]


def simulate(
    requests: Sequence[Request],
    scheme: MemoryScheme,
    *,
    num_slots: int = A100_SLOTS,
    cost: IterationCost | None = None,
    warmup_s: float | None = None,
    horizon_s: float | None = None,
) -> AccountingResult:
    """Serve ``requests`` with iteration-level scheduling under ``scheme`` and account the KV
    memory of every iteration (the loop: :mod:`kvcourse.serving.scheduler`; the five kinds:
    :mod:`kvcourse.serving.records`).

    ``num_slots``: the KV arena, 12,596 slots (OPT-13B, A100-40GB) by default. ``cost``: the
    iteration time model (default :meth:`IterationCost.for_gpu`). The run stops at ``horizon_s``
    (default: the last arrival); iterations before ``warmup_s`` (default 20 % of the horizon) are
    not measured. Deterministic: the same requests give the same result.
    """
    # Everything is checked, in this order, before the scheduler builds the memory.
    ordered = check_requests(requests)
    check_scheme(scheme)
    num_slots = check_positive_int("num_slots", num_slots, "e.g. A100_SLOTS (12,596)")
    cost = check_cost(cost)
    last_arrival = ordered[-1].arrival_s
    horizon = last_arrival if horizon_s is None else check_seconds("horizon_s", horizon_s)
    warmup = 0.2 * horizon if warmup_s is None else check_seconds("warmup_s", warmup_s)
    if horizon <= 0 or warmup >= horizon:
        raise ValueError(
            f"the measurement window [warmup_s, horizon_s) = [{warmup:g}, {horizon:g}) s is "
            f"empty; give the requests Poisson arrivals (rate=...), or a smaller warmup_s"
        )
    # Leaving the block frees what is still running (best effort after an error), so a caller's
    # allocator instance is handed back empty.
    with VllmPaperScheduler(
        ordered, scheme, num_slots=num_slots, cost=cost, horizon_s=horizon
    ) as run:
        return _measure(run, warmup, horizon)


def _measure(run: VllmPaperScheduler, warmup: float, horizon: float) -> AccountingResult:
    """Run ``run`` to its end and account the iterations that start at or after ``warmup``."""
    rows: list[tuple[float, int, int, int, int, int, int, int]] = []
    window_s = 0.0
    completed = produced = 0
    for it in run:
        if warmup <= it.time_s:
            row = (it.stored, it.reserved, it.internal, it.external, it.free)
            rows.append((it.time_s, *row, it.running, it.waiting))
            window_s += it.duration_s
            completed += len(it.finished)
            produced += it.running  # every running request generated one token
    if not rows:
        raise ValueError(
            f"no iteration started inside the measurement window [{warmup:g}, {horizon:g}) s; "
            f"use more requests or a smaller warmup_s"
        )
    table = np.array(rows, dtype=np.float64)
    columns = {name: table[:, i + 1].astype(np.int64) for i, name in enumerate(KINDS)}
    total = float(run.num_slots) * len(rows)
    shares = MemoryShares(**{kind: float(columns[kind].sum()) / total for kind in KINDS})
    requests = run.requests
    n = len(requests)
    span = requests[-1].arrival_s - requests[0].arrival_s
    timeline = MemoryTimeline(
        time_s=table[:, 0],
        running=table[:, 6].astype(np.int64),
        waiting=table[:, 7].astype(np.int64),
        **columns,
    )
    return AccountingResult(
        scheme=run.scheme.name,
        label=run.scheme.label,
        num_slots=run.num_slots,
        num_requests=n,
        rate=(n - 1) / span if n > 1 and span > 0 else math.nan,
        iterations=len(rows),
        total_iterations=run.iterations,
        window_s=window_s,
        shares=shares,
        mean_running=float(timeline.running.mean()),
        mean_waiting=float(timeline.waiting.mean()),
        throughput_rps=completed / window_s,
        tokens_per_s=produced / window_s,
        completed=completed,
        preemptions=run.preemptions,
        recomputed_tokens=run.recomputed_tokens,
        timeline=timeline,
    )


def compare_schemes(
    requests: Sequence[Request],
    schemes: Sequence[MemoryScheme] | None = None,
    **options: object,
) -> dict[str, AccountingResult]:
    """:func:`simulate` the same ``requests`` under each scheme (default: :func:`default_schemes`)
    and return the results keyed by scheme name ("Max", "Oracle", "Paged"). ``options`` go to
    :func:`simulate` (``num_slots``, ``cost``, ``warmup_s``, ``horizon_s``)."""
    if schemes is None:
        schemes = default_schemes()
    if isinstance(schemes, MemoryScheme) or not isinstance(schemes, Sequence) or not schemes:
        raise ValueError(f"schemes must be a non-empty list of MemoryScheme, got {schemes!r}")
    names = [getattr(p, "name", None) for p in schemes]
    if len(set(names)) != len(names):
        raise ValueError(f"schemes must have distinct names to key the results, got {names}")
    return {p.name: simulate(requests, p, **options) for p in schemes}  # type: ignore[arg-type]


_WORKLOADS: dict[str, LengthDistribution] = {"sharegpt": SHAREGPT, "alpaca": ALPACA}


def workload_lengths(workload: str | LengthDistribution) -> LengthDistribution:
    """The length distribution a workload name stands for: ``"sharegpt"`` (mean prompt 161,
    output 338) or ``"alpaca"`` (19 / 58); a :class:`~kvcourse.workloads.LengthDistribution` is
    returned as it is."""
    if isinstance(workload, str):
        if workload.lower() not in _WORKLOADS:
            raise ValueError(
                f"unknown workload {workload!r}; use 'sharegpt', 'alpaca' or a LengthDistribution"
            )
        return _WORKLOADS[workload.lower()]
    if isinstance(workload, LengthDistribution):
        return workload
    raise TypeError(f"workload must be a name or a LengthDistribution, got {workload!r}")


def a100_accounting(
    workload: str | LengthDistribution = "sharegpt",
    *,
    rate: float = 3.0,
    num_requests: int = 1800,
    seed: int = 0,
    allocator: AllocatorSource = BuddyAllocator,
    schemes: Sequence[MemoryScheme] | None = None,
    num_slots: int = A100_SLOTS,
) -> dict[str, AccountingResult]:
    """The §3.3 demo: OPT-13B on an A100-40GB (12,596 slots) serving a seeded workload.

    ``workload`` is ``"sharegpt"`` (mean prompt 161, output 338), ``"alpaca"`` (19 / 58) or any
    :class:`~kvcourse.workloads.LengthDistribution`; ``num_requests`` arrive as a Poisson process
    at ``rate`` requests per second (1800 at 3 req/s: 600 s of arrivals). Runs
    :func:`default_schemes` with ``allocator`` (or ``schemes``) and returns the results keyed by
    scheme name.
    """
    requests = generate_requests(num_requests, workload_lengths(workload), rate=rate, seed=seed)
    if schemes is None:
        schemes = default_schemes(allocator)
    return compare_schemes(requests, schemes, num_slots=num_slots)


def concurrency_ratios(results: dict[str, AccountingResult]) -> dict[str, float]:
    """How many more requests Paged runs at once than Oracle and than Max (§3.4):
    ``{"paged/oracle": …, "paged/max": …}`` from the mean running requests of each result.
    The results must come from the same workload and rate; the ratios depend on the rate."""
    missing = [name for name in ("Max", "Oracle", "Paged") if name not in results]
    if missing:
        raise ValueError(
            f"results lack {missing}; pass what compare_schemes() or a100_accounting() returned"
        )
    paged = results["Paged"].mean_running
    return {
        "paged/oracle": paged / results["Oracle"].mean_running,
        "paged/max": paged / results["Max"].mean_running,
    }
