"""Runs of a student's a4 scheduler for the hidden tests, reported as plain values.

Each function serves workloads with the student's class, with the tests' own hooks standing in for
the ones a part does not test, and records what the hidden tests check: the victims chosen, the
queue and the batch after every iteration, each recovery with what decided it, the run's counts.
It checks nothing and knows no expected value. At autograde these run where the student's code
runs (a snapshot of the kernel) and only their records cross to the tests, which run in the grader
(:mod:`kvcourse_grader.hidden_runs`), so the student's code never shares a process with a test's
expected values or checks.

A case's workload is plain data, one ``(request_id, arrival_s, prompt_len, output_len)`` row per
request, and its scheme and costs are numbers; the requests, the scheme and the costs are built
here from ``serving`` and ``workloads`` (the kernel's library, or a test's private copy of it).
An error raised by the student's code ends that case's run and is recorded (``error``), as
``"{name}: {message}"``.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

__all__ = [
    "COUNTERS",
    "Choice",
    "Recovery",
    "RunRecord",
    "StepRecord",
    "probe_runs",
    "subclasses_directly",
]

#: A workload row: request id, arrival in seconds, prompt and output lengths.
Row = tuple[int, float, int, int]


@dataclass(frozen=True)
class Choice:
    """One ``choose_victim`` call: the orders of the running requests and of the needy one, the
    order of the request chosen (None when it was not a running request) and whether the call
    left the batch and the queue as they were."""

    running: tuple[int, ...]
    needy: int
    chosen: int | None
    unchanged: bool


@dataclass(frozen=True)
class Recovery:
    """One ``recover`` call on a victim of ``tokens`` tokens in ``blocks`` blocks: the scheme's
    recovery, whether the CPU pool had ``room`` for it, the round trip's and the recompute's
    seconds by the run's cost models, and whether the victim came back ``swapped`` (it holds CPU
    blocks) or ``new`` (to be prefilled again)."""

    recovery: str
    tokens: int
    blocks: int
    room: bool
    round_trip_s: float
    recompute_s: float
    swapped: bool
    new: bool


@dataclass(frozen=True)
class StepRecord:
    """One iteration: the orders of the running requests before it, of the requests it preempted
    and finished, and of the queue and the batch after it."""

    before: tuple[int, ...]
    preempted: tuple[int, ...]
    finished: tuple[int, ...]
    waiting: tuple[int, ...]
    running: tuple[int, ...]


@dataclass(frozen=True)
class RunRecord:
    """A whole case: its iterations (``steps``, when asked for), the ``choose_victim`` and
    ``recover`` calls made, each finished request's preemption count by order, the run's counters
    and the error that ended it (None when it ran to the end)."""

    steps: tuple[StepRecord, ...]
    choices: tuple[Choice, ...]
    recoveries: tuple[Recovery, ...]
    preemptions_of: tuple[tuple[int, int], ...]
    counters: tuple[tuple[str, int], ...]
    error: str | None

    def counter(self, name: str) -> int:
        """The run's counter ``name`` (``iterations``, ``preemptions``, ``swap_outs`` …)."""
        return dict(self.counters)[name]


#: The scheduler's counters a :class:`RunRecord` keeps.
COUNTERS = (
    "iterations",
    "preemptions",
    "recomputations",
    "recomputed_tokens",
    "swap_outs",
    "swap_fallbacks",
)


class _Stop(Exception):
    """A choice the run cannot go on from (a victim that is not running, a batch or queue changed
    by choosing): the run ends there, its records kept."""


def _orders(requests: Any) -> tuple[int, ...]:
    return tuple(int(live.order) for live in requests)


def _latest(sched: Any, needy: Any) -> Any:
    return max(sched.running, key=lambda live: live.order)


def _requeue(sched: Any, gone: Any) -> None:
    """The victim out of the batch with its memory freed, back at the queue's head, counted."""
    sched.running.remove(gone)
    sched.memory.release(gone)
    sched.preemptions += 1
    gone.preemptions += 1
    sched.waiting.appendleft(gone)


def _requeue_and_recompute(sched: Any, gone: Any) -> None:
    _requeue(sched, gone)
    sched.recompute(gone)


def _swap_or_recompute(sched: Any, gone: Any) -> None:
    if sched.recovery == "recompute" or not sched.swap_out(gone):
        sched.recompute(gone)


