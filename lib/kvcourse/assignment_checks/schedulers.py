"""Helpers for the visible test cells of assignment a4 (preemption): run a student's scheduler
and read what it did as plain values, so a test cell reads as the checks it makes.

:func:`only_hook` makes the student's scheduler run one of its own hooks and the library's
others. :func:`serve` runs a scheduler class over a small workload to the end and returns a
:class:`Served`: one :class:`Step` per iteration (who was admitted, preempted, left waiting,
finished, as letters A, B, C … in arrival order) and the run's counters as plain ints and floats.
:func:`progress` serves a workload of any size and counts what Ex 12 is about: requests finished,
and iterations that preempted the oldest running request. An error raised while either runs is
re-raised as an ``AssertionError`` that names the iteration and gives the hint.

Only the visible cells use these: a student can rebind them before the visible tests run, so the
hidden cells run their own schedulers' loops and checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "COUNTERS",
    "HOOKS",
    "Progress",
    "Served",
    "Step",
    "letters",
    "name_of",
    "only_hook",
    "progress",
    "serve",
]

#: The scheduler's counters that :func:`serve` reads, in this order.
COUNTERS = (
    "iterations",
    "preemptions",
    "recomputations",
    "recomputed_tokens",
    "swap_outs",
    "swap_fallbacks",
    "swapped_out_blocks",
    "swapped_in_blocks",
)

#: The hooks a4's students write, in the order of its parts.
HOOKS = ("choose_victim", "preempt", "recover")


def only_hook(scheduler: type, hook: str, *, library: type) -> type:
    """A subclass of ``scheduler`` (the student's class) that runs its own ``hook`` (one of
    :data:`HOOKS`) and ``library``'s other hooks, so a test checks one hook at a time:
    ``only_hook(MyScheduler, "preempt", library=VllmPaperScheduler)``."""
    if hook not in HOOKS:
        raise ValueError(f"hook must be one of {HOOKS}, not {hook!r}")
    others = {name: getattr(library, name) for name in HOOKS if name != hook}
    return type(f"Your{hook.title().replace('_', '')}", (scheduler,), others)


def letters(lives: Iterable[object]) -> str:
    """Requests as letters by arrival order: the first to arrive is A, the second B, …"""
    return "".join(chr(ord("A") + int(live.order)) for live in lives)  # type: ignore[attr-defined]


def name_of(value: object) -> str:
    """A request's letter (as :func:`letters`), or what else ``value`` is, for a message."""
    order = getattr(value, "order", None)
    if isinstance(order, int) and 0 <= order < 26:
        return chr(ord("A") + order)
    return f"{value!r} (not a running request)"


@dataclass(frozen=True)
class Step:
    """One iteration as plain values: its number (from 1), the simulated time it started at, and
    the requests it admitted, preempted, left waiting (head first) and finished, as letters."""

    iteration: int
    time_s: float
    admitted: str
    preempted: str
    waiting: str
    finished: str


@dataclass(frozen=True)
class Served:
    """What :func:`serve` saw: every iteration, the counters (:data:`COUNTERS`), the seconds spent
    copying swapped blocks and the time the run ended, and the preemptions of each request."""

    steps: tuple[Step, ...]
    counters: dict[str, int]
    swap_s: float
    end_s: float
    preempted_per_request: tuple[int, ...]

    def step(self, iteration: int) -> Step:
        """Iteration ``iteration`` (from 1)."""
        return self.steps[iteration - 1]

    def when(self, what: str, name: str) -> list[int]:
        """The iterations in which request ``name`` (a letter) was ``what`` ("admitted",
        "preempted" or "finished")."""
        return [s.iteration for s in self.steps if name in getattr(s, what)]


def _step(run: Any, number: int, hint: str) -> Any:
    """``run.step()``, with any error but an AssertionError re-raised as one that names
    iteration ``number`` and gives ``hint``."""
    try:
        return run.step()
    except AssertionError:
        raise
    except Exception as error:
        raise AssertionError(
            f"iteration {number} raised {type(error).__name__}: {error}. Hint: {hint}"
        ) from None


def serve(
    scheduler: type,
    requests: Sequence[object],
    scheme: object,
    *,
    num_slots: int,
    cost: object,
    hint: str,
    max_iterations: int = 10_000,
) -> Served:
    """Serve ``requests`` under ``scheme`` with the scheduler class ``scheduler`` until every
    request finishes. An error in the run becomes an ``AssertionError`` naming the iteration it
    happened in, what it was, and ``hint``; so does a run longer than ``max_iterations``."""
    steps: list[Step] = []
    run = scheduler(requests, scheme, num_slots=num_slots, cost=cost)
    try:
        while True:
            if len(steps) >= max_iterations:
                raise AssertionError(
                    f"the run did not finish in {max_iterations} iterations. Hint: {hint}"
                )
            it = _step(run, len(steps) + 1, hint)
            if it is None:
                break
            steps.append(
                Step(
                    iteration=len(steps) + 1,
                    time_s=float(it.time_s),
                    admitted=letters(it.admitted),
                    preempted=letters(it.preempted),
                    waiting=letters(run.waiting),
                    finished=letters(it.finished),
                )
            )
    finally:
        try:
            run.close(after_error=True)
        except Exception:  # the error being reported matters more
            pass
    counters = {name: int(getattr(run, name)) for name in COUNTERS}
    per_request = [0] * len(run.requests)
    for s in steps:
        for name in s.preempted:
            per_request[ord(name) - ord("A")] += 1
    return Served(
        steps=tuple(steps),
        counters=counters,
        swap_s=float(run.swap_s),
        end_s=float(run.time_s),
        preempted_per_request=tuple(per_request),
    )


@dataclass(frozen=True)
class Progress:
    """What :func:`progress` saw: how many requests finished, in how many iterations the oldest
    running request was among the victims (Ex 12 says never), and the run's counters."""

    finished: int
    oldest_preempted: int
    counters: dict[str, int]


def progress(
    scheduler: type,
    requests: Sequence[object],
    scheme: object,
    *,
    num_slots: int,
    hint: str,
    cost: object = None,
) -> Progress:
    """Serve ``requests`` with the scheduler class ``scheduler`` to the end, noting before every
    iteration which running request arrived first and whether that iteration preempted it (Ex
    12). Errors become an ``AssertionError`` naming the iteration, as in :func:`serve`."""
    finished = oldest_preempted = 0
    with scheduler(requests, scheme, num_slots=num_slots, cost=cost) as run:
        while True:
            oldest = min(run.running, key=lambda live: live.order) if run.running else None
            it = _step(run, run.iterations + 1, hint)
            if it is None:
                break
            finished += len(it.finished)
            oldest_preempted += any(victim is oldest for victim in it.preempted)
    counters = {name: int(getattr(run, name)) for name in COUNTERS}
    return Progress(finished=finished, oldest_preempted=oldest_preempted, counters=counters)
