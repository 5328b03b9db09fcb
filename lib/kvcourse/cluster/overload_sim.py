"""The event simulation of an overloaded disaggregated cluster (§9.6): requests arrive, pass the
TTFT check and a rejection rule (:mod:`kvcourse.cluster.rejection`), queue for a prefill
instance, then take a decode slot or are rejected after their prefill, on the cluster of
:mod:`kvcourse.cluster.overload`.

:func:`simulate_overload` runs one rule over a list of requests as an event simulation (a heap of
prefill and decode ends, merged with the arrivals in order; events at one instant run decodes'
ends first, then prefills' ends, then arrivals, then the load sample), until the cluster is
empty. :func:`compare_rejection_rules` runs all three rules on the same requests, and
:func:`load_correlation` is the statistic of §9.6's load oscillation. ``bench/conductor_speed.py``
times an hour of the default cluster at twice its decode capacity.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Sequence

import numpy as np

from kvcourse._checks import check_count, check_seconds
from kvcourse.cluster.overload import (
    DEFAULT_CONFIG,
    OverloadConfig,
    OverloadRequest,
    OverloadResult,
    prefill_seconds,
)
from kvcourse.cluster.rejection import REJECTION_RULES, check_rejection_rule, rejects_at_arrival

__all__ = ["compare_rejection_rules", "load_correlation", "simulate_overload"]


def simulate_overload(
    requests: Sequence[OverloadRequest | tuple[float, int, int]],
    config: OverloadConfig = DEFAULT_CONFIG,
    rule: str = "baseline",
) -> OverloadResult:
    """Run ``requests`` (in arrival order; :class:`~kvcourse.cluster.overload.OverloadRequest`
    or ``(arrival_s, prompt_len, output_len)``) through the cluster of ``config`` under one
    rejection ``rule`` (:data:`~kvcourse.cluster.rejection.REJECTION_RULES`) until it is empty,
    and count."""
    if not isinstance(config, OverloadConfig):
        raise TypeError(f"config must be an OverloadConfig, got {config!r:.80}")
    arrivals, prompts, outputs = _check_requests(requests)
    prefill = [prefill_seconds(n, config) for n in prompts]
    return _simulate(arrivals, prefill, outputs, config, check_rejection_rule(rule))


def compare_rejection_rules(
    requests: Sequence[OverloadRequest | tuple[float, int, int]],
    config: OverloadConfig = DEFAULT_CONFIG,
) -> tuple[OverloadResult, ...]:
    """The same ``requests`` through the cluster of ``config`` under each rule of
    :data:`~kvcourse.cluster.rejection.REJECTION_RULES`: baseline, early, predictive, in order."""
    if not isinstance(config, OverloadConfig):
        raise TypeError(f"config must be an OverloadConfig, got {config!r:.80}")
    arrivals, prompts, outputs = _check_requests(requests)
    prefill = [prefill_seconds(n, config) for n in prompts]
    return tuple(_simulate(arrivals, prefill, outputs, config, r) for r in REJECTION_RULES)


# ---------------------------------------------------------------------------- the simulation

_DECODE_END, _PREFILL_END = 0, 1  # at one instant, slots free up before prefills claim them


def _simulate(
    arrivals: list[float],
    prefill: list[float],
    outputs: list[int],
    config: OverloadConfig,
    rule: str,
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
            rule,
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
        rule=rule,
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
            f"requests must be a sequence of OverloadRequest or (arrival_s, prompt_len, "
            f"output_len) tuples, got {requests!r:.80}"
        )
    arrivals, prompts, outputs = [], [], []
    previous = 0.0
    for i, r in enumerate(requests):
        if isinstance(r, OverloadRequest):
            t, n, m = r.arrival_s, r.prompt_len, r.output_len
        elif isinstance(r, tuple) and len(r) == 3:
            t, n, m = r
        else:
            raise TypeError(
                f"requests[{i}] must be an OverloadRequest or an (arrival_s, prompt_len, "
                f"output_len) tuple, got {r!r:.80}"
            )
        t = check_seconds(f"requests[{i}]: arrival_s", t)
        if t < previous:
            raise ValueError(f"requests[{i}] arrives before requests[{i - 1}]: sort by arrival")
        previous = t
        arrivals.append(previous)
        prompts.append(check_count(f"requests[{i}] prompt_len", n))
        outputs.append(check_count(f"requests[{i}] output_len", m))
    return arrivals, prompts, outputs


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