def _hooks(scheduler: type, tested: str, recoveries: list[Recovery], choices: list[Choice]):
    """The hooks of a probe class that tests ``tested`` (one of a4's three hooks)."""

    def choose_victim(sched: Any, needy: Any) -> Any:
        running, waiting = list(sched.running), list(sched.waiting)
        got = scheduler.choose_victim(sched, needy)
        chosen = next((live.order for live in running if live is got), None)
        unchanged = len(sched.running) == len(running) and all(
            a is b for a, b in zip(sched.running, running, strict=True)
        )
        unchanged = unchanged and len(sched.waiting) == len(waiting)
        unchanged = unchanged and all(a is b for a, b in zip(sched.waiting, waiting, strict=True))
        choices.append(Choice(_orders(running), int(needy.order), chosen, unchanged))
        if chosen is None or not unchanged:
            raise _Stop
        return got

    def requeue_and_recover(sched: Any, gone: Any) -> None:
        _requeue(sched, gone)
        tokens = gone.prompt + gone.done
        blocks = -(-tokens // sched.memory.block_size)
        pool = sched.memory.cpu_pool
        room = pool is not None and pool.num_free >= blocks
        round_trip = 2 * sched.swap_cost.seconds(blocks)
        recompute = sched.cost.per_new_token_s * tokens
        scheduler.recover(sched, gone)
        swapped, new = bool(gone.cpu_blocks), bool(gone.new)
        recoveries.append(
            Recovery(sched.recovery, tokens, blocks, room, round_trip, recompute, swapped, new)
        )

    if tested == "choose_victim":
        return {"choose_victim": choose_victim, "preempt": _requeue_and_recompute}
    if tested == "preempt":
        return {"choose_victim": _latest, "recover": _swap_or_recompute}
    if tested == "recover":
        return {"choose_victim": _latest, "preempt": requeue_and_recover}
    if tested == "all":
        return {}
    raise ValueError(f"tested must be choose_victim, preempt, recover or all, not {tested!r}")


def _scheme(serving: ModuleType, scheme: Sequence[Any]) -> Any:
    """``(block_size, recovery, cpu_blocks, swap_cost)``, the swap cost as ``(copy_bytes,
    copies_per_block, bandwidth, per_copy_s)`` or None for the library's PCIe model."""
    block, recovery, cpu, swap = scheme
    kwargs: dict[str, Any] = {"recovery": str(recovery), "cpu_blocks": cpu}
    if swap is not None:
        kwargs["swap_cost"] = serving.SwapCost(*swap)
    return serving.PagedScheme(int(block), **kwargs)


def subclasses_directly(scheduler: type) -> bool:
    """Whether the only base of ``scheduler`` is the kernel's
    ``kvcourse.serving.IterationScheduler``, as :func:`probe_runs` on a private copy of the serving
    loop needs (it swaps that base for the copy's)."""
    kernel_serving = importlib.import_module("kvcourse.serving")
    return scheduler.__bases__ == (kernel_serving.IterationScheduler,)


def probe_runs(
    scheduler: type,
    tested: str,
    cases: Sequence[tuple[Sequence[Row], Sequence[Any], int, Sequence[float] | None]],
    *,
    steps: bool = False,
    serving: ModuleType | None = None,
    workloads: ModuleType | None = None,
    max_iterations: int | None = None,
) -> list[RunRecord]:
    """Serve each case with ``scheduler`` (the student's class) and record what it did.

    ``tested`` names the hook under test (``choose_victim``, ``preempt`` or ``recover``; the
    tests' own hooks stand in for the other two) or ``all`` (the student's class as it is). A case
    is ``(rows, scheme, num_slots, cost)``: the workload, the scheme as :func:`_scheme` reads it,
    the GPU's slots, and the iteration cost's three numbers (None: the library's). With ``steps``
    every iteration is recorded. With ``serving`` (a private copy of ``kvcourse.serving``) the
    student's class runs on that copy's loop: its base class is swapped for the copy's for the
    runs and put back after (it must subclass ``kvcourse.serving.IterationScheduler`` directly).
    A run still going after ``max_iterations`` iterations (None: no limit) ends with an error.
    """
    kernel_serving = importlib.import_module("kvcourse.serving")
    serving = serving or kernel_serving
    workloads = workloads or importlib.import_module("kvcourse.workloads")
    recoveries: list[Recovery] = []
    choices: list[Choice] = []
    hooks = _hooks(scheduler, tested, recoveries, choices)
    bases = scheduler.__bases__
    if serving is not kernel_serving:
        if not subclasses_directly(scheduler):
            raise TypeError(
                "MyScheduler must subclass kvcourse.serving.IterationScheduler directly"
            )
        scheduler.__bases__ = (serving.IterationScheduler,)
    records = []
    try:
        probe = type("Probe", (scheduler,), hooks)
        for rows, scheme, num_slots, cost in cases:
            recoveries.clear()
            choices.clear()
            requests = [workloads.Request(int(i), float(a), int(p), int(o)) for i, a, p, o in rows]
            kwargs = {} if cost is None else {"cost": serving.IterationCost(*cost)}
            records.append(
                _serve(
                    probe,
                    requests,
                    _scheme(serving, scheme),
                    int(num_slots),
                    kwargs,
                    steps,
                    max_iterations,
                    recoveries,
                    choices,
                )
            )
    finally:
        scheduler.__bases__ = bases
    return records


def _serve(
    probe: type,
    requests: list,
    scheme: Any,
    num_slots: int,
    kwargs: dict[str, Any],
    keep_steps: bool,
    max_iterations: int | None,
    recoveries: list[Recovery],
    choices: list[Choice],
) -> RunRecord:
    steps, finished, error, run = [], {}, None, None
    try:
        with probe(requests, scheme, num_slots=num_slots, **kwargs) as run:
            for _ in range(max_iterations) if max_iterations else itertools.count():
                before = _orders(run.running)
                step = run.step()
                if step is None:
                    break
                finished.update((live.order, int(live.preemptions)) for live in step.finished)
                if keep_steps:
                    record = StepRecord(
                        before,
                        _orders(step.preempted),
                        _orders(step.finished),
                        _orders(run.waiting),
                        _orders(run.running),
                    )
                    steps.append(record)
            else:
                error = f"no end in sight after {max_iterations} iterations"
    except _Stop:
        error = "the run stopped at a choice it cannot go on from"
    except Exception as err:  # the student's code failed: the tests say which property broke
        error = f"{type(err).__name__}: {err}"[:500]
    counters = tuple((name, int(getattr(run, name, 0))) for name in COUNTERS)
    return RunRecord(
        tuple(steps),
        tuple(choices),
        tuple(recoveries),
        tuple(sorted(finished.items())),
        counters,
        error,
    )
