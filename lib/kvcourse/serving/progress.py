"""Why paging plus preemption cannot deadlock (§6.1, exercise 12), checked on a workload.

Without reservation, a memory that runs dry mid-generation deadlocks unless somebody gives memory
back (as lecture 6 of the series found; the book's §1 and §6 tell it). vLLM (the 2023 paper's, and
v1 alike) preempts the **latest-arrived** running request, so the oldest one is never a victim while
others run, and alone it fits (every request fits the pool alone): it always progresses to the end
and frees its memory, and then the next oldest does. Every request finishes.

:func:`check_progress` runs a scheduler over a workload and reports (:class:`ProgressCheck`)
whether every request finished and how often the oldest running request was preempted — zero
for the default :class:`~kvcourse.serving.preemption.VllmPaperScheduler`, with either recovery.
:class:`PreemptEarliest` is the counter-example: it preempts the *earliest*-arrived running
request instead. Since a recomputed request keeps the tokens it generated, even it finishes in
the end, but it turns first come, first served upside down: the oldest request is the one
preempted again and again, each time re-prefilling everything it had, while younger ones go
ahead — starvation, and recomputation that grows with the oldest request's length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvcourse._checks import check_positive_int
from kvcourse.serving.checks import check_requests
from kvcourse.serving.cost import IterationCost
from kvcourse.serving.memory import LiveRequest
from kvcourse.serving.preemption import VllmPaperScheduler, check_scheduler_class
from kvcourse.serving.scheduler import IterationScheduler
from kvcourse.serving.schemes import A100_SLOTS, MemoryScheme
from kvcourse.workloads import Request

__all__ = ["PreemptEarliest", "ProgressCheck", "check_progress"]


def _order(live: LiveRequest) -> int:
    return live.order


class PreemptEarliest(VllmPaperScheduler):
    """The scheduler with the opposite victim: when a request needs a block and none is free, the
    *earliest*-arrived running request is preempted (``running[0]``). A counter-example for §6:
    it preempts the oldest request, over and over (:func:`check_progress`)."""

    def choose_victim(self, needy: LiveRequest) -> LiveRequest:
        """The earliest-arrived running request, the first of the batch."""
        return self.running[0]


@dataclass(frozen=True)
class ProgressCheck:
    """What :func:`check_progress` saw: ``finished`` of ``num_requests`` requests finished in
    ``iterations`` iterations with ``preemptions`` preemptions; ``oldest_preempted`` counts the
    iterations in which the oldest running request was among the victims, ``most_preempted`` the
    most times any one request was preempted (``most_preempted_id``: which, -1 if none was).
    ``stopped`` is true when the run was cut off at ``max_iterations``."""

    scheduler: str
    scheme: str
    num_requests: int
    finished: int
    iterations: int
    preemptions: int
    recomputed_tokens: int
    oldest_preempted: int
    most_preempted: int
    most_preempted_id: int
    stopped: bool

    @property
    def completed(self) -> bool:
        """Every request finished."""
        return self.finished == self.num_requests

    @property
    def ok(self) -> bool:
        """Exercise 12's two claims hold: every request finished, and the oldest running request
        was never preempted."""
        return self.completed and self.oldest_preempted == 0


def check_progress(
    requests: Sequence[Request],
    scheme: MemoryScheme,
    *,
    scheduler: type[IterationScheduler] = VllmPaperScheduler,
    num_slots: int = A100_SLOTS,
    cost: IterationCost | None = None,
    max_iterations: int | None = None,
) -> ProgressCheck:
    """Serve ``requests`` under ``scheme`` with ``scheduler`` (a scheduler class, default the 2023
    vLLM paper's) until every request finishes, and check exercise 12's claims: before each
    iteration it notes the oldest running request and counts the iterations that preempt it.

    ``max_iterations`` (default: the output tokens of all requests, a bound no run that makes
    progress can reach — each iteration generates a token for every running request, and a
    preempted request keeps its tokens) cuts off a scheduler that stopped making progress; the
    result then says ``stopped``. Returns a :class:`ProgressCheck`; its ``ok`` is the verdict.
    """
    ordered = check_requests(requests)
    check_scheduler_class(scheduler)
    if max_iterations is None:
        max_iterations = sum(r.output_len for r in ordered)
    max_iterations = check_positive_int("max_iterations", max_iterations, "e.g. 10000")
    oldest_preempted = finished = 0
    stopped = False
    with scheduler(ordered, scheme, num_slots=num_slots, cost=cost) as run:
        most, most_id = 0, -1
        while True:
            if run.iterations >= max_iterations:
                stopped = finished < len(ordered)
                break
            oldest = min(run.running, key=_order) if run.running else None
            it = run.step()
            if it is None:
                break
            if oldest is not None and any(v is oldest for v in it.preempted):
                oldest_preempted += 1
            finished += len(it.finished)
            for victim in it.preempted:
                if victim.preemptions > most:
                    most, most_id = victim.preemptions, victim.request.request_id
    return ProgressCheck(
        scheduler=scheduler.__name__,
        scheme=run.scheme.label,
        num_requests=len(ordered),
        finished=finished,
        iterations=run.iterations,
        preemptions=run.preemptions,
        recomputed_tokens=run.recomputed_tokens,
        oldest_preempted=oldest_preempted,
        most_preempted=most,
        most_preempted_id=most_id,
        stopped=stopped,
    )
