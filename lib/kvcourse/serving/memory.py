"""The KV memory of one serving run, as the scheduler sees it (§3.3): contiguous runs or blocks.

A :class:`~kvcourse.serving.schemes.MemoryScheme` is configuration; when a run starts it builds
one of these memories, empty, over the run's ``num_slots`` token slots:

* :class:`ContiguousMemory`: every admitted request holds one contiguous run of slots from a
  :class:`~kvcourse.blocks.buddy.ContiguousAllocator` (the library's buddy allocator or a
  student's), reserved in full on admission: ``max_len`` slots for "Max", the request's final
  length for "Oracle". Every answer of the allocator is checked, and a broken promise raises
  :class:`AllocatorContractError`;
* :class:`PagedMemory`: PagedAttention's blocks of ``block_size`` slots
  (:class:`~kvcourse.blocks.pool.BlockPool`, one :class:`~kvcourse.blocks.table.BlockTable` per
  request), taken one at a time as tokens arrive, with nothing reserved ahead
  (:class:`~kvcourse.serving.paged_v1.PagedV1Memory` is vLLM v1's).

:class:`KVMemory` is the interface between the two and the scheduler; :class:`LiveRequest` is a
request while it is being served, the record both sides read and update.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from kvcourse._checks import as_index, ceil_div
from kvcourse.blocks.buddy import ContiguousAllocator
from kvcourse.blocks.pool import BlockPool
from kvcourse.blocks.table import BlockTable
from kvcourse.workloads import Request

__all__ = [
    "AllocatorContractError",
    "ContiguousMemory",
    "KVMemory",
    "LiveRequest",
    "PagedMemory",
]


class AllocatorContractError(RuntimeError):
    """A contiguous allocator broke a promise of
    :class:`~kvcourse.blocks.buddy.ContiguousAllocator`: it returned a run smaller than asked,
    outside the arena or overlapping another one, or its ``free_slots()`` did not move by the run's
    size. The message names the call and the numbers."""


@dataclass(eq=False, slots=True)
class LiveRequest:
    """A request while it is being served: its lengths, its progress, and where its KV lives.

    ``prompt`` is the prompt length, ``output`` the number of tokens it will generate and ``final``
    their sum, the tokens it holds when it finishes. ``done`` counts the output tokens generated so
    far (a preempted request keeps its count: recomputation re-reads them as prompt, swapping keeps
    their KV). ``new`` is true while its next iteration is a (re)prefill. The memory keeps its
    handle here: ``offset`` and ``size`` of a contiguous run (-1 and 0 while it holds none), or its
    block ``table``; ``cpu_blocks`` are the CPU pool's blocks holding its KV while it is swapped out
    (§6), empty otherwise. ``order`` is its place in arrival order (the scheduler sets it; the
    queue and the batch are kept sorted by it) and ``preemptions`` counts how often it was
    preempted. ``cached_tokens`` are the tokens of its (re)prompt whose KV the memory still held
    when it was last admitted (a prefix-cache hit on its own blocks, under vLLM v1's memory;
    always 0 under the course's): its prefill computes only the rest. Compared by identity: two
    live requests are never the same one.
    """

    request: Request
    prompt: int = field(init=False)
    output: int = field(init=False)
    final: int = field(init=False)
    done: int = 0
    new: bool = True
    offset: int = -1
    size: int = 0
    table: BlockTable | None = None
    cpu_blocks: tuple[int, ...] = ()
    order: int = -1
    preemptions: int = 0
    cached_tokens: int = 0

    def __post_init__(self) -> None:
        self.prompt = self.request.prompt_len
        self.output = self.request.output_len
        self.final = self.prompt + self.output


class KVMemory:
    """The KV memory of one run, empty at the start: what the scheduler asks of a memory scheme.

    The scheduler calls :meth:`admit` to let a waiting request in, :meth:`grow` before each
    iteration to give every running request the slot of its next token, and :meth:`release` when a
    request finishes or is preempted. :meth:`need`, :meth:`allocated` and :meth:`split_allocated`
    feed the accounting of the five kinds of memory (:mod:`kvcourse.serving.records`);
    :meth:`swap_out` and :meth:`swap_in` move a preempted request's KV to CPU memory and back (§6).

    ``unwritten_tokens`` says when the token an iteration generates gets its KV: 0, the course's
    accounting, in the same iteration (a request stores prompt + generated tokens, and finishes
    holding prompt + output); 1, vLLM's (the paper's v0 and v1), in the next iteration, which
    reads it as its input (a request stores one token fewer, and the last token it generates is
    never stored).
    """

    unwritten_tokens: int = 0

    def need(self, live: LiveRequest) -> int:
        """Slots ``live`` asks for to be admitted now (to tell external fragmentation from a
        memory that is simply full)."""
        raise NotImplementedError

    def admit(self, live: LiveRequest) -> bool:
        """Allocate what ``live`` needs to start its (re)prefill; False, with nothing changed, when
        it does not fit now."""
        raise NotImplementedError

    def release(self, live: LiveRequest) -> None:
        """Free everything ``live`` holds, all at once."""
        raise NotImplementedError

    def holds(self, live: LiveRequest) -> bool:
        """Whether ``live`` holds memory here now (it is admitted and not yet released)."""
        raise NotImplementedError

    def allocated(self) -> int:
        """Slots allocated to running requests, now."""
        raise NotImplementedError

    def shared_slots(self) -> int:
        """Slots counted more than once in the running requests' stored tokens, because several
        requests hold the same cached block (vLLM v1's prefix caching); 0 without sharing."""
        return 0

    def grow(self, running: list[LiveRequest], start: int) -> int:
        """Give each of ``running[start:]``, in batch order, the slot of its next token; return the
        index of the first that needs a new block when none is free, or ``len(running)`` when all
        got theirs. A contiguous memory reserved every slot on admission, so all fit."""
        return len(running)

    def split_allocated(self, stored: int, final: int, allocated: int) -> tuple[int, int]:
        """``(reserved, internal)`` slots of the ``allocated`` ones, given the tokens ``stored`` by
        the running requests and the sum of their ``final`` lengths. Contiguous: the slots up to
        each final length are reserved, those beyond are internal fragmentation."""
        return final - stored, allocated - final

    def swap_out(self, live: LiveRequest) -> int:
        """Copy the KV of ``live`` (just released: preempted) to CPU memory: the blocks its stored
        tokens fill, kept in ``live.cpu_blocks``. Returns how many blocks were copied, 0 (nothing
        changed) when the CPU pool cannot take them all. Contiguous memories swap nothing."""
        return 0

    def swap_in(self, live: LiveRequest) -> int:
        """Give back the CPU blocks of ``live`` once it is admitted again (its KV copied back into
        the GPU blocks :meth:`admit` gave it); returns how many blocks were copied."""
        return 0


class ContiguousMemory(KVMemory):
    """Contiguous runs from a :class:`~kvcourse.blocks.buddy.ContiguousAllocator`, each checked.

    A request asks for ``max_len`` slots ("Max"), or for its final length when ``max_len`` is None
    ("Oracle"). Every ``alloc`` and ``free`` is checked against what the allocator promised: a run
    at least as large as asked, inside the arena, overlapping no live run, and ``free_slots()``
    moving by exactly the run's size.
    """

    def __init__(self, allocator: ContiguousAllocator, num_slots: int, max_len: int | None):
        self._allocator = allocator
        self._num_slots = num_slots
        self._max_len = max_len
        self._starts: list[int] = []  # sorted offsets of live runs
        self._sizes: dict[int, int] = {}
        self._allocated = 0

    def need(self, live: LiveRequest) -> int:
        return live.final if self._max_len is None else self._max_len

    def allocated(self) -> int:
        return self._allocated

    def admit(self, live: LiveRequest) -> bool:
        want = self.need(live)
        before = self._allocator.free_slots()
        offset = self._allocator.alloc(want)
        after = self._allocator.free_slots()
        if offset is None:
            if after != before:
                raise AllocatorContractError(
                    f"alloc({want}) returned None but free_slots() changed from {before} to "
                    f"{after}; a failed alloc must leave the allocator unchanged"
                )
            return False
        try:
            offset = as_index(offset, "the offset alloc() returned")
        except TypeError as error:
            raise AllocatorContractError(f"alloc({want}): {error}") from None
        size = before - after
        if size < want:
            raise AllocatorContractError(
                f"alloc({want}) returned offset {offset} but free_slots() fell by only {size} "
                f"(from {before} to {after}); an allocation must take at least {want} slots"
            )
        if offset < 0 or offset + size > self._num_slots:
            raise AllocatorContractError(
                f"alloc({want}) returned offset {offset} for a run of {size} slots, which does not "
                f"fit in the arena of {self._num_slots} slots (offsets 0..{self._num_slots - 1})"
            )
        i = bisect.bisect_left(self._starts, offset)
        if i > 0:
            prev = self._starts[i - 1]
            if prev + self._sizes[prev] > offset:
                raise AllocatorContractError(
                    f"alloc({want}) returned offset {offset}, inside the run of "
                    f"{self._sizes[prev]} slots still allocated at offset {prev}"
                )
        if i < len(self._starts) and self._starts[i] < offset + size:
            nxt = self._starts[i]
            raise AllocatorContractError(
                f"alloc({want}) returned a run of {size} slots at offset {offset}, overlapping the "
                f"run still allocated at offset {nxt}"
            )
        self._starts.insert(i, offset)
        self._sizes[offset] = size
        self._allocated += size
        live.offset, live.size = offset, size
        return True

    def release(self, live: LiveRequest) -> None:
        if live.size == 0:
            raise ValueError(
                f"request {live.request.request_id} holds no slots (it was never admitted, or "
                f"its run was freed already): release each request's run once"
            )
        before = self._allocator.free_slots()
        self._allocator.free(live.offset)
        after = self._allocator.free_slots()
        if after - before != live.size:
            raise AllocatorContractError(
                f"free({live.offset}) of a run of {live.size} slots changed free_slots() from "
                f"{before} to {after}; it must grow by exactly {live.size}"
            )
        del self._starts[bisect.bisect_left(self._starts, live.offset)]
        del self._sizes[live.offset]
        self._allocated -= live.size
        live.offset, live.size = -1, 0

    def holds(self, live: LiveRequest) -> bool:
        return live.size > 0


class PagedMemory(KVMemory):
    """PagedAttention's memory: a pool of ``num_slots // block_size`` blocks, one block table per
    running request, a new block only when a request's last block is full.

    A request is admitted when the blocks for its (re)prompt plus its first new token are free:
    the course's rule. (vLLM asks for the prompt's blocks only — the paper's v0 and v1 alike — and
    writes a generated token's KV one iteration later: the subclass
    :class:`~kvcourse.serving.paged_v1.PagedV1Memory`.) Nothing is reserved ahead; the empty slots
    of each last block are internal fragmentation.

    ``cpu_blocks`` > 0 adds a CPU block pool of that many blocks (``cpu_pool``) for swapping (§6):
    :meth:`swap_out` copies a preempted request's blocks there, all or none, and :meth:`swap_in`
    gives them back when it is admitted again.
    """

    def __init__(self, num_slots: int, block_size: int, cpu_blocks: int = 0) -> None:
        self._pool = BlockPool(num_slots // block_size, block_size)
        self._block_size = block_size
        self.cpu_pool = BlockPool(cpu_blocks, block_size) if cpu_blocks > 0 else None

    @property
    def pool(self) -> BlockPool:
        """The GPU block pool."""
        return self._pool

    @property
    def block_size(self) -> int:
        """Token slots per block."""
        return self._block_size

    def need(self, live: LiveRequest) -> int:
        tokens = live.prompt + live.done + 1 - self.unwritten_tokens
        return ceil_div(tokens, self._block_size) * self._block_size

    def allocated(self) -> int:
        return self._pool.num_used * self._block_size

    def admit(self, live: LiveRequest) -> bool:
        table = BlockTable(self._pool)
        tokens = live.prompt + live.done + 1 - self.unwritten_tokens
        if table.blocks_needed(tokens) > self._pool.num_free:
            return False
        table.append(tokens)
        live.table = table
        return True

    def release(self, live: LiveRequest) -> None:
        if live.table is None:
            raise ValueError(
                f"request {live.request.request_id} holds no blocks (it was never admitted, or "
                f"its blocks were released already): release each request's blocks once"
            )
        live.table.free()
        live.table = None

    def holds(self, live: LiveRequest) -> bool:
        return live.table is not None

    def grow(self, running: list[LiveRequest], start: int) -> int:
        pool = self._pool
        size = self._block_size
        lag = self.unwritten_tokens
        # A table hears of new tokens only when they need a new block (its token count may lag
        # behind between block boundaries; its blocks never do): one BlockTable call per block
        # instead of one per token keeps the scheduler's hot loop fast.
        for i in range(start, len(running)):
            live = running[i]
            tokens = live.prompt + live.done - lag  # stored now
            if tokens % size == 0:  # the last block is full: this token needs a new one
                if pool.num_free == 0:
                    return i
                live.table.append(tokens + 1 - live.table.num_tokens)
        return len(running)

    def split_allocated(self, stored: int, final: int, allocated: int) -> tuple[int, int]:
        """Paged: nothing is reserved; every allocated slot without a token is internal."""
        return 0, allocated - stored

    def swap_out(self, live: LiveRequest) -> int:
        cpu = self.cpu_pool
        blocks = ceil_div(live.prompt + live.done, self._block_size)
        if cpu is None or blocks > cpu.num_free:
            return 0
        live.cpu_blocks = tuple(cpu.allocate_many(blocks))
        return blocks

    def swap_in(self, live: LiveRequest) -> int:
        blocks = live.cpu_blocks
        for block_id in blocks:
            self.cpu_pool.release(block_id)
        live.cpu_blocks = ()
        return len(blocks)
