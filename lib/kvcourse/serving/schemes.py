"""Three ways to hand out KV memory (§3.3, §3.4): reserve the maximum, the exact length, or page.

The KV memory is ``num_slots`` token slots — :data:`A100_SLOTS`, 12,596, for OPT-13B on an
A100-40GB (:func:`kvcourse.sizing.kv_token_capacity`). The schemes differ only in how they hand
it out:

* :class:`ReserveMaxScheme` ("Max"): each request reserves a contiguous run of the maximum
  sequence length, 2048 slots, when it is admitted;
* :class:`OracleScheme` ("Oracle"): each request reserves a contiguous run of exactly its final
  length, prompt + output — which no real server knows in advance — through a contiguous allocator,
  by default the :class:`~kvcourse.blocks.buddy.BuddyAllocator`, which rounds up to a power of two;
* :class:`PagedScheme` ("Paged"): PagedAttention's blocks of 16 slots
  (:class:`~kvcourse.blocks.pool.BlockPool`, :class:`~kvcourse.blocks.table.BlockTable`), allocated
  on demand as tokens arrive, with nothing reserved. When the blocks run out the scheduler preempts
  a request, and the scheme's ``recovery`` (§6.2, :data:`RECOVERIES`) says how it comes back:
  recomputed, swapped through a CPU block pool, or whichever is cheaper.

A scheme is configuration only: :meth:`MemoryScheme.start_memory` builds a fresh, empty
:class:`~kvcourse.serving.memory.KVMemory` for each run, so one scheme object serves many runs.

A student's allocator plugs into the contiguous schemes: pass its class (called with the arena
size) or an empty instance as ``allocator``; the simulator checks what it returns and raises
:class:`~kvcourse.serving.memory.AllocatorContractError` naming the broken promise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kvcourse._checks import check_count, check_positive_int
from kvcourse.blocks.buddy import BuddyAllocator, ContiguousAllocator
from kvcourse.serving.memory import ContiguousMemory, KVMemory, PagedMemory
from kvcourse.serving.swap_cost import SwapCost
from kvcourse.sizing import kv_token_capacity
from kvcourse.specs import A100_40GB, OPT_13B
from kvcourse.workloads import Request

__all__ = [
    "A100_SLOTS",
    "AllocatorSource",
    "MemoryScheme",
    "OracleScheme",
    "PagedScheme",
    "RECOVERIES",
    "ReserveMaxScheme",
    "check_scheme",
    "default_schemes",
]

#: KV token slots of OPT-13B on an A100-40GB with 10 % kept for activations: 12,596.
A100_SLOTS: int = kv_token_capacity(OPT_13B, A100_40GB)

#: An allocator for a contiguous scheme: a factory called with the arena size (a class such as
#: :class:`~kvcourse.blocks.buddy.BuddyAllocator` is one), or an empty allocator instance.
AllocatorSource = Callable[[int], ContiguousAllocator] | ContiguousAllocator


class MemoryScheme:
    """How KV memory is handed to requests; subclasses are the three schemes of §3.

    ``name`` is the short name used as a key ("Max", "Oracle", "Paged") and ``label`` a longer
    description for tables. A scheme holds configuration only: every run starts from the empty
    memory :meth:`start_memory` builds, so one scheme object can serve many runs.
    """

    name: str = ""
    label: str = ""

    def start_memory(self, num_slots: int, requests: Sequence[Request]) -> KVMemory:
        """The empty KV memory of one run over ``num_slots`` slots, after checking that each of
        ``requests`` could be admitted into it alone (``ValueError`` otherwise)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label!r})"


def _resolve_allocator(source: AllocatorSource, num_slots: int, owner: str) -> ContiguousAllocator:
    """The empty allocator over ``num_slots`` slots that ``source`` stands for."""
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


