"""Serving simulation: iteration cost, memory policies and the scheduler (§3, §6, §7)."""

from __future__ import annotations

from kvcourse.serving.accounting_tmp import (
    A100_SLOTS,
    KINDS,
    AccountingResult,
    AllocatorContractError,
    AllocatorSource,
    IterationCost,
    MemoryPolicy,
    MemoryShares,
    MemoryTimeline,
    OraclePolicy,
    PagedPolicy,
    ReserveMaxPolicy,
    a100_accounting,
    compare_policies,
    concurrency_ratios,
    default_policies,
    simulate,
)

__all__ = [
    "A100_SLOTS",
    "KINDS",
    "AccountingResult",
    "AllocatorContractError",
    "AllocatorSource",
    "IterationCost",
    "MemoryPolicy",
    "MemoryShares",
    "MemoryTimeline",
    "OraclePolicy",
    "PagedPolicy",
    "ReserveMaxPolicy",
    "a100_accounting",
    "compare_policies",
    "concurrency_ratios",
    "default_policies",
    "simulate",
]
