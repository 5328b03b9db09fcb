"""vLLM's preemption rules as the 2023 PagedAttention paper gives them (the paper's §4.5; the
book's §6.1 and §6.2): first come first served, preempt the latest-arrived, all or nothing, swap
or recompute.

:class:`VllmPaperScheduler` is the serving loop
(:class:`~kvcourse.serving.scheduler.IterationScheduler`) with the paper's answers to its two
hooks — the scheduler every page of the book runs. vLLM v1 (release v0.33.0) keeps the paper's
order and victim but never swaps, admits a request when its prompt's blocks are free (the course's
:class:`~kvcourse.serving.memory.PagedMemory` asks for one token more) and keeps a preempted
request's full blocks cached: :mod:`kvcourse.serving.paged_v1` has its rules.

* **who** (:meth:`VllmPaperScheduler.choose_victim`): the latest-arrived running request. The oldest
  is then never preempted while another runs, and alone it fits: it always progresses, so every
  request finishes (exercise 12, :mod:`kvcourse.serving.progress`);
* **how** (:meth:`VllmPaperScheduler.preempt`): all or nothing — the victim leaves the batch,
  frees every block it holds, goes back to its place in the queue's arrival order (the front, since
  it arrived before everyone waiting) and comes back the way :meth:`VllmPaperScheduler.recover`
  says: by the scheme's ``recovery``, recompute, swap, or whichever the cost models say is cheaper.

:func:`check_scheduler_class` is the check the simulators run on a scheduler class passed to them
(a student's of assignment a4, for instance).
"""

from __future__ import annotations

import bisect
from operator import attrgetter

from kvcourse._checks import ceil_div
from kvcourse.serving.memory import LiveRequest
from kvcourse.serving.scheduler import IterationScheduler

__all__ = ["VllmPaperScheduler", "check_scheduler_class"]

_order = attrgetter("order")  # a live request's place in arrival order


class VllmPaperScheduler(IterationScheduler):
    """vLLM's scheduler as the 2023 paper describes it: iteration-level batching, first come
    first served, and when the blocks run out the latest-arrived running request is preempted,
    all or nothing, and recovered as the memory scheme's ``recovery`` says (the loop and its
    invariants: :class:`~kvcourse.serving.scheduler.IterationScheduler`).

    Override :meth:`choose_victim` to preempt someone else
    (:class:`~kvcourse.serving.progress.PreemptEarliest` does), :meth:`recover` to bring a victim
    back another way.
    """

    def choose_victim(self, needy: LiveRequest) -> LiveRequest:
        """The latest-arrived running request: the last of the batch, which is in arrival order.
        It is ``needy`` itself when ``needy`` arrived last."""
        return self.running[-1]

    def preempt(self, victim: LiveRequest) -> None:
        """Preempt ``victim``, all or nothing: out of the batch, all of its memory freed, counted,
        back in the queue at its place in arrival order (the front, for the latest-arrived), and
        handed to :meth:`recover`."""
        self.running.remove(victim)  # LiveRequest compares by identity
        self.memory.release(victim)
        self.preemptions += 1
        victim.preemptions += 1
        waiting = self.waiting
        if not waiting or victim.order < waiting[0].order:
            waiting.appendleft(victim)
        else:  # a victim that arrived after the head of the queue (another choose_victim)
            bisect.insort(waiting, victim, key=_order)
        self.recover(victim)

    def recover(self, victim: LiveRequest) -> None:
        """How a preempted request will resume, following the scheme's ``recovery`` (§6.2).
        **Recompute** (:meth:`recompute`): its KV is gone (the paper's rule; v1 keeps its cached
        blocks); when it is admitted again it prefills its prompt plus the tokens it had
        generated. **Swap** (:meth:`swap_out`): its blocks are
        copied to the CPU pool now and back when it is admitted again; if the pool has no room,
        recompute. **Cheaper**: swap when out + in (``swap_cost``) is faster than the iteration
        model's time to recompute its tokens (``cost.per_new_token_s`` × tokens), else
        recompute."""
        if self.recovery != "recompute":
            tokens = victim.prompt + victim.done
            out_s = self.swap_cost.seconds(ceil_div(tokens, self.memory.block_size))
            cheaper = 2 * out_s < self.cost.per_new_token_s * tokens
            if (self.recovery == "swap" or cheaper) and self.swap_out(victim):
                return
        self.recompute(victim)


def check_scheduler_class(scheduler: object) -> type[IterationScheduler]:
    """``scheduler`` if it is a scheduler class the simulators can run: a subclass of
    :class:`~kvcourse.serving.scheduler.IterationScheduler` that has both hooks
    (``choose_victim`` and ``preempt``). TypeError otherwise, saying which is missing."""
    if not (isinstance(scheduler, type) and issubclass(scheduler, IterationScheduler)):
        raise TypeError(
            "scheduler must be a subclass of IterationScheduler (the 2023 vLLM paper's "
            f"kvcourse.serving.VllmPaperScheduler, or your own), got {scheduler!r}"
        )
    for hook in ("choose_victim", "preempt"):
        if getattr(scheduler, hook) is getattr(IterationScheduler, hook):
            raise TypeError(
                f"{scheduler.__name__} does not define {hook}(): the serving loop needs both "
                f"hooks, choose_victim and preempt"
            )
    return scheduler
