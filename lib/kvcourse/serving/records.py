"""What a serving simulation reports: the five kinds of KV memory, their shares, the timeline.

Results are **memory-weighted**: the share of a kind is its slots summed over the measured
iterations divided by ``num_slots`` × the number of measured iterations, not a mean of per-request
ratios (see :mod:`kvcourse.serving.accounting` for the definitions of the five kinds).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["KINDS", "AccountingResult", "MemoryShares", "MemoryTimeline"]

#: The five kinds of KV memory, in the order the tables and plots show them.
KINDS: tuple[str, ...] = ("stored", "reserved", "internal", "external", "free")


@dataclass(frozen=True)
class MemoryShares:
    """Memory-weighted shares of the five kinds of KV memory (they sum to 1); see the module
    docstring for the definitions."""

    stored: float
    reserved: float
    internal: float
    external: float
    free: float

    def as_dict(self) -> dict[str, float]:
        """The shares keyed by kind, in :data:`KINDS` order."""
        return {kind: getattr(self, kind) for kind in KINDS}


@dataclass(frozen=True, eq=False)
class MemoryTimeline:
    """Per measured iteration: its start time, the slots of each kind, and how many requests were
    running and waiting. Arrays of equal length, for plots."""

    time_s: np.ndarray
    stored: np.ndarray
    reserved: np.ndarray
    internal: np.ndarray
    external: np.ndarray
    free: np.ndarray
    running: np.ndarray
    waiting: np.ndarray


@dataclass(frozen=True)
class AccountingResult:
    """What one policy did to one workload.

    ``shares``: memory-weighted shares of the five kinds. ``mean_running``: concurrency, the mean
    number of running requests per measured iteration; ``mean_waiting`` the same for the queue.
    ``throughput_rps``: requests finished per second of the measurement window;
    ``tokens_per_s``: output tokens generated per second (recomputation not included).
    ``iterations`` counts measured iterations, ``total_iterations`` all simulated ones;
    ``preemptions`` and ``recomputed_tokens`` (prompt + generated tokens of each preempted request)
    count the whole run. ``rate`` is the requests' mean arrival rate (requests per second).
    """

    policy: str
    label: str
    num_slots: int
    num_requests: int
    rate: float
    iterations: int
    total_iterations: int
    window_s: float
    shares: MemoryShares
    mean_running: float
    mean_waiting: float
    throughput_rps: float
    tokens_per_s: float
    completed: int
    preemptions: int
    recomputed_tokens: int
    timeline: MemoryTimeline = field(repr=False, compare=False)

    def summary(self) -> dict[str, float | int | str]:
        """One row for a table: the policy, its five shares, concurrency and throughput."""
        row: dict[str, float | int | str] = {"policy": self.label}
        row.update(self.shares.as_dict())
        row.update(
            running=self.mean_running,
            waiting=self.mean_waiting,
            throughput_rps=self.throughput_rps,
            preemptions=self.preemptions,
        )
        return row
