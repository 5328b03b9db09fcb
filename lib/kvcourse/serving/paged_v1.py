"""vLLM v1's paged KV memory in the serving loop (§6), beside the 2023 paper's: admission for the
prompt only, a preempted request's cached blocks kept, no swapping.

Read at vLLM release v0.33.0, in ``vllm/v1/core/sched/scheduler.py`` and
``vllm/v1/core/kv_cache_manager.py``. The course's :class:`~kvcourse.serving.memory.PagedMemory` and
:class:`~kvcourse.serving.preemption.VllmPaperScheduler` follow the paper. vLLM v1 keeps the
paper's order — first come first served, admission stops at the first request that does not fit,
nobody is admitted in a step that preempted, the victim is the latest-arrived running request and
goes back to the front of the queue, all or nothing — and changes what the memory does:

* **admission asks for the prompt only.** A waiting request is admitted when the blocks for the
  tokens it will compute now are free: its prompt, or for a preempted one its prompt and the
  tokens it had generated (``Scheduler.schedule`` calls ``KVCacheManager.allocate_slots`` with
  those tokens). The course asks for one token more;
* **a generated token is stored one iteration later.** An iteration computes the KV of its input
  tokens and samples the next token; that token is the input of the next iteration, which writes
  its KV then. A request thus holds prompt + generated − 1 tokens, and the last token it generates
  is never stored (:attr:`PagedV1Memory.unwritten_tokens` is 1);
* **preemption keeps the victim's cached blocks.** ``Scheduler._preempt_request`` frees the
  victim's blocks (``KVCacheManager.free``, last block first), but a full block keeps its hash and
  its KV until a new allocation evicts it. When the victim is admitted again its own leading
  blocks that are still cached are a prefix-cache hit (``get_computed_blocks``, capped one token
  short of its tokens), and only the rest is prefilled again: the tail, or more if its blocks were
  evicted meanwhile (:attr:`PagedV1Memory.reprefilled_tokens`);
* **free order.** A freed block that holds no hash (a sequence's partly filled last block) goes to
  the head of the free queue and is reused first (``BlockPool.free_blocks``); cached blocks wait at
  the tail in LRU order (the pool's ``uncached_first``);
* **no swapping, no watermark.** v1 has no path that swaps a victim to CPU memory (``recompute``
  is the only recovery), and its admission watermark (``SchedulerConfig.watermark``) is 0 by
  default; the course's memories keep none either.

The loop leaves out what v1 adds on top: a budget of tokens per step (``max_num_batched_tokens``)
and chunked prefill (``enable_chunked_prefill``, on by default), which split a long prompt over
several steps; here every prefill runs whole in one iteration.

A request's own blocks are named ``(order, request id, block index)``: the serving loop's
requests have lengths, not tokens, so only a declared prefix is shared. With ``shared_prefix=P``
every request's first ``P`` prompt tokens are the same (one system prompt): the first ``P //
block_size`` blocks are named ``("prefix", index)``, named when the request is admitted (v1 names
a full block when it computes it), so a later request hits them while they are running or still
cached (``get_computed_blocks``), and several requests then hold one block. Other blocks are named
when the request releases them (nobody else can hit them, so that is the same).
``prefix_caching=False`` is vLLM's ``--no-enable-prefix-caching``: no block is ever named, so
nothing hits, not even a preempted request's own blocks. :class:`PagedV1Scheme` is the memory
scheme and :class:`VllmV1Scheduler` the scheduler to run it with.

The prefix-cache counters follow ``KVCacheManager.record_prefix_cache_stats``
(``vllm/v1/metrics/stats.py``, ``PrefixCacheStats``): a new request queries its tokens and hits
the cached ones (``queries``, ``hits``); a preempted one coming back is counted apart
(``preempted_queries``, ``preempted_hits``), and nothing is counted with prefix caching off. Here
a request is counted once, when it is admitted.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvcourse._checks import ceil_div, check_count, check_positive_int
from kvcourse.blocks.pool import BlockPool
from kvcourse.blocks.table import BlockTable
from kvcourse.serving.memory import KVMemory, LiveRequest, PagedMemory
from kvcourse.serving.preemption import VllmPaperScheduler
from kvcourse.serving.schemes import MemoryScheme
from kvcourse.workloads import Request

__all__ = ["PagedV1Memory", "PagedV1Scheme", "VllmV1Scheduler"]


class PagedV1Memory(PagedMemory):
    """vLLM v1's paged memory (module docstring): a pool of ``num_slots // block_size`` blocks in
    which freed full blocks stay cached, blocks without a hash are reused first, admission asks
    for the blocks of the tokens to compute now, and a generated token is stored an iteration
    later. ``prefix_caching`` and ``shared_prefix``: see the module docstring.

    Counters: ``hit_tokens``, the tokens of re-admitted requests whose KV was still cached;
    ``reprefilled_tokens``, those a re-admitted request computed again (its prompt and generated
    tokens, less the hit); ``queries`` and ``hits`` (new requests), ``preempted_queries`` and
    ``preempted_hits`` (re-admitted ones), in tokens, as vLLM's prefix-cache statistics.
    """

    unwritten_tokens = 1

    def __init__(
        self,
        num_slots: int,
        block_size: int,
        *,
        prefix_caching: bool = True,
        shared_prefix: int = 0,
    ) -> None:
        self._pool = BlockPool(
            num_slots // block_size, block_size, uncached_first=True, keep_duplicates=True
        )
        self._block_size = block_size
        self._caching = bool(prefix_caching)
        self._shared_blocks = shared_prefix // block_size if prefix_caching else 0
        self._extra_refs = 0  # references beyond the first on shared blocks in use
        self.cpu_pool = None
        self.hit_tokens = 0
        self.reprefilled_tokens = 0
        self.queries = self.hits = self.preempted_queries = self.preempted_hits = 0

    def _name(self, live: LiveRequest, index: int) -> tuple[object, ...]:
        """Block ``index`` of ``live``: the shared prefix's own name, or the request's."""
        if index < self._shared_blocks:
            return ("prefix", index)
        return (live.order, live.request.request_id, index)

    def _hit_blocks(self, live: LiveRequest) -> list[int]:
        """The leading run of ``live``'s blocks still cached, at most ``(tokens - 1) //
        block_size`` of its ``prompt + done`` tokens (the last is computed: v1's
        ``max_cache_hit_length = num_tokens - 1``)."""
        if not self._caching or (live.preemptions == 0 and self._shared_blocks == 0):
            return []
        pool = self._pool
        found = []
        for index in range((live.prompt + live.done - 1) // self._block_size):
            block_id = pool.cached_block(self._name(live, index))
            if block_id is None:
                break
            found.append(block_id)
        return found

    def need(self, live: LiveRequest) -> int:
        """The blocks of the ``prompt + done`` tokens it computes now, in slots (a cached block it
        revives counts: it leaves the free queue too)."""
        return ceil_div(live.prompt + live.done, self._block_size) * self._block_size

    def shared_slots(self) -> int:
        """Slots of shared blocks counted once per extra request holding them."""
        return self._extra_refs * self._block_size

    def admit(self, live: LiveRequest) -> bool:
        """Admit ``live`` if the blocks for its ``prompt + done`` tokens fit now, its blocks still
        cached taken as a hit (``cached_tokens``); False, changing nothing, if not."""
        pool = self._pool
        tokens = live.prompt + live.done
        hits = self._hit_blocks(live)
        fresh = ceil_div(tokens, self._block_size) - len(hits)
        revived = sum(pool.is_free(block_id) for block_id in hits)  # they leave the free queue
        if fresh + revived > pool.num_free:
            return False
        self._extra_refs += len(hits) - revived  # hits on blocks other requests hold
        for index in range(len(hits)):
            pool.touch(self._name(live, index))
        table = BlockTable.adopt(pool, hits)
        table.append(tokens - table.num_tokens)
        live.table = table
        live.cached_tokens = len(hits) * self._block_size
        block_ids = table.block_ids
        for index in range(len(hits), min(self._shared_blocks, tokens // self._block_size)):
            pool.set_block_hash(block_ids[index], ("prefix", index))  # computed now: named
        if live.preemptions:
            self.hit_tokens += live.cached_tokens
            self.reprefilled_tokens += tokens - live.cached_tokens
            if self._caching:
                self.preempted_queries += tokens
                self.preempted_hits += live.cached_tokens
        elif self._caching:
            self.queries += tokens
            self.hits += live.cached_tokens
        return True

    def release(self, live: LiveRequest) -> None:
        """Free all of ``live``'s blocks, last block first, its full blocks named (with prefix
        caching) so that they stay cached and its partly filled last block to the head of the
        free queue."""
        if live.table is None:
            raise ValueError(
                f"request {live.request.request_id} holds no blocks (it was never admitted, or "
                f"its blocks were released already): release each request's blocks once"
            )
        pool = self._pool
        block_ids = live.table.block_ids
        if self._caching:
            stored = live.prompt + live.done - self.unwritten_tokens
            for index in range(stored // self._block_size):
                # Every copy takes the name, a twin's too (keep_duplicates: vLLM v0.33.0's
                # BlockHashToBlockMap holds every block of a hash).
                pool.set_block_hash(block_ids[index], self._name(live, index))
        self._extra_refs -= sum(pool.ref_count(block_id) > 1 for block_id in block_ids)
        pool.release_many(reversed(block_ids))
        live.table = None


class PagedV1Scheme(MemoryScheme):
    """vLLM v1's paged memory as a memory scheme: blocks of ``block_size`` slots (16, v1's default
    as the paper's), admission for the prompt only, preempted requests' full blocks kept cached
    (:class:`PagedV1Memory`). Recovery is always recomputation (v1 never swaps), of what the cache
    lost only. ``name`` keys results (default ``"Paged v1"``)."""

    recovery = "recompute"

    def __init__(
        self,
        block_size: int = 16,
        *,
        name: str = "Paged v1",
        prefix_caching: bool = True,
        shared_prefix: int = 0,
    ) -> None:
        block_size = check_positive_int("block_size", block_size, "e.g. 16")
        if not isinstance(name, str) or not name:
            raise TypeError(f"PagedV1Scheme: name must be a non-empty str, got {name!r}")
        if not isinstance(prefix_caching, bool):
            raise TypeError(
                f"PagedV1Scheme: prefix_caching must be True or False, got {prefix_caching!r}"
            )
        shared_prefix = check_count("shared_prefix", shared_prefix)
        self.block_size = block_size
        self.name = name
        self.prefix_caching = prefix_caching
        self.shared_prefix = shared_prefix
        self.label = f"Paged v1 (block {block_size})"

    def start_memory(self, num_slots: int, requests: Sequence[Request]) -> KVMemory:
        """A v1 pool of whole blocks over ``num_slots`` slots (the remainder stays unused), after
        checking that every request fits it alone: prompt + output − 1 slots, the last generated
        token never being stored."""
        usable = num_slots // self.block_size * self.block_size
        longest = max(requests, key=lambda r: r.total_len)
        if longest.total_len - 1 > usable:
            raise ValueError(
                f"PagedV1Scheme: request {longest.request_id} needs {longest.total_len - 1} slots "
                f"but the pool holds only {usable} ({num_slots} slots in blocks of "
                f"{self.block_size}), so it can never fit, even alone; clip the workload or add "
                f"slots"
            )
        short = min(requests, key=lambda r: r.prompt_len)
        if short.prompt_len < self.shared_prefix:
            raise ValueError(
                f"PagedV1Scheme: shared_prefix is {self.shared_prefix} tokens but request "
                f"{short.request_id}'s prompt has only {short.prompt_len}; every prompt must "
                f"begin with the shared prefix"
            )
        return PagedV1Memory(
            num_slots,
            self.block_size,
            prefix_caching=self.prefix_caching,
            shared_prefix=self.shared_prefix,
        )


class VllmV1Scheduler(VllmPaperScheduler):
    """vLLM v1's scheduler (release v0.33.0, ``vllm/v1/core/sched/scheduler.py``) on a
    :class:`PagedV1Scheme`: the paper's order and victim, which v1 keeps — ``Scheduler.schedule``
    preempts ``self.running.pop()``, the latest-arrived, and ``_preempt_request`` frees all its
    blocks and puts it at the front of the waiting queue — with v1's memory, and recomputation as
    the only recovery. ``reprefilled_tokens`` counts the tokens re-admitted victims prefilled
    again, against ``recomputed_tokens``, what recomputing them in full would take (the paper's).
    """

    def __init__(self, requests: Sequence[Request], scheme: MemoryScheme, **kwargs: object) -> None:
        if not isinstance(scheme, PagedV1Scheme):
            raise TypeError(
                f"VllmV1Scheduler runs vLLM v1's memory: pass a PagedV1Scheme(), got {scheme!r}"
            )
        super().__init__(requests, scheme, **kwargs)  # type: ignore[arg-type]

    @property
    def reprefilled_tokens(self) -> int:
        """Tokens the re-admitted victims prefilled again (what their cached blocks did not
        hold)."""
        return self.memory.reprefilled_tokens  # type: ignore[attr-defined]

    def recover(self, victim: LiveRequest) -> None:
        """Recompute: v1 has no swap path; the victim's cached blocks make it cheaper."""
        self.recompute(victim)
