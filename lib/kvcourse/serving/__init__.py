"""Serving simulation (§3, §6, §7): iteration cost, memory policies and the scheduler.

* :mod:`kvcourse.serving.cost`: how long one iteration takes, a roofline (:class:`IterationCost`);
* :mod:`kvcourse.serving.memory`: the KV memory of one run, contiguous runs or blocks;
* :mod:`kvcourse.serving.policies`: the three ways to hand it out, Max, Oracle and Paged;
* :mod:`kvcourse.serving.scheduler`: the scheduler, one iteration at a time (:class:`Scheduler`);
* :mod:`kvcourse.serving.records`: what a run reports, per iteration and in all, and the five
  kinds of KV memory;
* :mod:`kvcourse.serving.simulation`: :func:`simulate` and the §3.3, §3.4 comparisons.
"""

from __future__ import annotations

from kvcourse.serving.cost import IterationCost
from kvcourse.serving.memory import AllocatorContractError, LiveRequest
from kvcourse.serving.policies import (
    A100_SLOTS,
    AllocatorSource,
    MemoryPolicy,
    OraclePolicy,
    PagedPolicy,
    ReserveMaxPolicy,
    default_policies,
)
from kvcourse.serving.records import (
    KINDS,
    AccountingResult,
    Iteration,
    MemoryShares,
    MemoryTimeline,
)
from kvcourse.serving.scheduler import Scheduler
from kvcourse.serving.simulation import (
    a100_accounting,
    compare_policies,
    concurrency_ratios,
    simulate,
)

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
    "MemoryPolicy",
    "OraclePolicy",
    "PagedPolicy",
    "ReserveMaxPolicy",
    "Scheduler",
    "a100_accounting",
    "compare_policies",
    "concurrency_ratios",
    "default_policies",
    "simulate",
]
