"""Where the KV memory went (§3.3, §3.4): three ways to manage it, and an accounting simulator.

The simulator serves a stream of requests with **iteration-level scheduling** (Orca's, lecture 6):
each iteration, every running request produces one token, new requests join the batch between
iterations and finished ones leave. What differs is how the KV memory — ``num_slots`` token slots,
12,596 for OPT-13B on an A100-40GB (:func:`kvcourse.sizing.kv_token_capacity`) — is handed out:

* :class:`ReserveMaxPolicy` ("Max"): each request reserves a contiguous run of the maximum
  sequence length, 2048 slots, when it is admitted;
* :class:`OraclePolicy` ("Oracle"): each request reserves a contiguous run of exactly its final
  length, prompt + output — which no real server knows in advance — through a contiguous allocator,
  by default the :class:`~kvcourse.blocks.buddy.BuddyAllocator`, which rounds up to a power of two;
* :class:`PagedPolicy` ("Paged"): PagedAttention's blocks of 16 slots
  (:class:`~kvcourse.blocks.pool.BlockPool`, :class:`~kvcourse.blocks.table.BlockTable`), allocated
  on demand as tokens arrive, with nothing reserved.

**One iteration**, at simulated time ``t``:

1. requests that have arrived by ``t`` join the back of the waiting queue (first come, first
   served; the queue stays in arrival order);
2. *Paged only:* every running request gets the slot for this iteration's token, oldest first.
   When a new block is needed and none is free, the latest-arrived running request is preempted:
   its blocks are freed and it goes back to the front of the queue, to be recomputed (its prompt
   plus the tokens it had generated become its new prompt). §6 discusses the alternatives;
3. unless step 2 preempted somebody, waiting requests are admitted in arrival order while their
   memory fits — Max and Oracle: the allocator returns a run of 2048, or prompt + output, slots;
   Paged: the free blocks hold the (re)prompt plus the first new token. The first request that does
   not fit stops admission (no overtaking);
4. every running request stores one more token: a newly admitted one stores its whole prompt
   (prefill) and its first output token, the others one token each (decode). A request of output
   length ``o`` therefore runs ``o`` iterations and finishes holding prompt + output tokens;
5. the memory is accounted (below); then finished requests free their memory;
6. time advances by :meth:`IterationCost.seconds` of the work done. When nothing is running or
   waiting, the clock jumps to the next arrival (idle time is not an iteration).

The run stops at the last request's arrival (``horizon_s``), so an overloaded system is measured
while its queue is still full rather than while it drains; iterations that start before
``warmup_s`` (default: the first 20 % of the horizon) are simulated but not measured.

**The five kinds of KV memory.** At step 5 of every iteration each of the ``num_slots`` slots is
exactly one of these (they sum to ``num_slots`` every iteration):

* **stored** — holds the K and V of a token of a running request (prompt or generated so far);
* **reserved** — allocated to a running request and empty now, but the request will write one of
  its own tokens there before it finishes: slots ``prompt + generated .. prompt + output − 1`` of
  a contiguous reservation. Paged allocation reserves nothing ahead, so it is 0 there;
* **internal fragmentation** — allocated to a running request and not reserved: Max and Oracle:
  the slots of a run beyond ``prompt + output``, which no token will ever use (2048 minus the final
  length; the buddy allocator's rounding up to a power of two); Paged: the empty slots of each
  sequence's last, partly filled block (at most ``block_size − 1`` per request);
* **external fragmentation** — not allocated, in an iteration whose step 3 refused the head of the
  queue although the free slots added up to at least what it asked for (2048, prompt + output, or
  its blocks × block size): the memory was free but in pieces too small for it. Then every free
  slot counts here. It never happens with Paged: any free block serves any request;
* **free** — every other slot not allocated: no one was waiting, or the free slots together were
  fewer than the head of the queue needed. The few slots that do not make a whole block
  (12,596 = 787 × 16 + 4) are free under Paged, as is what a reserve-2048 arena cannot use
  (12,596 − 6 × 2048 = 308).

Results are **memory-weighted**: the share of a kind is its slots summed over the measured
iterations divided by ``num_slots`` × the number of measured iterations — not a mean of per-request
ratios. **Concurrency** is the mean number of running requests per measured iteration, and depends
on the request rate, so every figure comes with its rate.

**Time.** :class:`IterationCost` is a roofline for one iteration: reading the weights and the
stored KV from memory, or computing every new token, whichever takes longer; its default constants
come from OPT-13B's sizes and an A100-40GB's data sheet at stated efficiencies.

A student's allocator plugs into the contiguous policies: pass its class (called with the arena
size) or an empty instance as ``allocator``; the simulator checks what it returns and raises
:class:`AllocatorContractError` naming the broken promise.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from kvcourse.blocks.buddy import BuddyAllocator, ContiguousAllocator
from kvcourse.blocks.pool import BlockPool, as_index
from kvcourse.blocks.table import BlockTable
from kvcourse.serving.records import KINDS, AccountingResult, MemoryShares, MemoryTimeline
from kvcourse.sizing import flops_per_token, kv_bytes_per_token, kv_token_capacity, weight_bytes
from kvcourse.specs import A100_40GB, OPT_13B, GPUSpec, ModelSpec
from kvcourse.workloads import ALPACA, SHAREGPT, LengthDistribution, Request, generate_requests

__all__ = [
    "A100_SLOTS",
    "KINDS",
    "AccountingResult",
    "AllocatorContractError",
    "AllocatorSource",
    "IterationCost",
    "MemoryPolicy",
    "MemoryShares",
    "MemoryTimeline",
    "OraclePolicy",
    "PagedPolicy",
    "ReserveMaxPolicy",
    "a100_accounting",
    "compare_policies",
    "concurrency_ratios",
    "default_policies",
    "simulate",
]

#: KV token slots of OPT-13B on an A100-40GB with 10 % kept for activations: 12,596.
A100_SLOTS: int = kv_token_capacity(OPT_13B, A100_40GB)

#: An allocator for a contiguous policy: a factory called with the arena size (a class such as
#: :class:`~kvcourse.blocks.buddy.BuddyAllocator` is one), or an empty allocator instance.
AllocatorSource = Callable[[int], ContiguousAllocator] | ContiguousAllocator


class AllocatorContractError(RuntimeError):
    """A contiguous allocator broke a promise of :class:`~kvcourse.blocks.buddy.ContiguousAllocator`:
    it returned a run smaller than asked, outside the arena or overlapping another one, or its
    ``free_slots()`` did not move by the run's size. The message names the call and the numbers."""


