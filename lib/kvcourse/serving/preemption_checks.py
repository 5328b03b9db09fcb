"""What the serving loop checks of its preemption hooks (§6): the victim's promises, kept.

:class:`~kvcourse.serving.scheduler.IterationScheduler` leaves two decisions to a subclass:
``choose_victim`` (who is preempted when memory runs out) and ``preempt`` (what preemption does to
the victim). The loop relies on a few facts about the result, and checks them after every
preemption, so that a hook that breaks one fails at once with a message naming the request and
the fix (:class:`PreemptionError`) instead of serving a request twice or losing it:

* the victim is a running request (:func:`batch_index`);
* afterwards it is out of the running batch, and nobody else left with it;
* it holds no GPU memory: preemption is all or nothing;
* it is in the waiting queue exactly once;
* it knows how it comes back: marked for recomputation, or its KV swapped out to the CPU pool.

Which victim, and where in the queue it goes, are the hook's to choose: vLLM's choice (the
latest-arrived, back at the front, in the 2023 paper and in v1) is one; the loop does not insist
on it.
"""

from __future__ import annotations

from typing import Any

from kvcourse.serving.memory import LiveRequest

__all__ = ["PreemptionError", "batch_index", "check_preempted"]


class PreemptionError(RuntimeError):
    """A scheduler's ``choose_victim`` or ``preempt`` broke a promise the serving loop relies on
    (a victim left in the batch, still holding memory, lost from the queue, or given no way back).
    The message names the request and what to do."""


def batch_index(scheduler: Any, live: object) -> int:
    """Where ``live`` — the request ``choose_victim`` returned — sits in ``scheduler.running``;
    :class:`PreemptionError` if it is not a running request."""
    running = scheduler.running
    for i in range(len(running) - 1, -1, -1):  # the victim is usually the last
        if running[i] is live:
            return i
    what = f"request {live.request.request_id}" if isinstance(live, LiveRequest) else repr(live)
    raise PreemptionError(
        f"{type(scheduler).__name__}.choose_victim() returned {what}, which is not in the "
        f"running batch; return one of self.running"
    )


def check_preempted(scheduler: Any, victim: LiveRequest, batch: int) -> None:
    """Check what ``scheduler.preempt(victim)`` left, the batch having held ``batch`` requests
    before it; :class:`PreemptionError` for the first broken promise (see the module)."""
    who = f"{type(scheduler).__name__}.preempt(request {victim.request.request_id})"
    running = scheduler.running
    if len(running) != batch - 1 or any(live is victim for live in running):
        raise PreemptionError(
            f"{who} must take exactly the victim out of the running batch "
            f"(self.running.remove(victim)); the batch holds {len(running)} requests, "
            f"expected {batch - 1}"
        )
    if scheduler.memory.holds(victim):
        raise PreemptionError(
            f"{who} left the victim holding its GPU memory: preemption is all or nothing; "
            f"free all of it with self.memory.release(victim)"
        )
    if sum(live is victim for live in scheduler.waiting) != 1:
        raise PreemptionError(
            f"{who} must put the victim back in the waiting queue, once (at its place in "
            f"arrival order: self.waiting.appendleft(victim) for the latest-arrived)"
        )
    if not (victim.new or victim.cpu_blocks):
        raise PreemptionError(
            f"{who} did not say how the victim comes back: call self.recompute(victim), or "
            f"self.swap_out(victim) and recompute it if that returns False"
        )
