"""A disaggregated cluster under overload (§9.6, Mooncake §7): a prefill pool and a decode pool,
more requests than the decode pool can serve, and what a run of it counts. The three rules for
when to reject are in :mod:`kvcourse.cluster.rejection`, and the event simulation that runs them
in :mod:`kvcourse.cluster.overload_sim`.

The model, with every constant a field of :class:`OverloadConfig` (defaults in brackets):

* **Prefill instance**: one ``node`` [:class:`~kvcourse.cluster.prefill_node.PrefillNode`:
  LLaMA2-70B on 8 × A800-80GB (312 TFLOP/s BF16) at 60 % of peak], so a prompt of ``n`` tokens
  takes :func:`~kvcourse.sizing.prefill_flops` ``(model, n) / (8 × 312e12 × 0.6)`` seconds:
  1.23 s for the conversation trace's mean prompt of 12,035 tokens, 1.45 s on average over its
  prompts (the attention term grows with the square of the length). Each instance is
  a FIFO queue; a request goes to the instance where it would *finish* first, and is admitted
  only if that finish is within ``ttft_slo_s`` [5 s, the Conductor's SLO of §9.4] of its arrival
  (the TTFT check).
* **Decode instance**: a batch of at most ``max_batch`` [8] requests, the cap the TBT SLO puts
  on the batch; a request in it takes ``output_len × tbt_s`` [0.05 s] seconds and then frees
  its slot. When a prefill ends the request goes to the least loaded decode instance with a free
  slot; if there is none it is rejected and its prefill was wasted. KV transfer takes no time.
* **Capacities**: the decode pool completes at most ``num_decode × max_batch / (mean output_len
  × tbt_s)`` requests/s [8 × 8 / (343 × 0.05) = 3.74/s on the conversation trace], the prefill
  pool about ``num_prefill`` [8] / 1.45 s = 5.5/s. The two meet at ``max_batch`` ≈ 12; 8 keeps
  decode the bottleneck, as in the lecture. At 2× the decode capacity (7.5/s) the prefill pool
  is overloaded too, so the TTFT check also turns requests away, mostly in the baseline.
* **Loads**, sampled every ``sample_every_s`` [1 s] from 0 to the last arrival: the prefill
  pool's load is its admitted prefill work not yet done, as a fraction of the most the TTFT
  check lets it hold (``num_prefill × ttft_slo_s`` seconds); the decode pool's is its occupied
  slots over ``num_decode × max_batch``. Their Pearson correlation is taken after ``warmup_s``
  [300 s, for the queues to fill].
* **Predictive rejection's** ``t_d`` is ``predicted_decode_s`` [None: the requests' mean
  ``output_len × tbt_s``, 17.1 s on the conversation trace].

Events at one instant run in the order: decodes end, prefills end, requests arrive, the load is
sampled. Every simulation runs until the cluster is empty, so ``arrived = rejected + completed``.

The numbers above, on the conversation trace:

>>> from kvcourse.traces import load_mooncake_trace
>>> conv, cfg = load_mooncake_trace("conversation"), DEFAULT_CONFIG
>>> round(conv.mean_prompt_len), round(prefill_seconds(12_035), 2)
(12035, 1.23)
>>> prefill = sum(prefill_seconds(r.prompt_len) for r in conv.requests) / conv.num_requests
>>> round(prefill, 2), round(cfg.num_prefill / prefill, 1)  # seconds; the prefill pool's req/s
(1.45, 5.5)
>>> decode = cfg.decode_capacity(conv.mean_output_len)
>>> round(conv.mean_output_len), round(decode, 2), round(2 * decode, 1)
(343, 3.74, 7.5)
>>> round(cfg.num_prefill / prefill / decode * cfg.max_batch)  # where the two capacities meet
12
>>> round(conv.mean_output_len * cfg.tbt_s, 1)  # predictive rejection's t_d
17.1
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kvcourse._checks import check_count, check_positive_int, check_positive_number, check_seconds
from kvcourse.cluster.prefill_node import DEFAULT_NODE, PrefillNode
from kvcourse.sizing import prefill_flops
from kvcourse.traces import Trace

__all__ = [
    "DEFAULT_CONFIG",
    "OUTCOMES",
    "OverloadConfig",
    "OverloadRequest",
    "OverloadResult",
    "poisson_requests",
    "prefill_seconds",
    "trace_requests",
]

#: A request's fate: it completed, the TTFT check turned it away at arrival, the rejection rule
#: did (no decode room, now or predicted), or it was rejected after its prefill (a wasted
#: prefill).
OUTCOMES: tuple[str, ...] = ("completed", "ttft", "early", "wasted")


@dataclass(frozen=True)
class OverloadConfig:
    """The cluster and the SLOs of an overload run (module docstring: what each field means and
    why its default). Checked on construction."""

    num_prefill: int = 8
    num_decode: int = 8
    max_batch: int = 8
    tbt_s: float = 0.05
    ttft_slo_s: float = 5.0
    node: PrefillNode = DEFAULT_NODE
    sample_every_s: float = 1.0
    warmup_s: float = 300.0
    predicted_decode_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("num_prefill", "num_decode", "max_batch"):
            check_positive_int(name, getattr(self, name))
        for name in ("tbt_s", "ttft_slo_s", "sample_every_s"):
            check_positive_number(name, getattr(self, name), " of seconds")
        if not isinstance(self.node, PrefillNode):
            raise TypeError(
                f"node must be a kvcourse.cluster.PrefillNode (each prefill instance), "
                f"got {self.node!r}"
            )
        check_seconds("warmup_s", self.warmup_s)
        if self.predicted_decode_s is not None:
            check_positive_number("predicted_decode_s", self.predicted_decode_s, " of seconds")

    @property
    def decode_slots(self) -> int:
        """Requests the whole decode pool can hold at once: ``num_decode × max_batch``."""
        return self.num_decode * self.max_batch

    def decode_capacity(self, mean_output_len: float) -> float:
        """Requests per second the decode pool completes when full, for answers of
        ``mean_output_len`` tokens on average: ``decode_slots / (mean_output_len × tbt_s)``."""
        mean_output_len = check_positive_number("mean_output_len", mean_output_len, " of tokens")
        return self.decode_slots / (mean_output_len * self.tbt_s)


#: The cluster of the module docstring, 8 prefill + 8 decode instances: every function's default.
DEFAULT_CONFIG = OverloadConfig()


@dataclass(frozen=True)
class OverloadRequest:
    """One request of an overload run: it arrives at ``arrival_s`` with a ``prompt_len``-token
    prompt and will generate ``output_len`` tokens (which no rejection rule knows in advance)."""

    arrival_s: float
    prompt_len: int
    output_len: int


@dataclass(frozen=True)
class OverloadResult:
    """What one run of a rejection ``rule`` counted. ``rejected_at_arrival`` includes the
    ``rejected_for_ttft`` that the TTFT check turned away; ``rejected_after_prefill`` are the
    wasted prefills, ``wasted_prefill_s`` their seconds (out of ``prefill_s`` done in all).
    ``peak_decode_batch`` is the largest batch any decode instance held. ``outcomes[i]`` is
    request ``i``'s fate (one of :data:`OUTCOMES`) and ``ends_s[i]`` when it was decided: its
    arrival, its prefill's end, or its decode's end. ``times``, ``prefill_load`` and
    ``decode_load`` are the sampled loads (fractions, module docstring), ``correlation`` their
    Pearson correlation after the warm-up."""

    rule: str
    arrived: int
    rejected_at_arrival: int
    rejected_for_ttft: int
    rejected_after_prefill: int
    completed: int
    wasted_prefill_s: float
    prefill_s: float
    peak_decode_batch: int
    outcomes: tuple[str, ...]
    ends_s: tuple[float, ...]
    times: tuple[float, ...]
    prefill_load: tuple[float, ...]
    decode_load: tuple[float, ...]
    correlation: float

    @property
    def rejected(self) -> int:
        """Every rejected request, at arrival or after its prefill."""
        return self.rejected_at_arrival + self.rejected_after_prefill

    @property
    def wasted_prefills(self) -> int:
        """Prefills done for a request that was then rejected (``rejected_after_prefill``)."""
        return self.rejected_after_prefill


def prefill_seconds(prompt_len: int, config: OverloadConfig = DEFAULT_CONFIG) -> float:
    """Seconds one prefill instance of ``config`` takes for a ``prompt_len``-token prompt:
    ``prefill_flops(model, prompt_len)`` on ``config.node``."""
    if not isinstance(config, OverloadConfig):
        raise TypeError(f"config must be an OverloadConfig, got {config!r:.80}")
    return config.node.seconds(prefill_flops(config.node.model, prompt_len))


def poisson_requests(
    trace: Trace,
    *,
    load: float = 2.0,
    duration_s: float = 3600.0,
    config: OverloadConfig = DEFAULT_CONFIG,
    seed: int = 0,
) -> tuple[OverloadRequest, ...]:
    """Stationary Poisson arrivals at ``load`` × the decode capacity of ``config`` for
    ``duration_s`` seconds, each request's (input, output) lengths drawn together, with
    replacement, from a request of ``trace`` (seeded, so the same seed gives the same requests).

    The capacity is :meth:`OverloadConfig.decode_capacity` at ``trace``'s mean output length, so
    ``load=2`` offers twice what the decode pool can complete.
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"trace must be a kvcourse.traces.Trace, got {trace!r:.80}")
    if trace.num_requests == 0:
        raise ValueError("trace has no requests to draw lengths from")
    if not isinstance(config, OverloadConfig):
        raise TypeError(f"config must be an OverloadConfig, got {config!r:.80}")
    if trace.mean_output_len <= 0:
        raise ValueError("trace's answers are all empty (mean output 0): no decode time to load")
    load = check_positive_number("load", load, " (a multiple of the decode capacity, e.g. 2)")
    duration_s = check_positive_number("duration_s", duration_s, " of seconds")
    rng = np.random.default_rng(check_count("seed", seed))
    rate = load * config.decode_capacity(trace.mean_output_len)
    expected = rate * duration_s
    arrivals = np.cumsum(rng.exponential(1.0 / rate, int(expected + 10 * math.sqrt(expected) + 10)))
    while arrivals[-1] < duration_s:  # practically never: 10 standard deviations above the mean
        arrivals = np.concatenate(
            [arrivals, arrivals[-1] + np.cumsum(rng.exponential(1.0 / rate, 100))]
        )
    arrivals = arrivals[arrivals < duration_s]
    picks = rng.integers(trace.num_requests, size=len(arrivals))
    pool = trace.requests
    return tuple(
        OverloadRequest(float(t), pool[i].prompt_len, pool[i].output_len)
        for t, i in zip(arrivals.tolist(), picks.tolist(), strict=True)
    )


def trace_requests(trace: Trace, *, speedup: float = 1.0) -> tuple[OverloadRequest, ...]:
    """``trace``'s own requests with their own arrival times divided by ``speedup`` (2: the
    same hour of traffic in half an hour, twice the rate), measured from its first arrival."""
    if not isinstance(trace, Trace):
        raise TypeError(f"trace must be a kvcourse.traces.Trace, got {trace!r:.80}")
    speedup = check_positive_number("speedup", speedup, " (a factor such as 2)")
    start = trace.requests[0].arrival_s if trace.requests else 0.0
    return tuple(
        OverloadRequest((r.arrival_s - start) / speedup, r.prompt_len, r.output_len)
        for r in trace.requests
    )