# ---------------------------------------------------------------------------- iteration time


@dataclass(frozen=True)
class IterationCost:
    """How long one iteration takes: a roofline of memory time and compute time.

    ``seconds = max(weights_s + per_context_token_s × stored tokens, per_new_token_s × new tokens)``

    where *stored tokens* is the KV the iteration reads (every running request's context) and
    *new tokens* the tokens it runs through the model (whole prompts for prefills, one per decode).
    """

    weights_s: float
    per_context_token_s: float
    per_new_token_s: float

    def __post_init__(self) -> None:
        for name in ("weights_s", "per_context_token_s", "per_new_token_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"IterationCost.{name} must be a number of seconds, got {value!r}")
            if not math.isfinite(value) or value < 0 or (name == "weights_s" and value == 0):
                raise ValueError(
                    f"IterationCost.{name} must be finite and non-negative (weights_s positive), "
                    f"got {value!r}"
                )

    @classmethod
    def for_gpu(
        cls,
        model: ModelSpec = OPT_13B,
        gpu: GPUSpec = A100_40GB,
        *,
        bandwidth_efficiency: float = 0.6,
        compute_efficiency: float = 0.5,
    ) -> IterationCost:
        """The roofline constants of ``model`` on ``gpu``: the weights and each token's KV are read
        at ``bandwidth_efficiency`` of the memory bandwidth, each new token costs
        :func:`~kvcourse.sizing.flops_per_token` at ``compute_efficiency`` of peak.

        OPT-13B on an A100-40GB: 27.5 ms to read the weights, 0.88 µs per stored token, 0.165 ms
        per new token — a decode iteration over a full KV cache takes ≈ 38 ms.
        """
        for name, value in (
            ("bandwidth_efficiency", bandwidth_efficiency),
            ("compute_efficiency", compute_efficiency),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a fraction in (0, 1], got {value!r}")
            if not 0 < value <= 1:
                raise ValueError(f"{name} must be a fraction in (0, 1], got {value!r}")
        bandwidth = gpu.memory_bandwidth * bandwidth_efficiency
        return cls(
            weights_s=weight_bytes(model) / bandwidth,
            per_context_token_s=kv_bytes_per_token(model) / bandwidth,
            per_new_token_s=flops_per_token(model) / (gpu.peak_flops * compute_efficiency),
        )

    def seconds(self, stored_tokens: int, new_tokens: int) -> float:
        """Duration of an iteration that reads ``stored_tokens`` tokens of KV and runs
        ``new_tokens`` tokens through the model."""
        memory = self.weights_s + self.per_context_token_s * stored_tokens
        return max(memory, self.per_new_token_s * new_tokens)


# ---------------------------------------------------------------------------- policies


class _Live:
    """One request inside the simulator (mutable, private)."""

    __slots__ = ("done", "final", "new", "offset", "output", "prompt", "request", "size", "table")

    def __init__(self, request: Request) -> None:
        self.request = request
        self.prompt = request.prompt_len
        self.output = request.output_len
        self.final = self.prompt + self.output
        self.done = 0  # output tokens generated so far
        self.new = True  # its next iteration is a (re)prefill
        self.offset = -1
        self.size = 0
        self.table: BlockTable | None = None


class _Memory:
    """The memory of one simulation run (private): what a policy's ``_start`` returns."""

    def need(self, live: _Live) -> int:  # slots the request asks for on admission
        raise NotImplementedError

    def admit(self, live: _Live) -> bool:
        raise NotImplementedError

    def release(self, live: _Live) -> None:
        raise NotImplementedError

    def allocated(self) -> int:
        raise NotImplementedError

    def make_room(self, running: list[_Live]) -> list[_Live]:
        """Give each running request the slot of its next token; return preempted requests."""
        return []

    def split_allocated(self, stored: int, final: int, allocated: int) -> tuple[int, int]:
        """``(reserved, internal)`` slots, given stored tokens and final lengths of the running."""
        return final - stored, allocated - final


class MemoryPolicy:
    """How KV memory is handed to requests; subclasses are the three policies of §3.

    ``name`` is the short name used as a key ("Max", "Oracle", "Paged") and ``label`` a longer
    description for tables. A policy holds configuration only: every :func:`simulate` call starts
    from empty memory, so one policy object can serve many runs.
    """

    name: str = ""
    label: str = ""

    def _start(self, num_slots: int, requests: Sequence[Request]) -> _Memory:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label!r})"


