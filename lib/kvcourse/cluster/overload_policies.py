"""The three answers to *when* an overloaded disaggregated cluster rejects a request (§9.6,
Mooncake §7): after its prefill, at arrival by the decode load now, or at arrival by the decode
load predicted for the moment its prefill ends.

Every policy first applies the TTFT check at arrival: the request is admitted to a prefill
instance only if that instance's queue plus its own prefill ends within the TTFT SLO. They differ
in what they know about the decode pool at that moment:

* ``"baseline"`` (reject after prefill) does not look at it. If no decode instance has a free
  slot when the prefill ends, the request is rejected then, and its prefill was wasted.
* ``"early"`` (early rejection) also rejects at arrival when the decode pool is full *now*. It
  ignores the requests it has already admitted that are still in prefill, so right after slots
  free up it admits a whole prefill time's worth of arrivals for them: the loads of the two pools
  swing in anti-phase (§9.6's load oscillation).
* ``"predictive"`` (prediction-based early rejection) forecasts the decode load at the moment
  ``T`` this request's prefill would end, assuming every decode lasts ``t_d`` seconds (the mean
  decode duration): a running decode that started at ``s`` still holds its slot at ``T`` if
  ``s + t_d > T``, and an admitted request whose prefill ends at ``f`` holds one if
  ``T - t_d < f <= T``. It rejects when that forecast reaches the pool's slots
  (:func:`predicted_decode_load`). With long-tailed outputs the equal-``t_d`` guess is wrong both
  ways: long answers hold their slots past ``s + t_d``, short ones leave early.

On the default hour (:func:`~kvcourse.cluster.overload.poisson_requests` of the conversation
trace at 2× the decode capacity, seed 0: 27,116 requests) the wasted prefills go 12,993 → 5,879
→ 3,477 (early −55 %, predictive −73 %), the completions 13,248 → 12,991 → 12,497 (−2 %, −6 %)
and the correlation of the two pools' loads +0.00 → −0.27 → −0.26. How well the prediction does
depends on its horizon, the prefill queue plus the prefill, against ``t_d``. With long queues,
as here (11 s from arrival to the end of prefill on average, against a ``t_d`` of 17 s), the
forecast is mostly the admitted requests in prefill, which it knows: on average it is right
(60.8 slots predicted against 61.4 taken), but it reaches the 64 slots more often than the real
load does (for 42 % of the arrivals against 34 %), so it also turns away requests that would
have found a slot. With short queues (a TTFT SLO of 5–10 s, or ``max_batch=4`` so that the
prefill pool keeps up) the forecast is mostly the running decodes, and those include more long
answers than the average does (a long answer stays longer, so more of the decodes running at any
moment are long ones). It then under-counts (23.6 of 32 slots against 31.5 with ``max_batch=4``)
and cuts the waste by only 1–12 %.

:func:`simulate_overload` runs one policy over a list of requests on the cluster of
:mod:`kvcourse.cluster.overload` as an event simulation (a heap of prefill and decode ends,
merged with the arrivals in order; events at one instant run decodes' ends first, then
prefills' ends, then arrivals, then the load sample), until the cluster is empty.
:func:`compare_rejection_policies` runs all three on the same requests. An hour at 2× the
default cluster's decode capacity (27,000 requests) takes about 0.1 s per policy on a 2-core CPU.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Sequence

import numpy as np

from kvcourse._checks import check_count, is_real
from kvcourse.cluster.overload import (
    DEFAULT_CONFIG,
    OverloadConfig,
    OverloadRequest,
    OverloadResult,
    prefill_seconds,
)

__all__ = [
    "REJECTION_POLICIES",
    "REJECTION_POLICY_LABELS",
    "compare_rejection_policies",
    "load_correlation",
    "predicted_decode_load",
    "rejects_at_arrival",
    "simulate_overload",
]

#: The rejection policies, in the order :func:`compare_rejection_policies` runs them.
REJECTION_POLICIES: tuple[str, ...] = ("baseline", "early", "predictive")

#: How the book and the figures name each policy.
REJECTION_POLICY_LABELS: dict[str, str] = {
    "baseline": "reject after prefill",
    "early": "early rejection",
    "predictive": "predictive early rejection",
}


def _check_policy(policy: object) -> str:
    """``policy`` if it is one of :data:`REJECTION_POLICIES`; a clear error otherwise."""
    if not isinstance(policy, str):
        raise TypeError(f"policy must be a str, one of {REJECTION_POLICIES}, got {policy!r}")
    if policy not in REJECTION_POLICIES:
        raise ValueError(f"unknown rejection policy {policy!r}; pass one of {REJECTION_POLICIES}")
    return policy


def predicted_decode_load(
    finish_s: float,
    running_starts: Sequence[float],
    prefill_finishes: Sequence[float],
    decode_s: float,
) -> int:
    """The decode slots predicted to be taken at ``finish_s``, when a new request's prefill would
    end, if every decode lasts ``decode_s`` seconds (Mooncake's prediction-based early rejection).

    ``running_starts`` are the start times of the decodes running now and ``prefill_finishes``
    the prefill end times of the admitted requests still in prefill, both **sorted**. A running
    decode counts if ``start + decode_s > finish_s``; a request in prefill counts if it enters
    decode by then and is still decoding, ``finish_s - decode_s < f <= finish_s``.

    At ``finish_s = 10`` with ``decode_s = 5``: the decodes that started at 0 and 4 are expected
    to be done (by 5 and 9), the one from 7 still runs; the prefill ending at 8 has entered
    decode, the one ending at 12 has not yet:

    >>> predicted_decode_load(10.0, [0.0, 4.0, 7.0], [8.0, 12.0], decode_s=5.0)
    2
    """
    since = finish_s - decode_s
    running = len(running_starts) - bisect.bisect_right(running_starts, since)
    arriving = bisect.bisect_right(prefill_finishes, finish_s) - bisect.bisect_right(
        prefill_finishes, since
    )
    return running + arriving


def rejects_at_arrival(
    policy: str,
    *,
    slots: int,
    occupied: int,
    finish_s: float,
    running_starts: Sequence[float],
    prefill_finishes: Sequence[float],
    decode_s: float,
) -> bool:
    """Whether ``policy`` turns a request away at arrival for lack of decode room (the TTFT
    check comes before, and is the same for all): ``"baseline"`` never does, ``"early"`` when
    all ``slots`` are ``occupied`` now, ``"predictive"`` when :func:`predicted_decode_load` at
    the request's prefill end ``finish_s`` reaches ``slots``."""
    if policy == "baseline":
        return False
    if policy == "early":
        return occupied >= slots
    if policy == "predictive":
        forecast = predicted_decode_load(finish_s, running_starts, prefill_finishes, decode_s)
        return forecast >= slots
    raise ValueError(f"unknown rejection policy {policy!r}; pass one of {REJECTION_POLICIES}")


def load_correlation(
    times: Sequence[float],
    prefill_load: Sequence[float],
    decode_load: Sequence[float],
    warmup_s: float = 0.0,
) -> float:
    """Pearson correlation of the prefill and decode pools' load series over the samples taken
    at ``warmup_s`` or later: negative when the pools swing in anti-phase. ``nan`` when fewer
    than two samples remain or either series is constant there (a correlation is undefined)."""
    times, p, d = (np.asarray(x, dtype=float) for x in (times, prefill_load, decode_load))
    if not (times.shape == p.shape == d.shape and times.ndim == 1):
        raise ValueError(
            f"times, prefill_load and decode_load must be 1-d and of one length, got "
            f"{times.shape}, {p.shape}, {d.shape}"
        )
    keep = times >= warmup_s
    p, d = p[keep], d[keep]
    if len(p) < 2 or np.ptp(p) == 0 or np.ptp(d) == 0:
        return math.nan
    return float(np.corrcoef(p, d)[0, 1])


def simulate_overload(
    requests: Sequence[OverloadRequest | tuple[float, int, int]],
    config: OverloadConfig = DEFAULT_CONFIG,
    policy: str = "baseline",
) -> OverloadResult:
    """Run ``requests`` (in arrival order; :class:`OverloadRequest` or ``(arrival_s,
    input_len, output_len)``) through the cluster of ``config`` under one rejection ``policy``
    (:data:`REJECTION_POLICIES`) until it is empty, and count."""
    if not isinstance(config, OverloadConfig):
        raise TypeError(f"config must be an OverloadConfig, got {config!r:.80}")
    arrivals, inputs, outputs = _check_requests(requests)
    prefill = [prefill_seconds(n, config) for n in inputs]
    return _simulate(arrivals, prefill, outputs, config, _check_policy(policy))


def compare_rejection_policies(
    requests: Sequence[OverloadRequest | tuple[float, int, int]],
    config: OverloadConfig = DEFAULT_CONFIG,
) -> tuple[OverloadResult, ...]:
    """The same ``requests`` through the cluster of ``config`` under each policy of
    :data:`REJECTION_POLICIES`: baseline, early, predictive, in order."""
    if not isinstance(config, OverloadConfig):
        raise TypeError(f"config must be an OverloadConfig, got {config!r:.80}")
    arrivals, inputs, outputs = _check_requests(requests)
    prefill = [prefill_seconds(n, config) for n in inputs]
    return tuple(_simulate(arrivals, prefill, outputs, config, p) for p in REJECTION_POLICIES)


# ---------------------------------------------------------------------------- the simulation

_DECODE_END, _PREFILL_END = 0, 1  # at one instant, slots free up before prefills claim them


def _simulate(
    arrivals: list[float],
    prefill: list[float],
    outputs: list[int],
    config: OverloadConfig,
    policy: str,
) -> OverloadResult:
    n, slo, tbt, max_batch = len(arrivals), config.ttft_slo_s, config.tbt_s, config.max_batch
    slots = config.decode_slots
    if config.predicted_decode_s is not None:
        decode_s = config.predicted_decode_s
    else:
        decode_s = (sum(outputs) / n if n else 0.0) * tbt
    busy = [0.0] * config.num_prefill  # when each prefill instance has finished its queue
    batch = [0] * config.num_decode
    occupied = peak = 0
    running: list[float] = []  # start times of the running decodes, sorted
    started = [0.0] * n  # when each request entered decode
    outcome, ends = ["completed"] * n, [0.0] * n
    in_prefill: list[float] = []  # prefill end times of admitted requests, sorted
    events: list[tuple[float, int, int, int]] = []  # (time, kind, request, decode instance)
    ttft = early = wasted = completed = 0
    wasted_s = prefill_s = 0.0
    end = arrivals[-1] if n else 0.0
    step, samples = config.sample_every_s, []
    next_sample, i = 0.0, 0
    while i < n or events:
        t = events[0][0] if events else math.inf
        if i < n and arrivals[i] < t:
            t = arrivals[i]
        while next_sample <= end and next_sample < t:
            work = sum(max(0.0, b - next_sample) for b in busy)
            samples.append((next_sample, work / (config.num_prefill * slo), occupied / slots))
            next_sample = len(samples) * step
        if events and events[0][0] <= t:
            time, kind, j, k = heapq.heappop(events)
            if kind == _DECODE_END:
                batch[k] -= 1
                occupied -= 1
                del running[bisect.bisect_left(running, started[j])]
                completed += 1
                ends[j] = time
                continue
            del in_prefill[bisect.bisect_left(in_prefill, time)]
            k = min(range(config.num_decode), key=batch.__getitem__)
            if batch[k] >= max_batch:
                wasted += 1
                wasted_s += prefill[j]
                outcome[j], ends[j] = "wasted", time
                continue
            batch[k] += 1
            occupied += 1
            peak = max(peak, batch[k])
            started[j] = time
            running.append(time)  # events come in time order, so this keeps it sorted
            heapq.heappush(events, (time + outputs[j] * tbt, _DECODE_END, j, k))
            continue
        k = min(range(config.num_prefill), key=busy.__getitem__)
        finish = max(t, busy[k]) + prefill[i]
        ends[i] = t
        if finish - t > slo:
            ttft += 1
            outcome[i] = "ttft"
        elif rejects_at_arrival(
            policy,
            slots=slots,
            occupied=occupied,
            finish_s=finish,
            running_starts=running,
            prefill_finishes=in_prefill,
            decode_s=decode_s,
        ):
            early += 1
            outcome[i] = "early"
        else:
            busy[k] = finish
            prefill_s += prefill[i]
            bisect.insort(in_prefill, finish)
            heapq.heappush(events, (finish, _PREFILL_END, i, -1))
        i += 1
    times, p_load, d_load = (tuple(x) for x in zip(*samples, strict=True)) if samples else ((),) * 3
    return OverloadResult(
        policy=policy,
        arrived=n,
        rejected_at_arrival=ttft + early,
        rejected_for_ttft=ttft,
        rejected_after_prefill=wasted,
        completed=completed,
        wasted_prefill_s=wasted_s,
        prefill_s=prefill_s,
        peak_decode_batch=peak,
        outcomes=tuple(outcome),
        ends_s=tuple(ends),
        times=times,
        prefill_load=p_load,
        decode_load=d_load,
        correlation=load_correlation(times, p_load, d_load, config.warmup_s),
    )


def _check_requests(
    requests: Sequence[OverloadRequest | tuple[float, int, int]],
) -> tuple[list[float], list[int], list[int]]:
    if isinstance(requests, (str, bytes)) or not isinstance(requests, Sequence):
        raise TypeError(
            f"requests must be a sequence of OverloadRequest or (arrival_s, input_len, "
            f"output_len) tuples, got {requests!r:.80}"
        )
    arrivals, inputs, outputs = [], [], []
    previous = 0.0
    for i, r in enumerate(requests):
        if isinstance(r, OverloadRequest):
            t, n, m = r.arrival_s, r.input_len, r.output_len
        elif isinstance(r, tuple) and len(r) == 3:
            t, n, m = r
        else:
            raise TypeError(
                f"requests[{i}] must be an OverloadRequest or an (arrival_s, input_len, "
                f"output_len) tuple, got {r!r:.80}"
            )
        if not is_real(t):
            raise TypeError(f"requests[{i}]: arrival_s must be a number of seconds, got {t!r}")
        if not (0 <= t < math.inf):
            raise ValueError(f"requests[{i}]: arrival_s must be seconds >= 0, got {t!r}")
        if t < previous:
            raise ValueError(f"requests[{i}] arrives before requests[{i - 1}]: sort by arrival")
        previous = float(t)
        arrivals.append(previous)
        inputs.append(check_count(f"requests[{i}] input_len", n))
        outputs.append(check_count(f"requests[{i}] output_len", m))
    return arrivals, inputs, outputs
