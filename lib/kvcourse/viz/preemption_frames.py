"""§6's scheduler recorded: who is admitted, who is preempted and why, one iteration at a time.

:func:`preemption_frames` serves a small workload with the real
:class:`~kvcourse.serving.preemption.VllmPaperScheduler` (or another scheduler class) under a
:class:`~kvcourse.serving.schemes.PagedScheme` and records, after every iteration, the block pool
(which request holds which block, how many of its slots hold tokens), the waiting queue in order,
the victims of the iteration with the blocks they gave back, and who finished
(:class:`PreemptionFrame`). Nothing is made up by hand: every block id comes from the requests'
block tables, noted as the memory releases them. :func:`frame_note` says in one sentence what an
iteration did. :mod:`kvcourse.viz.preemption` draws the frames.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kvcourse.serving.cost import IterationCost
from kvcourse.serving.memory import LiveRequest, PagedMemory
from kvcourse.serving.preemption import VllmPaperScheduler, check_scheduler_class
from kvcourse.serving.scheduler import IterationScheduler
from kvcourse.serving.schemes import PagedScheme
from kvcourse.workloads import Request

__all__ = [
    "PREEMPTION_DEMO",
    "PreemptionFrame",
    "RequestState",
    "frame_note",
    "preemption_frames",
]

#: §6's small example: four requests (id, arrival in iterations, prompt, output) that outgrow a
#: pool of 6 blocks of 4 slots, served one iteration per time unit.
PREEMPTION_DEMO: tuple[Request, ...] = (
    Request(0, 0.0, 5, 9),
    Request(1, 0.0, 3, 6),
    Request(2, 1.0, 4, 4),
    Request(3, 2.0, 6, 3),
)


@dataclass(frozen=True)
class RequestState:
    """One request in a frame: its ``name`` (A, B, … in arrival order), the physical ``blocks``
    it holds (or held, for a victim or a finished request), the ``tokens`` stored in them, its
    ``done`` of ``output`` tokens generated, and whether its next admission is a ``recompute``
    (a victim whose KV was dropped: it will prefill ``tokens`` again)."""

    name: str
    blocks: tuple[int, ...]
    tokens: int
    done: int
    output: int
    recompute: bool = False


@dataclass(frozen=True)
class PreemptionFrame:
    """The scheduler after one iteration (:meth:`IterationScheduler.step`).

    ``iteration`` counts from 1, ``time_s`` is when it started. ``running`` are the requests in
    the batch, in batch order, after the iteration's token (finished ones excluded), ``finished``
    those that wrote their last token in it and freed their blocks, ``victims`` those preempted
    at its start with the blocks they gave back, ``needy`` who needed a new block when none was
    free (None without a preemption). ``waiting`` is the queue after the iteration, head first,
    of requests that have arrived; ``admitted`` the names admitted in it; ``refused`` the head
    of the queue that did not fit (None if nobody waited or admission was skipped because of a
    preemption). ``num_blocks`` and ``block_size`` describe the pool.
    """

    iteration: int
    time_s: float
    num_blocks: int
    block_size: int
    running: tuple[RequestState, ...]
    finished: tuple[RequestState, ...]
    victims: tuple[RequestState, ...]
    needy: str | None
    waiting: tuple[RequestState, ...]
    admitted: tuple[str, ...]
    refused: str | None

    @property
    def owners(self) -> dict[int, str]:
        """Physical block id → name of the running request holding it."""
        return {b: r.name for r in self.running for b in r.blocks}

    @property
    def free_at_admission(self) -> int:
        """Blocks free when the queue's head was considered: the finished requests still held
        theirs then (they free them at the end of the iteration)."""
        held = sum(len(r.blocks) for r in (*self.running, *self.finished))
        return self.num_blocks - held

    @property
    def num_free(self) -> int:
        """Blocks no running request holds after the iteration."""
        return self.num_blocks - sum(len(r.blocks) for r in self.running)


def _name(order: int) -> str:
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return letters[order] if order < len(letters) else f"R{order}"


class _Recorder:
    """Wraps a scheduler's memory ``release`` to note which blocks each request gives back, and
    its ``choose_victim`` to note who needed a block."""

    def __init__(self, scheduler: IterationScheduler) -> None:
        self.released: list[tuple[LiveRequest, tuple[int, ...], int]] = []
        self.needy: list[LiveRequest] = []
        memory = scheduler.memory
        release = memory.release
        choose = scheduler.choose_victim

        def recording_release(live: LiveRequest) -> None:
            blocks = live.table.block_ids if live.table is not None else ()
            self.released.append((live, blocks, live.prompt + live.done))
            release(live)

        def recording_choose(needy: LiveRequest) -> LiveRequest:
            self.needy.append(needy)
            return choose(needy)

        memory.release = recording_release  # type: ignore[method-assign]
        scheduler.choose_victim = recording_choose  # type: ignore[method-assign]


def _state(live: LiveRequest, blocks: tuple[int, ...] | None = None, tokens: int | None = None):
    if blocks is None:
        blocks = live.table.block_ids if live.table is not None else ()
    return RequestState(
        name=_name(live.order),
        blocks=tuple(blocks),
        tokens=live.prompt + live.done if tokens is None else tokens,
        done=live.done,
        output=live.output,
        recompute=live.new and live.done > 0,
    )


def preemption_frames(
    requests: Sequence[Request] = PREEMPTION_DEMO,
    *,
    block_size: int = 4,
    num_blocks: int = 6,
    scheduler: type[IterationScheduler] = VllmPaperScheduler,
    cost: IterationCost | None = None,
    max_iterations: int = 200,
) -> list[PreemptionFrame]:
    """Serve ``requests`` on a pool of ``num_blocks`` blocks of ``block_size`` slots with
    ``scheduler`` (the vLLM paper's FCFS, preempt-the-latest :class:`VllmPaperScheduler` by default,
    or a subclass such as :class:`~kvcourse.serving.progress.PreemptEarliest`), recomputing victims,
    and record one :class:`PreemptionFrame` per iteration until every request finishes (at most
    ``max_iterations``). ``cost`` defaults to one time unit per iteration, so arrival times count
    iterations. Requests are named A, B, C … in arrival order."""
    check_scheduler_class(scheduler)
    if cost is None:
        cost = IterationCost(1.0, 0.0, 0.0)
    scheme = PagedScheme(block_size)
    frames: list[PreemptionFrame] = []
    with scheduler(requests, scheme, num_slots=block_size * num_blocks, cost=cost) as run:
        memory = run.memory
        assert isinstance(memory, PagedMemory)
        rec = _Recorder(run)
        while len(frames) < max_iterations:
            rec.released.clear()
            rec.needy.clear()
            it = run.step()
            if it is None:
                break
            released = {id(live): (blocks, tokens) for live, blocks, tokens in rec.released}
            victims = tuple(_state(v, *released[id(v)]) for v in it.preempted)
            finished = tuple(_state(f, *released[id(f)]) for f in it.finished)
            waiting = tuple(_state(w, ()) for w in run.waiting)
            refused = None
            if run.waiting and not it.preempted:
                refused = _name(run.waiting[0].order)
            needy = _name(rec.needy[0].order) if rec.needy else None
            frames.append(
                PreemptionFrame(
                    iteration=run.iterations,
                    time_s=it.time_s,
                    num_blocks=memory.pool.num_blocks,
                    block_size=block_size,
                    running=tuple(_state(r) for r in run.running),
                    finished=finished,
                    victims=victims,
                    needy=needy,
                    waiting=waiting,
                    admitted=tuple(_name(a.order) for a in it.admitted),
                    refused=refused,
                )
            )
    return frames


def frame_note(frame: PreemptionFrame) -> str:
    """One sentence saying what the iteration did, from the frame alone."""
    parts = []
    key = lambda name: (len(name), name)  # noqa: E731 - arrival order of the names
    for v in frame.victims:
        n = len(v.blocks)
        others = [r.name for r in frame.running] + [f.name for f in frame.finished]
        which = ""
        if others and all(key(v.name) > key(o) for o in others):
            which = " (latest)"
        elif others and all(key(v.name) < key(o) for o in others):
            which = " (earliest)"
        parts.append(
            f"{frame.needy} needs a block, none free → {v.name}{which} preempted, "
            f"{n} block{'s' if n != 1 else ''} freed"
        )
    if frame.victims and frame.waiting:
        parts.append("no admission")
    if frame.admitted:
        parts.append("admitted " + ", ".join(frame.admitted))
    if frame.refused is not None:
        head = next(w for w in frame.waiting if w.name == frame.refused)
        need = math.ceil((head.tokens + 1) / frame.block_size)
        parts.append(f"{head.name} waits (needs {need}, {frame.free_at_admission} free)")
    for f in frame.finished:
        parts.append(f"{f.name} finishes")
    return "; ".join(parts) if parts else "every running request decodes one token"