class _ContiguousMemory(_Memory):
    """Contiguous runs from a :class:`ContiguousAllocator`, checked on every call."""

    def __init__(self, allocator: ContiguousAllocator, num_slots: int, max_len: int | None):
        self._allocator = allocator
        self._num_slots = num_slots
        self._max_len = max_len
        self._starts: list[int] = []  # sorted offsets of live runs
        self._sizes: dict[int, int] = {}
        self._allocated = 0

    def need(self, live: _Live) -> int:
        return live.final if self._max_len is None else self._max_len

    def allocated(self) -> int:
        return self._allocated

    def admit(self, live: _Live) -> bool:
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

    def release(self, live: _Live) -> None:
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


def _resolve_allocator(source: AllocatorSource, num_slots: int, owner: str) -> ContiguousAllocator:
    if isinstance(source, ContiguousAllocator) and not isinstance(source, type):
        allocator = source
    elif callable(source):
        allocator = source(num_slots)
    else:
        raise TypeError(
            f"{owner}: allocator must be a ContiguousAllocator (alloc, free, free_slots, "
            f"free_blocks), or a class/factory that builds one from the arena size; got {source!r}"
        )
    if not isinstance(allocator, ContiguousAllocator):
        raise TypeError(
            f"{owner}: the allocator factory returned {allocator!r}, which lacks the "
            f"ContiguousAllocator methods alloc, free, free_slots and free_blocks"
        )
    free = allocator.free_slots()
    if free != num_slots:
        raise ValueError(
            f"{owner}: the allocator must start empty over the arena of {num_slots} slots, but "
            f"its free_slots() is {free}; pass a new allocator, or a factory such as "
            f"BuddyAllocator"
        )
    return allocator