class ReserveMaxScheme(MemoryScheme):
    """The "Max" scheme: every request reserves ``max_len`` contiguous slots (2048, OPT's context)
    when it is admitted, through ``allocator`` (a buddy allocator by default; 2048 is a power of
    two, so no rounding). On 12,596 slots at most 6 requests run at once."""

    def __init__(self, max_len: int = 2048, allocator: AllocatorSource = BuddyAllocator) -> None:
        max_len = check_positive_int("max_len", max_len, "e.g. 2048")
        _check_allocator_source(allocator, "ReserveMaxScheme")
        self.max_len = max_len
        self.allocator = allocator
        self.name = "Max"
        self.label = f"Max (reserve {max_len})"

    def start_memory(self, num_slots: int, requests: Sequence[Request]) -> KVMemory:
        """Contiguous memory in which every request reserves ``max_len`` slots."""
        if self.max_len > num_slots:
            raise ValueError(
                f"ReserveMaxScheme: max_len {self.max_len} exceeds the arena of {num_slots} "
                f"slots, so no request could ever be admitted; lower max_len or add slots"
            )
        longest = max(requests, key=lambda r: r.total_len)
        if longest.total_len > self.max_len:
            raise ValueError(
                f"ReserveMaxScheme: request {longest.request_id} needs {longest.total_len} slots "
                f"(prompt + output), more than max_len {self.max_len}; clip the workload to "
                f"max_len or raise max_len"
            )
        allocator = _resolve_allocator(self.allocator, num_slots, "ReserveMaxScheme")
        return ContiguousMemory(allocator, num_slots, self.max_len)


class OracleScheme(MemoryScheme):
    """The "Oracle" scheme: every request reserves exactly its final length (prompt + output) when
    it is admitted — as if the output length were known in advance — through ``allocator``. With the
    default :class:`~kvcourse.blocks.buddy.BuddyAllocator` the run is rounded up to a power of two.

    ``allocator`` is a factory called with the arena size (a class is one), or an empty allocator
    instance; a student's allocator from assignment a1 plugs in here.
    """

    def __init__(self, allocator: AllocatorSource = BuddyAllocator) -> None:
        _check_allocator_source(allocator, "OracleScheme")
        self.allocator = allocator
        self.name = "Oracle"
        name = getattr(allocator, "__name__", None) or type(allocator).__name__
        self.label = "Oracle + buddy" if allocator is BuddyAllocator else f"Oracle + {name}"

    def start_memory(self, num_slots: int, requests: Sequence[Request]) -> KVMemory:
        """Contiguous memory in which every request reserves its final length."""
        longest = max(requests, key=lambda r: r.total_len)
        if longest.total_len > num_slots:
            raise ValueError(
                f"OracleScheme: request {longest.request_id} needs {longest.total_len} slots, more "
                f"than the whole arena of {num_slots}; clip the workload or add slots"
            )
        allocator = _resolve_allocator(self.allocator, num_slots, "OracleScheme")
        return ContiguousMemory(allocator, num_slots, None)


#: How a preempted sequence comes back (§6.2): rebuilt by a prefill, copied back from CPU memory,
#: or whichever of the two the cost models say is cheaper for that sequence.
RECOVERIES: tuple[str, ...] = ("recompute", "swap", "cheaper")

_RECOVERY_LABELS = {"recompute": "", "swap": ", swap", "cheaper": ", swap or recompute"}


