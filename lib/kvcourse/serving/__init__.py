"""Serving simulation: iteration cost, memory policies and the scheduler (§3, §6, §7)."""

from __future__ import annotations

from kvcourse.serving.accounting_tmp import (
    A100_SLOTS,
    AllocatorContractError,
    AllocatorSource,
    IterationCost,
    MemoryPolicy,
    OraclePolicy,
    PagedPolicy,
    ReserveMaxPolicy,
    a100_accounting,
    compare_policies,
    concurrency_ratios,
    default_policies,
    simulate,
)
from kvcourse.serving.records import (
    KINDS,
    AccountingResult,
    MemoryShares,
    MemoryTimeline,
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
    "MemoryPolicy",
    "OraclePolicy",
    "PagedPolicy",
    "ReserveMaxPolicy",
    "a100_accounting",
    "compare_policies",
    "concurrency_ratios",
    "default_policies",
    "simulate",
]