def _check_allocator_source(source: object, owner: str) -> None:
    if not (isinstance(source, ContiguousAllocator) or callable(source)):
        raise TypeError(
            f"{owner}: allocator must be a ContiguousAllocator (alloc, free, free_slots, "
            f"free_blocks), or a class/factory that builds one from the arena size; got {source!r}"
        )


class ReserveMaxPolicy(MemoryPolicy):
    """The "Max" policy: every request reserves ``max_len`` contiguous slots (2048, OPT's context)
    when it is admitted, through ``allocator`` (a buddy allocator by default; 2048 is a power of
    two, so no rounding). On 12,596 slots at most 6 requests run at once."""

    def __init__(self, max_len: int = 2048, allocator: AllocatorSource = BuddyAllocator) -> None:
        max_len = as_index(max_len, "max_len")
        if max_len <= 0:
            raise ValueError(f"max_len must be a positive number of slots, got {max_len}")
        _check_allocator_source(allocator, "ReserveMaxPolicy")
        self.max_len = max_len
        self.allocator = allocator
        self.name = "Max"
        self.label = f"Max (reserve {max_len})"

    def _start(self, num_slots: int, requests: Sequence[Request]) -> _Memory:
        if self.max_len > num_slots:
            raise ValueError(
                f"ReserveMaxPolicy: max_len {self.max_len} exceeds the arena of {num_slots} "
                f"slots, so no request could ever be admitted; lower max_len or add slots"
            )
        longest = max(requests, key=lambda r: r.total_len)
        if longest.total_len > self.max_len:
            raise ValueError(
                f"ReserveMaxPolicy: request {longest.request_id} needs {longest.total_len} slots "
                f"(prompt + output), more than max_len {self.max_len}; clip the workload to "
                f"max_len or raise max_len"
            )
        allocator = _resolve_allocator(self.allocator, num_slots, "ReserveMaxPolicy")
        return _ContiguousMemory(allocator, num_slots, self.max_len)


class OraclePolicy(MemoryPolicy):
    """The "Oracle" policy: every request reserves exactly its final length (prompt + output) when
    it is admitted — as if the output length were known in advance — through ``allocator``. With the
    default :class:`~kvcourse.blocks.buddy.BuddyAllocator` the run is rounded up to a power of two.

    ``allocator`` is a factory called with the arena size (a class is one), or an empty allocator
    instance; a student's allocator from assignment a1 plugs in here.
    """

    def __init__(self, allocator: AllocatorSource = BuddyAllocator) -> None:
        _check_allocator_source(allocator, "OraclePolicy")
        self.allocator = allocator
        self.name = "Oracle"
        name = getattr(allocator, "__name__", None) or type(allocator).__name__
        self.label = "Oracle + buddy" if allocator is BuddyAllocator else f"Oracle + {name}"

    def _start(self, num_slots: int, requests: Sequence[Request]) -> _Memory:
        longest = max(requests, key=lambda r: r.total_len)
        if longest.total_len > num_slots:
            raise ValueError(
                f"OraclePolicy: request {longest.request_id} needs {longest.total_len} slots, more "
                f"than the whole arena of {num_slots}; clip the workload or add slots"
            )
        allocator = _resolve_allocator(self.allocator, num_slots, "OraclePolicy")
        return _ContiguousMemory(allocator, num_slots, None)


