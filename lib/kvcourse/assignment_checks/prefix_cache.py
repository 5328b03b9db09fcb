"""What a5's visible tests need to read a student's prefix cache (§8.4): the blocks it holds, its
``len`` and its count of evictions as plain values, and the course's failure message when they
are not the worked answer's.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from kvcourse.assignment_checks.values import as_int, expect_equal

__all__ = ["cache_state", "expect_holding"]

#: How :func:`expect_holding` labels the values it compares.
LABEL = "(held, len, evictions) = "


def cache_state(cache: object, ids: Iterable[Hashable]) -> tuple[list[Hashable], int, int]:
    """``(held, len, evictions)`` of a student's ``cache``: the ids of ``ids`` it holds (``id in
    cache``), in the order of ``ids``, then ``len(cache)`` and ``cache.evictions`` as plain ints
    (fails, saying what came back, when ``evictions`` is not an int)."""
    held = [block_id for block_id in ids if bool(block_id in cache)]  # type: ignore[operator]
    evictions = getattr(cache, "evictions", None)
    hint = "count every evicted block in self.evictions, an int"
    return held, len(cache), as_int(evictions, "cache.evictions", hint)  # type: ignore[arg-type]


def expect_holding(
    cache: object,
    ids: Iterable[Hashable],
    expected: tuple[list[Hashable], int, int],
    what: str,
    hint: str,
) -> None:
    """Fail unless :func:`cache_state` of ``cache`` is ``expected``: "{what}: expected (held, len,
    evictions) = {expected}, got {got}. Hint: {hint}"."""
    expect_equal(cache_state(cache, ids), expected, what, hint, label=LABEL)
