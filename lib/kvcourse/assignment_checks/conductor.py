"""What a6's visible tests need to read a student's Conductor decision (§9.4): the
:class:`~kvcourse.cluster.Decision` as plain values, so that a check compares numbers, never
objects the student made.
"""

from __future__ import annotations

from kvcourse.assignment_checks.values import as_float, as_int, as_int_or_none
from kvcourse.cluster.conductor import Decision

__all__ = ["decision_summary"]


def decision_summary(decision: object, what: str) -> tuple[int | None, int, int | None, float]:
    """``(instance, cached blocks, pull source, TTFT rounded to the millisecond)`` of a
    Conductor's ``decision``, as plain ints, None and a float; fails, naming ``what`` was called,
    unless it is a :class:`~kvcourse.cluster.Decision` of such values."""
    if not isinstance(decision, Decision):
        raise AssertionError(
            f"{what}: expected a Decision(instance, cached_blocks, pull_from, ttft_s), got "
            f"{decision!r:.120}. Hint: return Decision(...) from kvcourse.cluster."
        )
    hint = "instance and pull_from are instance numbers or None, cached_blocks an int"
    return (
        as_int_or_none(decision.instance, f"{what}: Decision.instance", hint),
        as_int(decision.cached_blocks, f"{what}: Decision.cached_blocks", hint),
        as_int_or_none(decision.pull_from, f"{what}: Decision.pull_from", hint),
        round(as_float(decision.ttft_s, f"{what}: Decision.ttft_s", "seconds, a float"), 3),
    )