class _PagedMemory(_Memory):
    def __init__(self, num_slots: int, block_size: int) -> None:
        self._pool = BlockPool(num_slots // block_size, block_size)
        self._block_size = block_size

    def need(self, live: _Live) -> int:
        tokens = live.prompt + live.done + 1
        return -(-tokens // self._block_size) * self._block_size

    def allocated(self) -> int:
        return self._pool.num_used * self._block_size

    def admit(self, live: _Live) -> bool:
        table = BlockTable(self._pool)
        tokens = live.prompt + live.done + 1
        if table.blocks_needed(tokens) > self._pool.num_free:
            return False
        table.append(tokens)
        live.table = table
        return True

    def release(self, live: _Live) -> None:
        live.table.free()
        live.table = None

    def make_room(self, running: list[_Live]) -> list[_Live]:
        victims: list[_Live] = []
        pool = self._pool
        i = 0
        size = self._block_size
        # The table is told about new tokens only when they need a new block (its token count
        # may lag behind between block boundaries; its blocks never do). That keeps the hot loop
        # to one BlockTable call per block instead of one per token.
        while i < len(running):
            live = running[i]
            tokens = live.prompt + live.done
            if tokens % size == 0:  # the last block is full: this token needs a new one
                if pool.num_free == 0:
                    victim = running.pop()  # the latest-arrived running request
                    self.release(victim)
                    victims.append(victim)
                    if victim is live:
                        break
                    continue
                live.table.append(tokens + 1 - live.table.num_tokens)
            i += 1
        return victims

    def split_allocated(self, stored: int, final: int, allocated: int) -> tuple[int, int]:
        return 0, allocated - stored


class PagedPolicy(MemoryPolicy):
    """The "Paged" policy: PagedAttention's blocks of ``block_size`` slots (16, vLLM's default),
    taken from a :class:`~kvcourse.blocks.pool.BlockPool` only when a sequence's last block is
    full. A request is admitted when its prompt and first token fit now; when the pool runs dry the
    latest-arrived running request is preempted and later recomputed."""

    def __init__(self, block_size: int = 16) -> None:
        block_size = as_index(block_size, "block_size")
        if block_size <= 0:
            raise ValueError(f"block_size must be a positive number of slots, got {block_size}")
        self.block_size = block_size
        self.name = "Paged"
        self.label = f"Paged (block {block_size})"

    def _start(self, num_slots: int, requests: Sequence[Request]) -> _Memory:
        usable = num_slots // self.block_size * self.block_size
        longest = max(requests, key=lambda r: r.total_len)
        if longest.total_len > usable:
            raise ValueError(
                f"PagedPolicy: request {longest.request_id} needs {longest.total_len} slots but "
                f"the pool holds only {usable} ({num_slots} slots in blocks of "
                f"{self.block_size}); clip the workload or add slots"
            )
        return _PagedMemory(num_slots, self.block_size)


def default_policies(
    allocator: AllocatorSource = BuddyAllocator, *, max_len: int = 2048, block_size: int = 16
) -> list[MemoryPolicy]:
    """The three policies of §3.3 in the lecture's order: Max, Oracle (with ``allocator``), Paged.

    Pass a student's allocator class to run the whole comparison on it; Max uses it too.
    """
    return [
        ReserveMaxPolicy(max_len, allocator),
        OraclePolicy(allocator),
        PagedPolicy(block_size),
    ]


# ---------------------------------------------------------------------------- the simulator


def _check_requests(requests: object) -> list[Request]:
    if isinstance(requests, (str, bytes)) or not isinstance(requests, Sequence) or not requests:
        raise ValueError(
            "requests must be a non-empty list of kvcourse.workloads.Request, e.g. "
            f"sharegpt_like(300, rate=3.0); got {requests!r}"
        )
    for r in requests:
        if not isinstance(r, Request):
            raise TypeError(f"requests must contain only workloads.Request records, got {r!r}")
        if (
            isinstance(r.prompt_len, bool)
            or not isinstance(r.prompt_len, (int, np.integer))
            or isinstance(r.output_len, bool)
            or not isinstance(r.output_len, (int, np.integer))
            or r.prompt_len < 1
            or r.output_len < 1
        ):
            raise ValueError(
                f"request {r.request_id}: prompt_len and output_len must be ints >= 1, got "
                f"{r.prompt_len!r} and {r.output_len!r}"
            )
        if not isinstance(r.arrival_s, (int, float)) or not math.isfinite(r.arrival_s):
            raise ValueError(
                f"request {r.request_id}: arrival_s must be finite, got {r.arrival_s!r}"
            )
        if r.arrival_s < 0:
            raise ValueError(f"request {r.request_id}: arrival_s must be >= 0, got {r.arrival_s}")
    return sorted(requests, key=lambda r: (r.arrival_s, r.request_id))


def _check_seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite, non-negative number of seconds, got {value!r}")
    return float(value)


def simulate(
    requests: Sequence[Request],
    policy: MemoryPolicy,
    *,
    num_slots: int = A100_SLOTS,
    cost: IterationCost | None = None,
    warmup_s: float | None = None,
    horizon_s: float | None = None,
) -> AccountingResult:
    """Serve ``requests`` with iteration-level scheduling under ``policy`` and account the KV
    memory of every iteration (the loop and the five kinds are defined in the module docstring).

    ``num_slots``: the KV arena, 12,596 slots (OPT-13B, A100-40GB) by default. ``cost``: the
    iteration time model (default :meth:`IterationCost.for_gpu`). The run stops at ``horizon_s``
    (default: the last arrival); iterations before ``warmup_s`` (default 20 % of the horizon) are
    not measured. Deterministic: the same requests give the same result.
    """
    ordered = _check_requests(requests)
    if not isinstance(policy, MemoryPolicy):
        raise TypeError(
            f"policy must be a MemoryPolicy such as ReserveMaxPolicy(), OraclePolicy() or "
            f"PagedPolicy(); got {policy!r}"
        )
    num_slots = as_index(num_slots, "num_slots")
    if num_slots <= 0:
        raise ValueError(f"num_slots must be positive, got {num_slots}; A100_SLOTS is 12,596")
    if cost is None:
        cost = IterationCost.for_gpu()
    elif not isinstance(cost, IterationCost):
        raise TypeError(f"cost must be an IterationCost, got {cost!r}")
    last_arrival = ordered[-1].arrival_s
    horizon = last_arrival if horizon_s is None else _check_seconds("horizon_s", horizon_s)
    warmup = 0.2 * horizon if warmup_s is None else _check_seconds("warmup_s", warmup_s)
    if horizon <= 0 or warmup >= horizon:
        raise ValueError(
            f"the measurement window [warmup_s, horizon_s) = [{warmup:g}, {horizon:g}) s is "
            f"empty; give the requests Poisson arrivals (rate=...), or a smaller warmup_s"
        )
    memory = policy._start(num_slots, ordered)
    running: list[_Live] = []
    try:
        result = _run(ordered, policy, memory, running, num_slots, cost, warmup, horizon)
    except BaseException:
        # Best effort: hand a caller's allocator instance back empty, but let the first error
        # (perhaps the allocator's own) be the one reported.
        for live in running:
            try:
                memory.release(live)
            except Exception:  # the original error matters more
                break
        raise
    for live in running:  # requests still running at the horizon give their memory back
        memory.release(live)
    return result


def _run(
    ordered: list[Request],
    policy: MemoryPolicy,
    memory: _Memory,
    running: list[_Live],
    num_slots: int,
    cost: IterationCost,
    warmup: float,
    horizon: float,
) -> AccountingResult:
    waiting: deque[_Live] = deque()
    rows: list[tuple[float, int, int, int, int, int, int, int]] = []
    t = 0.0
    next_arrival = 0
    n = len(ordered)
    stored = 0  # tokens held by running requests
    final = 0  # sum of prompt + output over running requests
    total_iterations = completed = preemptions = recomputed = produced = 0
    window_s = 0.0
    weights_s, per_ctx, per_new = cost.weights_s, cost.per_context_token_s, cost.per_new_token_s
    while True:
        while next_arrival < n and ordered[next_arrival].arrival_s <= t:
            waiting.append(_Live(ordered[next_arrival]))
            next_arrival += 1
        if not running and not waiting:
            if next_arrival >= n:
                break
            t = ordered[next_arrival].arrival_s
            continue
        if t >= horizon:
            break
        victims = memory.make_room(running)
        for victim in reversed(victims):  # the earliest-arrived victim ends up at the front
            stored -= victim.prompt + victim.done
            final -= victim.final
            recomputed += victim.prompt + victim.done
            victim.new = True
            waiting.appendleft(victim)
        preemptions += len(victims)
        refused_need = -1  # slots the refused head of the queue asked for, if one was refused
        if not victims:
            while waiting:
                head = waiting[0]
                if not memory.admit(head):
                    refused_need = memory.need(head)
                    break
                waiting.popleft()
                running.append(head)
                final += head.final
        if not running:
            if refused_need >= 0:
                head = waiting[0]
                raise RuntimeError(
                    f"{policy.label}: request {head.request.request_id} (prompt {head.prompt}, "
                    f"output {head.output}) can never be admitted: it asks for {refused_need} "
                    f"slots and the allocator refuses it even with the whole arena of "
                    f"{num_slots} slots free; clip the workload or use a larger arena"
                )
            continue  # everybody was preempted; admit again next loop, no time passes
        new_tokens = 0
        finished: list[_Live] = []
        for live in running:
            if live.new:
                live.new = False
                prefill = live.prompt + live.done
                new_tokens += prefill
                stored += prefill + 1
            else:
                new_tokens += 1
                stored += 1
            live.done += 1
            if live.done == live.output:
                finished.append(live)
        allocated = memory.allocated()
        if warmup <= t:
            reserved, internal = memory.split_allocated(stored, final, allocated)
            unallocated = num_slots - allocated
            external = unallocated if 0 <= refused_need <= unallocated else 0
            free = unallocated - external
            rows.append((t, stored, reserved, internal, external, free, len(running), len(waiting)))
        dt = max(weights_s + per_ctx * stored, per_new * new_tokens)
        if warmup <= t:
            window_s += dt
            completed += len(finished)
            produced += len(running)
        total_iterations += 1
        for live in finished:
            memory.release(live)
            stored -= live.prompt + live.done
            final -= live.final
        if finished:
            done_ids = {id(live) for live in finished}
            running[:] = [live for live in running if id(live) not in done_ids]
        t += dt
    if not rows:
        raise ValueError(
            f"no iteration started inside the measurement window [{warmup:g}, {horizon:g}) s; "
            f"use more requests or a smaller warmup_s"
        )
    table = np.array(rows, dtype=np.float64)
    columns = {name: table[:, i + 1].astype(np.int64) for i, name in enumerate(KINDS)}
    total = float(num_slots) * len(rows)
    shares = MemoryShares(**{kind: float(columns[kind].sum()) / total for kind in KINDS})
    span = ordered[-1].arrival_s - ordered[0].arrival_s
    timeline = MemoryTimeline(
        time_s=table[:, 0],
        running=table[:, 6].astype(np.int64),
        waiting=table[:, 7].astype(np.int64),
        **columns,
    )
    return AccountingResult(
        policy=policy.name,
        label=policy.label,
        num_slots=num_slots,
        num_requests=n,
        rate=(n - 1) / span if n > 1 and span > 0 else math.nan,
        iterations=len(rows),
        total_iterations=total_iterations,
        window_s=window_s,
        shares=shares,
        mean_running=float(timeline.running.mean()),
        mean_waiting=float(timeline.waiting.mean()),
        throughput_rps=completed / window_s,
        tokens_per_s=produced / window_s,
        completed=completed,
        preemptions=preemptions,
        recomputed_tokens=recomputed,
        timeline=timeline,
    )


def compare_policies(
    requests: Sequence[Request],
    policies: Sequence[MemoryPolicy] | None = None,
    **options: object,
) -> dict[str, AccountingResult]:
    """:func:`simulate` the same ``requests`` under each policy (default: :func:`default_policies`)
    and return the results keyed by policy name ("Max", "Oracle", "Paged"). ``options`` go to
    :func:`simulate` (``num_slots``, ``cost``, ``warmup_s``, ``horizon_s``)."""
    if policies is None:
        policies = default_policies()
    if isinstance(policies, MemoryPolicy) or not isinstance(policies, Sequence) or not policies:
        raise ValueError(f"policies must be a non-empty list of MemoryPolicy, got {policies!r}")
    names = [getattr(p, "name", None) for p in policies]
    if len(set(names)) != len(names):
        raise ValueError(f"policies must have distinct names to key the results, got {names}")
    return {p.name: simulate(requests, p, **options) for p in policies}  # type: ignore[arg-type]


_WORKLOADS: dict[str, LengthDistribution] = {"sharegpt": SHAREGPT, "alpaca": ALPACA}


def a100_accounting(
    workload: str | LengthDistribution = "sharegpt",
    *,
    rate: float = 3.0,
    num_requests: int = 1800,
    seed: int = 0,
    allocator: AllocatorSource = BuddyAllocator,
    policies: Sequence[MemoryPolicy] | None = None,
    num_slots: int = A100_SLOTS,
) -> dict[str, AccountingResult]:
    """The §3.3 demo: OPT-13B on an A100-40GB (12,596 slots) serving a seeded workload.

    ``workload`` is ``"sharegpt"`` (mean prompt 161, output 338), ``"alpaca"`` (19 / 58) or any
    :class:`~kvcourse.workloads.LengthDistribution`; ``num_requests`` arrive as a Poisson process
    at ``rate`` requests per second (1800 at 3 req/s: 600 s of arrivals). Runs
    :func:`default_policies` with ``allocator`` (or ``policies``) and returns the results keyed by
    policy name.
    """
    if isinstance(workload, str):
        if workload.lower() not in _WORKLOADS:
            raise ValueError(
                f"unknown workload {workload!r}; use 'sharegpt', 'alpaca' or a LengthDistribution"
            )
        dist = _WORKLOADS[workload.lower()]
    elif isinstance(workload, LengthDistribution):
        dist = workload
    else:
        raise TypeError(f"workload must be a name or a LengthDistribution, got {workload!r}")
    requests = generate_requests(num_requests, dist, rate=rate, seed=seed)
    if policies is None:
        policies = default_policies(allocator)
    return compare_policies(requests, policies, num_slots=num_slots)


def concurrency_ratios(results: dict[str, AccountingResult]) -> dict[str, float]:
    """How many more requests Paged runs at once than Oracle and than Max (§3.4):
    ``{"paged/oracle": …, "paged/max": …}`` from the mean running requests of each result.
    The results must come from the same workload and rate; the ratios depend on the rate."""
    missing = [name for name in ("Max", "Oracle", "Paged") if name not in results]
    if missing:
        raise ValueError(
            f"results lack {missing}; pass what compare_policies() or a100_accounting() returned"
        )
    paged = results["Paged"].mean_running
    return {
        "paged/oracle": paged / results["Oracle"].mean_running,
        "paged/max": paged / results["Max"].mean_running,
    }
