"""Argument checks shared by the whole library.

Every public call checks its arguments before it changes anything, and says what was wrong and what
to pass instead. These helpers keep those checks (and their messages) the same everywhere. A wrong
*type* raises ``TypeError``; a value of the right type outside its range raises ``ValueError``.
"""

from __future__ import annotations

import math
import numbers
import operator


def is_int(value: object) -> bool:
    """True for an integer of any kind (Python, NumPy) that is not a ``bool``."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: object) -> bool:
    """True for a real number of any kind (Python, NumPy) that is not a ``bool``."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def as_index(value: object, name: str = "block id") -> int:
    """``value`` as a plain ``int`` (a block id, a position, a count); ``TypeError`` otherwise.

    Integers of any kind (Python, NumPy, a 0-d integer tensor) are accepted, so ids read out of an
    array work; ``bool`` and floats are refused because they are almost always a bug.
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got the bool {value!r}")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})") from None


def check_count(name: str, value: object) -> int:
    """``value`` as an ``int`` that is zero or more (a number of tokens, blocks, steps)."""
    value = as_index(value, name)
    if value < 0:
        raise ValueError(f"{name} must be zero or more (non-negative), got {value}")
    return value


def check_positive_int(name: str, value: object, example: str = "") -> int:
    """``value`` as an ``int`` of at least 1; ``example`` (e.g. ``"e.g. 16"``) ends the message."""
    value = as_index(value, name)
    if value <= 0:
        hint = f"; pass {example}" if example else ""
        raise ValueError(f"{name} must be positive, got {value}{hint}")
    return value


def check_positive_number(name: str, value: object, unit: str = "") -> float:
    """``value`` as a finite ``float`` greater than 0 (a rate, a bandwidth, a time)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive, finite number{unit}, got {value!r}")
    return value


def check_fraction(name: str, value: object, example: str = "0.6") -> float:
    """``value`` as a ``float`` in (0, 1], a share of something such as the GPUs' peak FLOP/s;
    ``example`` is the fraction the message suggests (a percentage passed as 60 is refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be a fraction such as {example}, got {value!r} ({type(value).__name__})"
        )
    value = float(value)
    if not 0 < value <= 1:
        raise ValueError(
            f"{name} must be a fraction in (0, 1] such as {example} (60 % is 0.6), got {value!r}"
        )
    return value


def check_seconds(name: str, value: object) -> float:
    """``value`` as a finite ``float`` of seconds that is zero or more (a wait, a time stamp)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        kind = type(value).__name__
        raise TypeError(f"{name} must be a number of seconds, got {value!r} ({kind})")
    value = float(value)
    if not 0 <= value < math.inf:
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return value


def ceil_div(numerator: int, denominator: int) -> int:
    """``ceil(numerator / denominator)`` in integers, without floating point (blocks for tokens)."""
    return -(-numerator // denominator)
