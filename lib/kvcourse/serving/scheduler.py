"""The serving loop (§3.3, §6): iteration-level scheduling over KV memory, with hooks to preempt.

:class:`IterationScheduler` serves a stream of requests with **iteration-level scheduling**
(Orca's; the book's §3.3): each iteration, every running request produces one token, new requests
join the batch between iterations and finished ones leave. The memory scheme
(:mod:`kvcourse.serving.schemes`) decides how the KV memory is handed out; two hooks decide what
happens when it runs out: :meth:`~IterationScheduler.choose_victim` (who is preempted) and
:meth:`~IterationScheduler.preempt` (free the victim's memory, requeue it, and say how it will
come back, with :meth:`~IterationScheduler.recompute` or :meth:`~IterationScheduler.swap_out`).
The 2023 vLLM paper's answers to both are :class:`kvcourse.serving.preemption.VllmPaperScheduler`,
the one the book runs; assignment a4 writes them again.

**One iteration**, at simulated time ``t`` (:meth:`IterationScheduler.step`):

1. requests that have arrived by ``t`` join the back of the waiting queue (first come, first
   served);
2. every running request gets the slot for this iteration's token, in batch order, earliest
   arrival first (a contiguous reservation already holds it; Paged may need a new block). When a
   new block is needed and none is free, ``choose_victim`` names a running request and
   ``preempt`` takes it out of the batch, frees all of its memory, puts it back in the queue and
   marks how it resumes; the loop checks that it did (:class:`PreemptionError` if not);
3. unless step 2 preempted somebody, waiting requests are admitted in queue order while their
   memory fits — Max and Oracle: the allocator returns a run of 2048, or prompt + output, slots;
   Paged: the free blocks hold the (re)prompt plus the first new token (the course's rule; vLLM
   v1's memory asks for the (re)prompt only); a swapped request gets GPU blocks again and its KV
   is copied back in. The first request that does not fit stops admission (no overtaking);
4. every running request stores one more token: a newly admitted or recomputed one stores its
   whole (re)prompt (prefill) and its next output token, the others one token each (decode). A
   request of output length ``o`` therefore runs ``o`` iterations and finishes holding
   prompt + output tokens (one fewer under a memory with vLLM's ``unwritten_tokens``; a prefill
   skips the ``cached_tokens`` whose KV such a memory still held);
5. the memory is accounted into the five kinds (:mod:`kvcourse.serving.records`); then finished
   requests free their memory and leave the batch;
6. time advances by :meth:`~kvcourse.serving.cost.IterationCost.seconds` of the work done plus
   the copy time of this iteration's swaps (:class:`~kvcourse.serving.swap_cost.SwapCost`). When
   nothing is running or waiting, the clock jumps to the next arrival (idle time is not one).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterator, Sequence
from operator import attrgetter
from types import TracebackType

from kvcourse._checks import check_positive_int
from kvcourse.serving.checks import check_requests
from kvcourse.serving.cost import IterationCost, check_cost
from kvcourse.serving.memory import LiveRequest
from kvcourse.serving.preemption_checks import PreemptionError, batch_index, check_preempted
from kvcourse.serving.records import Iteration
from kvcourse.serving.schemes import A100_SLOTS, RECOVERIES, MemoryScheme, check_scheme
from kvcourse.serving.swap_cost import SwapCost
from kvcourse.workloads import Request

__all__ = ["IterationScheduler"]

_order = attrgetter("order")  # a live request's place in arrival order


class IterationScheduler:
    """Serves ``requests`` one iteration at a time under ``scheme``, on ``num_slots`` KV slots
    (12,596 by default) with iterations timed by ``cost`` (:meth:`IterationCost.for_gpu`).

    The scheduler owns the clock (``time_s``), the ``waiting`` queue and the ``running`` batch, and
    the memory ``scheme.start_memory`` built for this run. :meth:`step` runs one iteration and
    returns its :class:`Iteration`, or None once nothing is left to serve or the clock has reached
    ``horizon_s``; iterating over the scheduler runs it to that end. :meth:`close` (or leaving a
    ``with`` block) frees the memory of the requests still running (and swapped out).

    Counters for the run so far (``iterations``, ``preemptions`` …) are listed in ``__init__``.

    Invariants, true between steps:

    * every request is in exactly one place: not yet arrived, ``waiting``, ``running``, or
      finished (it then holds no memory and has generated its whole output);
    * ``waiting`` and ``running`` are each in arrival order (a request's ``order``): arrivals join
      the back of the queue, a victim goes back to its place in it (the front, with vLLM's
      victim, the latest-arrived, in the paper and in v1), and an admitted request takes its place
      in the batch (the end, with vLLM's victim). Then every running request arrived before every
      waiting one, so the oldest unfinished request is ``running[0]`` whenever anything runs;
    * admission takes the head of the queue or nobody (no overtaking), and admits nobody in an
      iteration whose step 2 preempted a request and left others running;
    * every running request holds memory for each token it has stored (prompt + generated), and
      under a contiguous scheme for every token it will store; a waiting request holds no GPU
      memory, and CPU blocks exactly while it is swapped out (``cpu_blocks``, then ``new`` is
      False: it resumes decoding);
    * preemption is all or nothing: the victim frees all its memory, keeps its generated-token
      count, and is re-admitted later like any waiting request (the loop checks the first part
      after every :meth:`preempt`);
    * ``time_s`` never goes back; the five kinds of every :class:`Iteration` add up to
      ``num_slots``. If every request fits the memory alone and ``horizon_s`` is infinite, every
      request finishes (exercise 12): with vLLM's victim the oldest running request is
      preempted only when it is alone, and alone it fits — so it never is, and always progresses.

    The two hooks are left to a subclass (this class raises ``NotImplementedError`` when memory
    runs out): :class:`kvcourse.serving.preemption.VllmPaperScheduler` is the 2023 vLLM paper's
    (:class:`kvcourse.serving.paged_v1.VllmV1Scheduler` vLLM v1's), and a student's
    scheduler of assignment a4 is another. Read the ``admitted`` and ``finished`` requests of each
    :class:`Iteration` for latency metrics (:mod:`kvcourse.serving.latency` does).
    """

    def __init__(
        self,
        requests: Sequence[Request],
        scheme: MemoryScheme,
        *,
        num_slots: int = A100_SLOTS,
        cost: IterationCost | None = None,
        horizon_s: float = math.inf,
    ) -> None:
        self.requests: tuple[Request, ...] = tuple(check_requests(requests))
        self.scheme = check_scheme(scheme)
        self.num_slots = check_positive_int("num_slots", num_slots, "e.g. A100_SLOTS (12,596)")
        self.cost = check_cost(cost)
        if isinstance(horizon_s, bool) or not isinstance(horizon_s, (int, float)):
            raise TypeError(f"horizon_s must be a number of seconds, got {horizon_s!r}")
        if not horizon_s >= 0:  # also refuses NaN
            raise ValueError(f"horizon_s must be a non-negative number of seconds, got {horizon_s}")
        self.horizon_s = float(horizon_s)
        self.recovery: str = getattr(scheme, "recovery", "recompute")  # one of RECOVERIES
        self.swap_cost: SwapCost | None = getattr(scheme, "swap_cost", None)
        if self.recovery not in RECOVERIES or (
            self.recovery != "recompute" and not isinstance(self.swap_cost, SwapCost)
        ):
            raise ValueError(
                f"{scheme!r}: recovery must be one of {RECOVERIES} (swapping needs "
                f"a SwapCost swap_cost), got {self.recovery!r}"
            )
        self.memory = scheme.start_memory(self.num_slots, self.requests)
        self.time_s = 0.0
        self.waiting: deque[LiveRequest] = deque()
        self.running: list[LiveRequest] = []
        self.iterations = 0  #: iterations run so far
        self.preemptions = 0  #: requests preempted so far
        self.recomputations = 0  #: preemptions recovered by recomputing
        self.recomputed_tokens = 0  #: prompt + generated tokens of each recomputed request
        self.swap_outs = 0  #: preemptions recovered by swapping
        self.swap_fallbacks = 0  #: swaps the CPU pool had no room for, recomputed instead
        self.swapped_out_blocks = 0  #: KV blocks copied to the CPU pool
        self.swapped_in_blocks = 0  #: KV blocks copied back
        self.swap_s = 0.0  #: time of those copies, included in the iterations' durations
        self._next_arrival = 0  # index into self.requests of the next request to arrive
        self._stored = 0  # tokens held by running requests
        self._final = 0  # sum of prompt + output over running requests
        self._swap_step = [0.0, 0, 0]  # this iteration's copy seconds, blocks out, blocks in
        self._lag = self.memory.unwritten_tokens  # generated tokens not yet stored, per request
        self._closed = False

    # ------------------------------------------------------------------ the loop

    def step(self) -> Iteration | None:
        """Run one iteration (steps 1-6 of the module docstring) and return what it did; None, and
        nothing changes, once every request has finished or the clock has reached ``horizon_s``.

        Raises RuntimeError if the head of the queue is refused with nothing running: it can never
        be admitted (the allocator cannot place it even in the empty arena).
        """
        if self._closed:
            raise RuntimeError("this VllmPaperScheduler is closed; start a new one to serve again")
        preempted: list[LiveRequest] = []
        self._swap_step = [0.0, 0, 0]
        while True:
            self._join_arrivals()
            if not self.running and not self.waiting:
                if self._next_arrival >= len(self.requests):
                    return None
                self.time_s = self.requests[self._next_arrival].arrival_s
                continue
            if self.time_s >= self.horizon_s:
                return None
            victims = self._make_room()
            preempted += victims
            admitted, refused_need = ([], -1) if victims else self._admit()
            if self.running:
                return self._run_batch(admitted, preempted, refused_need)
            if refused_need >= 0:
                head = self.waiting[0]
                raise RuntimeError(
                    f"{self.scheme.label}: request {head.request.request_id} (prompt "
                    f"{head.prompt}, output {head.output}) can never be admitted: it asks for "
                    f"{refused_need} slots and the allocator refuses it even with the whole arena "
                    f"of {self.num_slots} slots free; clip the workload or use a larger arena"
                )
            # Everybody was preempted (the schemes' checks rule this out; a memory that allows
            # it gets a fresh admission round at the same time, no time passing).

    def __iter__(self) -> Iterator[Iteration]:
        """The iterations :meth:`step` runs, until it returns None."""
        while (iteration := self.step()) is not None:
            yield iteration

    def _join_arrivals(self) -> None:
        """Step 1: requests that have arrived by now join the back of the queue."""
        requests = self.requests
        while self._next_arrival < len(requests):
            request = requests[self._next_arrival]
            if request.arrival_s > self.time_s:
                break
            live = LiveRequest(request)
            live.order = self._next_arrival
            self.waiting.append(live)
            self._next_arrival += 1

    def _make_room(self) -> list[LiveRequest]:
        """Step 2: the slot of this iteration's token for every running request, preempting when
        memory runs out; returns the victims, now back in the queue."""
        running = self.running
        victims: list[LiveRequest] = []
        i = self.memory.grow(running, 0)
        while i < len(running):
            victim = self.choose_victim(running[i])
            j, batch = batch_index(self, victim), len(running)
            self.preempt(victim)
            check_preempted(self, victim, batch)
            victims.append(victim)
            if j < i:  # the needy request moved one place forward
                i -= 1
            i = self.memory.grow(running, i)
        if victims:  # the running requests' token counts, recounted after the hooks' changes
            self._stored = sum(live.prompt + live.done - self._lag for live in running)
            self._final = sum(live.final for live in running)
        return victims

    def _admit(self) -> tuple[list[LiveRequest], int]:
        """Step 3: admit the head of the queue while its memory fits. Returns the admitted requests
        and the slots the refused head asked for (-1 when nobody was refused)."""
        admitted: list[LiveRequest] = []
        waiting = self.waiting
        running = self.running
        while waiting:
            head = waiting[0]
            if not self.memory.admit(head):
                return admitted, self.memory.need(head)
            waiting.popleft()
            if head.cpu_blocks:
                self._swap_in(head)
            if running and running[-1].order > head.order:  # only after a chosen victim
                bisect.insort(running, head, key=_order)
            else:
                running.append(head)
            self._final += head.final
            admitted.append(head)
        return admitted, -1

    def _run_batch(
        self, admitted: list[LiveRequest], preempted: list[LiveRequest], refused_need: int
    ) -> Iteration:
        """Steps 4-6: one token for every running request, the accounting, the clock."""
        running = self.running
        stored = self._stored
        new_tokens = 0
        finished: list[LiveRequest] = []
        for live in running:
            if live.new:
                live.new = False
                prefill = live.prompt + live.done
                new_tokens += prefill - live.cached_tokens
                stored += prefill + 1 - self._lag
            else:
                new_tokens += 1
                stored += 1
            live.done += 1
            if live.done == live.output:
                finished.append(live)
        self._stored = stored
        allocated = self.memory.allocated()
        held = stored - self.memory.shared_slots()  # a shared block's tokens, once
        reserved, internal = self.memory.split_allocated(held, self._final, allocated)
        unallocated = self.num_slots - allocated
        # The head was refused although the free slots added up to what it asked for: external.
        external = unallocated if 0 <= refused_need <= unallocated else 0
        swap_s, swapped_out, swapped_in = self._swap_step
        duration = self.cost.seconds(stored, new_tokens) + swap_s
        iteration = Iteration(
            time_s=self.time_s,
            duration_s=duration,
            stored=held,
            reserved=reserved,
            internal=internal,
            external=external,
            free=unallocated - external,
            running=len(running),
            waiting=len(self.waiting),
            new_tokens=new_tokens,
            admitted=tuple(admitted),
            preempted=tuple(preempted),
            finished=tuple(finished),
            swap_s=swap_s,
            swapped_out=swapped_out,
            swapped_in=swapped_in,
        )
        self.iterations += 1
        for live in finished:  # released while still in the batch: close() retries after errors
            self.memory.release(live)
            self._stored -= live.prompt + live.done - self._lag
            self._final -= live.final
        if finished:
            done_ids = {id(live) for live in finished}
            running[:] = [live for live in running if id(live) not in done_ids]
        self.time_s += duration
        return iteration

    # ------------------------------------------------------------------ preemption

    def choose_victim(self, needy: LiveRequest) -> LiveRequest:
        """The hook that names the running request to preempt when ``needy`` (running) needs a
        new block and none is free; it must return a member of ``running``, ``needy`` included.
        The vLLM paper's answer, the latest-arrived:
        :class:`kvcourse.serving.preemption.VllmPaperScheduler`."""
        raise NotImplementedError(
            f"{type(self).__name__} has no choose_victim(): subclass IterationScheduler and write "
            f"it, or use kvcourse.serving.VllmPaperScheduler (the 2023 vLLM paper's)"
        )

    def preempt(self, victim: LiveRequest) -> None:
        """The hook that preempts ``victim`` (running), all or nothing: take it out of
        ``running``, free all of its memory (``memory.release``), count it (``preemptions`` and
        ``victim.preemptions``), put it back in ``waiting`` and say how it resumes:
        :meth:`recompute` or :meth:`swap_out`. The 2023 vLLM paper's: :class:`kvcourse.serving.
        preemption.VllmPaperScheduler`. The loop checks the result (:class:`PreemptionError`)."""
        raise NotImplementedError(
            f"{type(self).__name__} has no preempt(): subclass IterationScheduler and write it, "
            f"or use kvcourse.serving.VllmPaperScheduler (the 2023 vLLM paper's)"
        )

    def recompute(self, victim: LiveRequest) -> None:
        """Bring a preempted request back by **recomputation** (§6.2): its KV is gone, so when it
        is admitted again it prefills its prompt plus the tokens it had generated as one new
        prompt (the paper's rule; under vLLM v1's memory its full blocks stay cached, and only
        the part evicted meanwhile is prefilled again). Counted in ``recomputations`` and
        ``recomputed_tokens`` (prompt + generated, whatever the memory still holds)."""
        if self.memory.holds(victim) or victim.cpu_blocks:
            raise PreemptionError(
                f"recompute(request {victim.request.request_id}): call it on a preempted "
                f"request, after memory.release(victim), and not on one already swapped out"
            )
        self.recomputations += 1
        self.recomputed_tokens += victim.prompt + victim.done
        victim.new = True

    def swap_out(self, victim: LiveRequest) -> bool:
        """Bring a preempted request back by **swapping** (§6.2): copy the blocks its tokens fill
        to the CPU block pool now (``swap_cost`` times the copy, added to this iteration), and back
        into GPU blocks when it is admitted again; it then resumes decoding. True if copied; False,
        with nothing changed (counted in ``swap_fallbacks``), when the scheme keeps no CPU pool
        or the pool has no room: recompute it then."""
        if self.memory.holds(victim) or victim.cpu_blocks or victim.new:
            raise PreemptionError(
                f"swap_out(request {victim.request.request_id}): call it once on a preempted "
                f"request, after memory.release(victim), and not on one marked for recompute"
            )
        blocks = self.memory.swap_out(victim)
        if not blocks:
            self.swap_fallbacks += 1
            return False
        seconds = self.swap_cost.seconds(blocks)
        self.swap_outs += 1
        self.swapped_out_blocks += blocks
        self.swap_s += seconds
        self._swap_step[0] += seconds
        self._swap_step[1] += blocks
        return True

    def _swap_in(self, live: LiveRequest) -> None:
        """Step 3 for a swapped request: its KV is copied back into the GPU blocks it was given."""
        blocks = self.memory.swap_in(live)
        seconds = self.swap_cost.seconds(blocks)
        self._stored += live.prompt + live.done - self._lag
        self.swapped_in_blocks += blocks
        self.swap_s += seconds
        self._swap_step[0] += seconds
        self._swap_step[2] += blocks

    # ------------------------------------------------------------------ the end

    def close(self, *, after_error: bool = False) -> None:
        """Free the memory of every request still running, and the CPU blocks of those swapped
        out, so that a caller's allocator instance is handed back empty; the scheduler serves no
        more. ``after_error``: best effort, stop at the first release that fails, so the error
        being handled stays the one reported."""
        if self._closed:
            return
        self._closed = True
        for live in self.running:
            if not after_error:
                self.memory.release(live)
                continue
            try:
                self.memory.release(live)
            except Exception:  # the original error matters more
                break
        for live in self.waiting:
            if live.cpu_blocks:
                self.memory.swap_in(live)

    def __enter__(self) -> IterationScheduler:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close(after_error=exc_type is not None)