class PagedScheme(MemoryScheme):
    """The "Paged" scheme: PagedAttention's blocks of ``block_size`` slots (16, vLLM's default in
    the paper and in v1), taken from a :class:`~kvcourse.blocks.pool.BlockPool` only when a
    sequence's last block is full. A request is admitted when its prompt and first token fit now
    (the course's rule: vLLM, v0 and v1, asks for the prompt only; vLLM v1's memory is
    :class:`~kvcourse.serving.paged_v1.PagedV1Scheme`); when the pool runs dry the scheduler
    preempts a running request (:class:`~kvcourse.serving.preemption.VllmPaperScheduler`).

    ``recovery`` says how a preempted request comes back (§6.2, :data:`RECOVERIES`):

    * ``"recompute"`` (the default, as in vLLM: v0 recomputes a request of one sequence and swaps
      a group of several, v1 only recomputes): its KV is dropped; when it is admitted again its
      prompt and generated tokens are prefilled as a new prompt;
    * ``"swap"`` (the paper's and v0's other way; v1 has none): its blocks are copied to a CPU block
      pool of ``cpu_blocks`` blocks and copied back
      when it is admitted again (which needs GPU blocks again), each copy timed by ``swap_cost``
      and added to the iteration's time; when the CPU pool is full it is recomputed instead;
    * ``"cheaper"``: swap when out + in (``swap_cost``) takes less time than recomputing its tokens
      in the iteration model (:func:`~kvcourse.serving.swap_cost.iteration_recompute_seconds`),
      else recompute; recompute too when the CPU pool is full.

    ``cpu_blocks`` (swapping only): the CPU pool's capacity in blocks; default as many as the GPU
    pool, the bound the vLLM paper gives for the swap space (not a strict one: running requests
    grow into the blocks victims freed, so a contrived workload can need more; on the ShareGPT-like
    workloads the peak stays near a quarter of it). ``swap_cost``: the PCIe model, by
    default :meth:`SwapCost.for_model` of OPT-13B at this block size (25 GB/s, 10 µs per copy),
    matching the default iteration cost. ``name`` keys results (default ``"Paged"``): give two
    paged schemes different names to compare them in one call.
    """

    def __init__(
        self,
        block_size: int = 16,
        *,
        recovery: str = "recompute",
        cpu_blocks: int | None = None,
        swap_cost: SwapCost | None = None,
        name: str = "Paged",
    ) -> None:
        block_size = check_positive_int("block_size", block_size, "e.g. 16")
        if not isinstance(recovery, str) or recovery not in RECOVERIES:
            raise ValueError(
                f"PagedScheme: unknown recovery {recovery!r}; pass one of {', '.join(RECOVERIES)}"
            )
        if cpu_blocks is not None:
            cpu_blocks = check_count("cpu_blocks", cpu_blocks)
            if cpu_blocks == 0 and recovery != "recompute":
                raise ValueError(
                    f"PagedScheme: recovery {recovery!r} with cpu_blocks=0: a CPU pool of no "
                    f"blocks can hold no swapped KV; give it blocks (e.g. cpu_blocks=787) or use "
                    f"recovery='recompute'"
                )
        if swap_cost is None:
            swap_cost = SwapCost.for_model(OPT_13B, block_size)
        elif not isinstance(swap_cost, SwapCost):
            raise TypeError(
                f"PagedScheme: swap_cost must be a SwapCost such as SwapCost.for_model(OPT_13B, "
                f"{block_size}), got {swap_cost!r}"
            )
        if not isinstance(name, str) or not name:
            raise TypeError(f"PagedScheme: name must be a non-empty str, got {name!r}")
        self.block_size = block_size
        self.recovery = recovery
        self.cpu_blocks = cpu_blocks
        self.swap_cost = swap_cost
        self.name = name
        self.label = f"Paged (block {block_size}{_RECOVERY_LABELS[recovery]})"

    def start_memory(self, num_slots: int, requests: Sequence[Request]) -> KVMemory:
        """A pool of whole blocks over ``num_slots`` slots (the remainder stays unused), and for
        swapping a CPU pool of ``cpu_blocks`` blocks."""
        usable = num_slots // self.block_size * self.block_size
        longest = max(requests, key=lambda r: r.total_len)
        if longest.total_len > usable:
            raise ValueError(
                f"PagedScheme: request {longest.request_id} needs {longest.total_len} slots but "
                f"the pool holds only {usable} ({num_slots} slots in blocks of "
                f"{self.block_size}), so it can never fit, even alone; clip the workload or add "
                f"slots"
            )
        cpu = 0
        if self.recovery != "recompute":
            cpu = num_slots // self.block_size if self.cpu_blocks is None else self.cpu_blocks
        return PagedMemory(num_slots, self.block_size, cpu)


def default_schemes(
    allocator: AllocatorSource = BuddyAllocator, *, max_len: int = 2048, block_size: int = 16
) -> list[MemoryScheme]:
    """The three schemes of §3.3 in the lecture's order: Max, Oracle (with ``allocator``), Paged.

    Pass a student's allocator class to run the whole comparison on it; Max uses it too.
    """
    return [
        ReserveMaxScheme(max_len, allocator),
        OracleScheme(allocator),
        PagedScheme(block_size),
    ]


def check_scheme(scheme: object) -> MemoryScheme:
    """``scheme`` if it is a :class:`~kvcourse.serving.schemes.MemoryScheme`; TypeError if not."""
    if not isinstance(scheme, MemoryScheme):
        raise TypeError(
            f"scheme must be a MemoryScheme such as ReserveMaxScheme(), OracleScheme() or "
            f"PagedScheme(); got {scheme!r}"
        )
    return scheme
