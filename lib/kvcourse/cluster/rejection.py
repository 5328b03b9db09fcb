"""The three rejection rules: *when* an overloaded disaggregated cluster turns a request away
(§9.6, Mooncake §7): after its prefill, at arrival by the decode load now, or at arrival by the
decode load predicted for the moment its prefill ends.

Every rule first applies the TTFT check at arrival: the request is admitted to a prefill instance
only if that instance's queue plus its own prefill ends within the TTFT SLO. They differ in what
they know about the decode pool at that moment:

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
  (:func:`predicted_decode_load`).

How well the prediction does depends on its horizon, the prefill queue plus the prefill, against
``t_d``. With the default 5 s TTFT SLO the queues are short, well under ``t_d``, so the forecast
is mostly the decodes running now, each expected to end ``t_d`` after it started. Those include
more long answers than the average does (a long answer stays longer, so more of the decodes
running at any moment are long ones): the forecast under-counts the slots that will be taken, and
predictive rejection admits nearly as many doomed prefills as the baseline. Early rejection, which
looks at the slots actually taken, cuts far more. On the default hour
(:func:`~kvcourse.cluster.overload.poisson_requests` of the conversation trace at 2× the decode
capacity, seed 0), in the order baseline, early, predictive:

>>> from kvcourse.cluster import compare_rejection_rules, poisson_requests
>>> from kvcourse.traces import load_mooncake_trace
>>> hour = poisson_requests(load_mooncake_trace("conversation"))
>>> runs = compare_rejection_rules(hour)
>>> len(hour), [r.wasted_prefills for r in runs]  # early -63 %, predictive -1 %
(27116, [12049, 4483, 11960])
>>> [r.completed for r in runs]
[13469, 13299, 13430]
>>> [round(r.correlation, 2) for r in runs]  # the two pools' loads; early swings in anti-phase
[-0.06, -0.27, -0.08]

The event simulation that applies these rules is :mod:`kvcourse.cluster.overload_sim`.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

__all__ = [
    "REJECTION_RULES",
    "REJECTION_RULE_LABELS",
    "check_rejection_rule",
    "predicted_decode_load",
    "rejects_at_arrival",
]

#: The rejection rules, in the order :func:`~kvcourse.cluster.overload_sim.compare_rejection_rules`
#: runs them.
REJECTION_RULES: tuple[str, ...] = ("baseline", "early", "predictive")

#: How the book and the figures name each rule.
REJECTION_RULE_LABELS: dict[str, str] = {
    "baseline": "reject after prefill",
    "early": "early rejection",
    "predictive": "predictive early rejection",
}


def check_rejection_rule(rule: object) -> str:
    """``rule`` if it is one of :data:`REJECTION_RULES`; a TypeError or ValueError naming them
    otherwise."""
    if not isinstance(rule, str):
        raise TypeError(f"rule must be a str, one of {REJECTION_RULES}, got {rule!r}")
    if rule not in REJECTION_RULES:
        raise ValueError(f"unknown rejection rule {rule!r}; pass one of {REJECTION_RULES}")
    return rule


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
    rule: str,
    *,
    slots: int,
    occupied: int,
    finish_s: float,
    running_starts: Sequence[float],
    prefill_finishes: Sequence[float],
    decode_s: float,
) -> bool:
    """Whether ``rule`` turns a request away at arrival for lack of decode room (the TTFT check
    comes before, and is the same for all): ``"baseline"`` never does, ``"early"`` when all
    ``slots`` are ``occupied`` now, ``"predictive"`` when :func:`predicted_decode_load` at the
    request's prefill end ``finish_s`` reaches ``slots``."""
    if rule == "baseline":
        return False
    if rule == "early":
        return occupied >= slots
    if rule == "predictive":
        forecast = predicted_decode_load(finish_s, running_starts, prefill_finishes, decode_s)
        return forecast >= slots
    raise ValueError(f"unknown rejection rule {rule!r}; pass one of {REJECTION_RULES}")
