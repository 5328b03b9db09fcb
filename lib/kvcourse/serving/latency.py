"""How long requests wait (§7): per-request times and the vLLM paper's normalized latency.

:func:`measure_latency` serves a workload with the
:class:`~kvcourse.serving.preemption.VllmPaperScheduler` and records, for every request, its
arrival, the time of its first output token and the time it finished (:class:`RequestTimes`). A
token "appears" at the end of the iteration that produced it: the first token at the end of the
request's first prefill, the last at the end of the iteration in which it finished.

**Normalized latency** is the vLLM paper's metric: a request's end-to-end latency (finish −
arrival, queueing included) divided by its number of output tokens, in seconds per token. The
result (:class:`LatencyResult`) gives its mean over the finished requests — the figure the paper
plots against the request rate — and its median and 90th percentile, beside throughput, the mean
batch size and what preemption cost (preemptions, tokens recomputed, bytes swapped out and in).

**Which requests count.** By default the run goes on until every request has finished (the
queue drains), so every request counts. The paper serves each rate for a fixed time instead; pass
``horizon_s`` to stop the clock there: requests still unfinished then are left out of every
latency figure and counted in ``unfinished``. Past the knee those are the ones that waited
longest, so a horizon makes an overloaded system look better than it is; read ``unfinished``
beside the latency.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kvcourse._checks import check_positive_int
from kvcourse.serving.checks import check_requests, check_seconds
from kvcourse.serving.cost import IterationCost, check_cost
from kvcourse.serving.preemption import VllmPaperScheduler, check_scheduler_class
from kvcourse.serving.scheduler import IterationScheduler
from kvcourse.serving.schemes import A100_SLOTS, MemoryScheme, check_scheme
from kvcourse.workloads import Request

__all__ = ["LatencyResult", "RequestTimes", "measure_latency"]


@dataclass(frozen=True, eq=False)
class RequestTimes:
    """Per request, in arrival order, arrays of equal length: its id, arrival, first-token and
    finish times (seconds; NaN when the run ended before it got there), output length and how
    often it was preempted."""

    request_id: np.ndarray
    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    output_len: np.ndarray
    preemptions: np.ndarray

    @property
    def finished(self) -> np.ndarray:
        """True for each request that finished within the run."""
        return ~np.isnan(self.finish_s)

    @property
    def latency_s(self) -> np.ndarray:
        """End-to-end latency, finish − arrival (NaN for the unfinished)."""
        return self.finish_s - self.arrival_s

    @property
    def normalized_latency_s(self) -> np.ndarray:
        """End-to-end latency per output token, seconds per token (NaN for the unfinished)."""
        return self.latency_s / self.output_len

    @property
    def ttft_s(self) -> np.ndarray:
        """Time to first token, first token − arrival (NaN if it never got one)."""
        return self.first_token_s - self.arrival_s


@dataclass(frozen=True)
class LatencyResult:
    """What one scheme did to one workload, seen from the requests (§7).

    Latency figures cover the ``finished`` requests only (``unfinished`` ones, possible with a
    horizon, are left out): ``normalized_latency_s`` is the mean of end-to-end latency / output
    tokens (s/token), ``normalized_latency_p50_s`` and ``normalized_latency_p90_s`` its median and
    90th percentile, ``mean_latency_s`` and ``mean_ttft_s`` the mean end-to-end latency and time to
    first token. ``duration_s`` runs from the first arrival to the end of the last iteration;
    ``throughput_rps`` and ``tokens_per_s`` are finished requests and their output tokens per
    second of it. ``mean_batch_size``: running requests per iteration. Preemption, for the whole
    run: ``preemptions``, of which ``recomputations`` re-prefilled ``recomputed_tokens`` tokens
    (``prompt_tokens`` is the workload's own prompt total, to compare with) and ``swap_outs``
    swapped; ``swap_fallbacks`` swaps recomputed for want of CPU blocks; bytes swapped out and in,
    and ``swap_s``, their copy time (part of the iterations' time). ``rate``: the workload's mean
    arrival rate (requests per second).
    """

    scheme: str
    label: str
    recovery: str
    rate: float
    num_requests: int
    finished: int
    unfinished: int
    duration_s: float
    normalized_latency_s: float
    normalized_latency_p50_s: float
    normalized_latency_p90_s: float
    mean_latency_s: float
    mean_ttft_s: float
    throughput_rps: float
    tokens_per_s: float
    mean_batch_size: float
    iterations: int
    preemptions: int
    recomputations: int
    recomputed_tokens: int
    prompt_tokens: int
    swap_outs: int
    swap_fallbacks: int
    swapped_out_bytes: int
    swapped_in_bytes: int
    swap_s: float
    times: RequestTimes = field(repr=False, compare=False)

    def summary(self) -> dict[str, float | int | str]:
        """One row for a table, latencies in ms per token."""
        return {
            "scheme": self.label,
            "rate": self.rate,
            "mean ms/token": 1e3 * self.normalized_latency_s,
            "p50 ms/token": 1e3 * self.normalized_latency_p50_s,
            "p90 ms/token": 1e3 * self.normalized_latency_p90_s,
            "throughput_rps": self.throughput_rps,
            "batch": self.mean_batch_size,
            "preemptions": self.preemptions,
            "finished": self.finished,
        }


def measure_latency(
    requests: Sequence[Request],
    scheme: MemoryScheme,
    *,
    num_slots: int = A100_SLOTS,
    cost: IterationCost | None = None,
    horizon_s: float | None = None,
    scheduler: type[IterationScheduler] = VllmPaperScheduler,
) -> LatencyResult:
    """Serve ``requests`` under ``scheme`` with ``scheduler`` (the 2023 vLLM paper's
    :class:`~kvcourse.serving.preemption.VllmPaperScheduler` by default, or a subclass that preempts
    someone else) and measure every request's latency.

    ``num_slots``: the KV arena (12,596 slots, OPT-13B on an A100-40GB); ``cost``: the iteration
    time model (default :meth:`IterationCost.for_gpu`). The run goes on until every request has
    finished, or stops at ``horizon_s`` (then the unfinished are left out of the latency figures:
    see the module docstring). Deterministic: the same requests give the same result.
    """
    ordered = check_requests(requests)
    check_scheme(scheme)
    num_slots = check_positive_int("num_slots", num_slots, "e.g. A100_SLOTS (12,596)")
    cost = check_cost(cost)
    horizon = math.inf if horizon_s is None else check_seconds("horizon_s", horizon_s)
    check_scheduler_class(scheduler)
    n = len(ordered)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    preempted = np.zeros(n, dtype=np.int64)
    batch = 0
    with scheduler(ordered, scheme, num_slots=num_slots, cost=cost, horizon_s=horizon) as run:
        for it in run:
            end = it.time_s + it.duration_s
            batch += it.running
            for live in it.admitted:
                if live.preemptions == 0:  # admitted for the first time: its prefill's token
                    first[live.order] = end
            for live in it.finished:
                finish[live.order] = end
                preempted[live.order] = live.preemptions
        for live in (*run.running, *run.waiting):
            preempted[live.order] = live.preemptions
    end_s = run.time_s
    arrival = np.array([r.arrival_s for r in ordered])
    output = np.array([r.output_len for r in ordered], dtype=np.int64)
    times = RequestTimes(
        request_id=np.array([r.request_id for r in ordered], dtype=np.int64),
        arrival_s=arrival,
        first_token_s=first,
        finish_s=finish,
        output_len=output,
        preemptions=preempted,
    )
    mean_batch = batch / run.iterations if run.iterations else math.nan
    return _result(run, times, end_s, mean_batch)


def _result(
    run: IterationScheduler, times: RequestTimes, end_s: float, batch: float
) -> LatencyResult:
    done = times.finished
    finished = int(done.sum())
    norm = times.normalized_latency_s[done]
    p50, p90 = np.percentile(norm, [50, 90]) if finished else (math.nan, math.nan)
    n = len(times.arrival_s)
    span = float(times.arrival_s[-1] - times.arrival_s[0])
    duration = end_s - float(times.arrival_s[0])
    block_bytes = run.swap_cost.block_bytes if run.swap_cost is not None else 0
    return LatencyResult(
        scheme=run.scheme.name,
        label=run.scheme.label,
        recovery=run.recovery,
        rate=(n - 1) / span if n > 1 and span > 0 else math.nan,
        num_requests=n,
        finished=finished,
        unfinished=n - finished,
        duration_s=duration,
        normalized_latency_s=float(norm.mean()) if finished else math.nan,
        normalized_latency_p50_s=float(p50),
        normalized_latency_p90_s=float(p90),
        mean_latency_s=float(times.latency_s[done].mean()) if finished else math.nan,
        mean_ttft_s=float(times.ttft_s[done].mean()) if finished else math.nan,
        throughput_rps=finished / duration if duration > 0 else math.nan,
        tokens_per_s=float(times.output_len[done].sum()) / duration if duration > 0 else math.nan,
        mean_batch_size=batch,
        iterations=run.iterations,
        preemptions=run.preemptions,
        recomputations=run.recomputations,
        recomputed_tokens=run.recomputed_tokens,
        prompt_tokens=sum(r.prompt_len for r in run.requests),
        swap_outs=run.swap_outs,
        swap_fallbacks=run.swap_fallbacks,
        swapped_out_bytes=run.swapped_out_blocks * block_bytes,
        swapped_in_bytes=run.swapped_in_blocks * block_bytes,
        swap_s=run.swap_s,
        times=times,
    )
