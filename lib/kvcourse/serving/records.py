"""What a serving run reports: each iteration, the five kinds of KV memory, their shares, timeline.

**The five kinds of KV memory.** At step 5 of every iteration (:mod:`kvcourse.serving.scheduler`)
each of the ``num_slots`` slots is exactly one of these (they sum to ``num_slots`` every
iteration):

* **stored** — holds the K and V of a token of a running request (prompt or generated so far);
* **reserved** — allocated to a running request and empty now, but the request will write one of
  its own tokens there before it finishes: slots ``prompt + generated .. prompt + output − 1`` of
  a contiguous reservation. Paged allocation reserves nothing ahead, so it is 0 there;
* **internal fragmentation** — allocated to a running request and not reserved: Max and Oracle:
  the slots of a run beyond ``prompt + output``, which no token will ever use (2048 minus the final
  length; the buddy allocator's rounding up to a power of two); Paged: the empty slots of each
  sequence's last, partly filled block (at most ``block_size − 1`` per request);
* **external fragmentation** — not allocated, in an iteration whose step 3 refused the head of the
  queue although the free slots added up to at least what it asked for (2048, prompt + output, or
  its blocks × block size): the memory was free but in pieces too small for it. Then every free
  slot counts here. It never happens with Paged: any free block serves any request;
* **free** — every other slot not allocated: no one was waiting, or the free slots together were
  fewer than the head of the queue needed. The few slots that do not make a whole block
  (12,596 = 787 × 16 + 4) are free under Paged, as is what a reserve-2048 arena cannot use
  (12,596 − 6 × 2048 = 308).

Results are **memory-weighted**: the share of a kind is its slots summed over the measured
iterations divided by ``num_slots`` × the number of measured iterations, not a mean of per-request
ratios (:mod:`kvcourse.serving.simulation` says which iterations are measured).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from kvcourse.serving.memory import LiveRequest

__all__ = ["KINDS", "AccountingResult", "Iteration", "MemoryShares", "MemoryTimeline"]

#: The five kinds of KV memory, in the order the tables and plots show them.
KINDS: tuple[str, ...] = ("stored", "reserved", "internal", "external", "free")


@dataclass(frozen=True, slots=True)
class Iteration:
    """One iteration as the scheduler ran it: when it started and how long it took, the KV memory
    at its step 5 in the five kinds (they sum to ``num_slots``), the size of the batch and of the
    queue, the tokens run through the model, and which requests were admitted, preempted (since
    the previous iteration) and finished in it. ``swap_s`` is the copy time of the blocks it
    swapped out and in (``swapped_out``, ``swapped_in``), included in ``duration_s``."""

    time_s: float
    duration_s: float
    stored: int
    reserved: int
    internal: int
    external: int
    free: int
    running: int
    waiting: int
    new_tokens: int
    admitted: tuple[LiveRequest, ...]
    preempted: tuple[LiveRequest, ...]
    finished: tuple[LiveRequest, ...]
    swap_s: float = 0.0
    swapped_out: int = 0
    swapped_in: int = 0


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
    """What one scheme did to one workload.

    ``shares``: memory-weighted shares of the five kinds. ``mean_running``: concurrency, the mean
    number of running requests per measured iteration; ``mean_waiting`` the same for the queue.
    ``throughput_rps``: requests finished per second of the measurement window;
    ``tokens_per_s``: output tokens generated per second (recomputation not included).
    ``iterations`` counts measured iterations, ``total_iterations`` all simulated ones;
    ``preemptions`` and ``recomputed_tokens`` (prompt + generated tokens of each preempted request
    that was recomputed rather than swapped) count the whole run. ``rate`` is the requests' mean
    arrival rate (requests per second). Per-request latency: :mod:`kvcourse.serving.latency`.
    """

    scheme: str
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
        """One row for a table: the scheme, its five shares, concurrency and throughput."""
        row: dict[str, float | int | str] = {"scheme": self.label}
        row.update(self.shares.as_dict())
        row.update(
            running=self.mean_running,
            waiting=self.mean_waiting,
            throughput_rps=self.throughput_rps,
            preemptions=self.preemptions,
        )
        return row
