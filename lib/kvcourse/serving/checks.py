"""Checks on what a serving run is given: the requests and the times that bound it.

Shared by the scheduler (:mod:`kvcourse.serving.scheduler`) and the functions that run it
(:mod:`kvcourse.serving.simulation`, :mod:`kvcourse.serving.latency`), so that every entry point
refuses the same bad input with the same message.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kvcourse._checks import is_int
from kvcourse.workloads import Request

__all__ = ["check_requests", "check_seconds"]


def check_requests(requests: object) -> list[Request]:
    """``requests`` checked (a non-empty list of :class:`~kvcourse.workloads.Request` with lengths
    of at least 1 and finite arrival times of at least 0) and sorted into arrival order."""
    if isinstance(requests, (str, bytes)) or not isinstance(requests, Sequence) or not requests:
        raise ValueError(
            "requests must be a non-empty list of kvcourse.workloads.Request, e.g. "
            f"sharegpt_like(300, rate=3.0); got {requests!r}"
        )
    for r in requests:
        if not isinstance(r, Request):
            raise TypeError(f"requests must contain only workloads.Request records, got {r!r}")
        if (
            not (is_int(r.prompt_len) and is_int(r.output_len))
            or min(r.prompt_len, r.output_len) < 1
        ):
            raise ValueError(
                f"request {r.request_id}: prompt_len and output_len must be ints >= 1, got "
                f"{r.prompt_len!r} and {r.output_len!r}"
            )
        if not isinstance(r.arrival_s, (int, float)) or not math.isfinite(r.arrival_s):
            raise ValueError(
                f"request {r.request_id}: arrival_s must be finite, got {r.arrival_s!r}"
            )
        if r.arrival_s < 0:
            raise ValueError(f"request {r.request_id}: arrival_s must be >= 0, got {r.arrival_s}")
    return sorted(requests, key=lambda r: (r.arrival_s, r.request_id))


def check_seconds(name: str, value: object) -> float:
    """``value`` as a finite, non-negative ``float`` of seconds (a warm-up, a horizon)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite, non-negative number of seconds, got {value!r}")
    return float(value)
