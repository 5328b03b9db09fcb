"""Decoding with shared KV blocks (§5): parallel sampling, beam search, shared prefixes.

Every driver here runs on the three operations of :mod:`kvcourse.blocks.sharing` (fork, append with
copy-on-write, free) through any block manager with the
:class:`~kvcourse.blocks.sharing.ForkAppendFree` interface: pass ``manager_factory=YourClass`` to run the
book's numbers with your own piece. Memory *with* sharing is what the pool really holds
(``pool.num_used``); memory *without* sharing is what the same sequences would hold if each kept
its own copy of everything, ``Σ ceil(length / B)`` blocks.

Bookkeeping drivers (block ids and counts, no model):

* :func:`parallel_sampling`: one prompt of ``P`` tokens, ``n`` samples of ``T`` tokens each. The
  prompt sequence is sample 0 and the other ``n − 1`` samples fork from it; then every sample
  appends one token per step, in sample order. Copy-on-writes: ``n − 1`` when ``P mod B ≠ 0``, 0
  when the prompt fills its last block (Ex 4).
* :func:`scripted_beam_search`: beam search with *given* parent choices, so the copy counts are
  exact. At each step every new beam forks its parent, the old generation is freed, and the new
  beams append one token each. The full-copy scheme copies ``k × Σ_{s=0}^{S−1} (P + s)`` tokens
  (Ex 5: ``4 × [64 + Σ_{s=1}^{31} (64 + s)] = 10,176``); the paged scheme copies only when
  siblings write into their parent's shared, partly filled last block: at step ``s``,
  ``k − (number of distinct parents)`` copies if ``(P + s) mod B ≠ 0``, else none
  (:func:`expected_cow_count`).
* :func:`shared_prefix`: requests whose block tables point at one set of system-prompt blocks.

Drivers with K and V (the tiny transformer; outputs must not depend on sharing):

* :func:`beam_search`: real beam search (cumulative log-probabilities; each beam proposes its
  top-``k`` next tokens; the best ``k`` of all proposals survive), either on a
  :class:`~kvcourse.kv.sharing_cache.SharingPagedKVCache` with fork/copy-on-write (``scheme="paged"``) or
  on a contiguous cache where each child copies its parent's entire KV (``scheme="full_copy"``);
  :func:`compare_beam_search` runs both and checks the beams are identical.
* :func:`sample_in_parallel`: parallel sampling with a fixed, seeded sampler, with sharing or with
  a full copy of the prompt per sample.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from kvcourse.blocks.pool import BlockPool
from kvcourse.blocks.sharing import ForkAppendFree, SharedBlockManager, check_manager
from kvcourse.kv.cache import ManagedKVCache
from kvcourse.kv.sharing_cache import SharingPagedKVCache
from kvcourse.model import AttentionMode, TinyTransformer

__all__ = [
    "Beam",
    "BeamComparison",
    "BeamCopyReport",
    "BeamSearchRun",
    "ManagerFactory",
    "ParallelSamplingReport",
    "SamplingRun",
    "SharedPrefixReport",
    "beam_search",
    "compare_beam_search",
    "copy_sequence",
    "expected_cow_count",
    "full_copy_tokens",
    "parallel_sampling",
    "parallel_sampling_sweep",
    "random_parent_choices",
    "sample_in_parallel",
    "scripted_beam_search",
    "shared_prefix",
]

ManagerFactory = Callable[[BlockPool], ForkAppendFree]
"""Builds a block manager over a pool: :class:`~kvcourse.blocks.sharing.SharedBlockManager` or yours."""

Scheme = Literal["paged", "full_copy"]


def _blocks(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def _saved(shared: int, unshared: int) -> float:
    return 1.0 - shared / unshared if unshared else 0.0


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _non_negative(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return value


def _new_manager(factory: ManagerFactory, pool: BlockPool) -> ForkAppendFree:
    return check_manager(factory(pool), pool)


def _append_counting(
    manager: ForkAppendFree, seq_id: Hashable, length: int, num_tokens: int
) -> tuple[int, int]:
    """Append and return ``(copy-on-writes, token slots copied)`` that this append made; the
    sequence held ``length`` tokens before, so a copied block held ``length mod B`` of them."""
    before = manager.cow_count
    manager.append(seq_id, num_tokens)
    cows = manager.cow_count - before
    return cows, cows * (length % manager.pool.block_size)


def _free_all(manager: ForkAppendFree, seq_ids: Sequence[Hashable]) -> int:
    """Free ``seq_ids`` and return how many blocks are still used afterwards (leaked)."""
    for seq_id in seq_ids:
        manager.free(seq_id)
    return manager.pool.num_used


# ---------------------------------------------------------------------------- parallel sampling


@dataclass(frozen=True)
class ParallelSamplingReport:
    """Parallel sampling (§5.1) of ``num_samples`` samples of ``tokens_per_sample`` tokens each
    from one ``prompt_len``-token prompt, block size ``block_size``.

    ``cow_count`` copy-on-writes copied ``copied_tokens`` filled token slots. Peak memory in
    blocks: ``peak_blocks_shared`` (what the pool held) against ``peak_blocks_unshared`` (every
    sample holding its own copy of the prompt); ``memory_saved`` is the fraction saved.
    ``leaked_blocks`` is what the pool still held after every sample was freed (0 when right).
    """

    prompt_len: int
    num_samples: int
    tokens_per_sample: int
    block_size: int
    cow_count: int
    copied_tokens: int
    peak_blocks_shared: int
    peak_blocks_unshared: int
    leaked_blocks: int

    @property
    def memory_saved(self) -> float:
        """``1 − peak shared / peak unshared``, a fraction."""
        return _saved(self.peak_blocks_shared, self.peak_blocks_unshared)


def parallel_sampling(
    prompt_len: int = 100,
    num_samples: int = 4,
    tokens_per_sample: int = 40,
    block_size: int = 16,
    *,
    manager_factory: ManagerFactory = SharedBlockManager,
) -> ParallelSamplingReport:
    """Count the copies and blocks of parallel sampling with fork and copy-on-write.

    The prompt is appended to sequence 0, which becomes sample 0; samples ``1 .. n−1`` fork from
    it (every prompt block's reference count becomes ``n``). Then, for each of
    ``tokens_per_sample`` steps, samples ``0 .. n−1`` append one token each. The first step makes
    ``n − 1`` copy-on-writes when the prompt's last block is partly filled (the last sample finds
    the count back at 1) and none when ``prompt_len`` is a multiple of ``block_size`` (Ex 4).
    """
    prompt_len = _positive("prompt_len", prompt_len)
    n = _positive("num_samples", num_samples)
    steps = _non_negative("tokens_per_sample", tokens_per_sample)
    size = _positive("block_size", block_size)
    pool = BlockPool(n * _blocks(prompt_len + steps, size) + n, size)
    manager = _new_manager(manager_factory, pool)
    samples = list(range(n))
    manager.add_sequence(0)
    manager.append(0, prompt_len)
    for child in samples[1:]:
        manager.fork(0, child)
    peak_shared = pool.num_used
    peak_unshared = n * _blocks(prompt_len, size)
    cows = copied = 0
    for step in range(steps):
        length = prompt_len + step
        for sample in samples:
            made, slots = _append_counting(manager, sample, length, 1)
            cows, copied = cows + made, copied + slots
        peak_shared = max(peak_shared, pool.num_used)
        peak_unshared = max(peak_unshared, n * _blocks(length + 1, size))
    leaked = _free_all(manager, samples)
    return ParallelSamplingReport(
        prompt_len, n, steps, size, cows, copied, peak_shared, peak_unshared, leaked
    )


def parallel_sampling_sweep(
    num_samples: Sequence[int] = range(2, 9),
    *,
    prompt_len: int = 100,
    tokens_per_sample: int = 40,
    block_size: int = 16,
    manager_factory: ManagerFactory = SharedBlockManager,
) -> list[ParallelSamplingReport]:
    """:func:`parallel_sampling` for each ``n`` in ``num_samples`` (the lecture's n = 2..8)."""
    return [
        parallel_sampling(
            prompt_len, n, tokens_per_sample, block_size, manager_factory=manager_factory
        )
        for n in num_samples
    ]


# ---------------------------------------------------------------------------- scripted beam search


def full_copy_tokens(beam_width: int = 4, prompt_len: int = 64, steps: int = 32) -> int:
    """Tokens the full-copy scheme copies: at step ``s`` (0-based) each of the ``k`` new beams
    copies its parent's ``P + s`` tokens, so ``k × Σ_{s=0}^{S−1} (P + s)``.

    Ex 5: ``full_copy_tokens(4, 64, 32) = 4 × [64 + Σ_{s=1}^{31} (64 + s)] = 10,176``.
    """
    k = _positive("beam_width", beam_width)
    p = _positive("prompt_len", prompt_len)
    s = _non_negative("steps", steps)
    return k * (s * p + s * (s - 1) // 2)


def random_parent_choices(
    beam_width: int = 4, steps: int = 32, *, seed: int = 0
) -> tuple[tuple[int, ...], ...]:
    """Seeded parent choices for :func:`scripted_beam_search`: step 0 forks every beam from the
    prompt (parent 0); at each later step each of the ``k`` new beams picks a parent among the
    ``k`` old ones uniformly at random (Python's ``random.Random(seed)``), listed in ascending
    order as beam search lists children of better parents first."""
    k = _positive("beam_width", beam_width)
    s = _non_negative("steps", steps)
    rng = random.Random(seed)
    choices = [(0,) * k] if s else []
    for _ in range(1, s):
        choices.append(tuple(sorted(rng.randrange(k) for _ in range(k))))
    return tuple(choices)


def expected_cow_count(
    parents: Sequence[Sequence[int]], prompt_len: int = 64, block_size: int = 16
) -> int:
    """Copy-on-writes the paged scheme makes for ``parents`` (see :func:`scripted_beam_search`).

    At step ``s`` the parents hold ``P + s`` tokens. If that is a multiple of ``B`` the new token
    goes into a new block and nothing is copied; otherwise a parent chosen by ``c`` new beams has
    its partly filled last block copied ``c − 1`` times, which sums to ``k − distinct parents``.
    """
    p = _positive("prompt_len", prompt_len)
    size = _positive("block_size", block_size)
    return sum(len(step) - len(set(step)) for s, step in enumerate(parents) if (p + s) % size != 0)


@dataclass(frozen=True)
class BeamCopyReport:
    """Copies and memory of beam search under the two schemes (§5.2, Ex 5).

    ``full_copy_tokens``: tokens the full-copy scheme copies (every new beam copies its parent's
    whole KV). ``cow_count`` copy-on-writes of the paged scheme copied ``cow_tokens`` filled token
    slots; a block-granular copy kernel moves ``cow_block_slots = cow_count × block_size`` (the
    lecture's "35 CoW × 16 = 560"). Memory after each step, in blocks: ``blocks_shared`` (the
    pool) and ``blocks_unshared`` (every beam with its own copy). ``leaked_blocks``: what the
    pool still held after all beams were freed (0 when right).
    """

    beam_width: int
    prompt_len: int
    steps: int
    block_size: int
    parents: tuple[tuple[int, ...], ...]
    full_copy_tokens: int
    cow_count: int
    cow_tokens: int
    blocks_shared: tuple[int, ...]
    blocks_unshared: tuple[int, ...]
    leaked_blocks: int

    @property
    def cow_block_slots(self) -> int:
        """``cow_count × block_size``: slots moved when each copy moves a whole block."""
        return self.cow_count * self.block_size

    @property
    def copy_ratio(self) -> float:
        """How many times less the paged scheme copies, counting whole blocks (``inf`` if it
        copied nothing)."""
        slots = self.cow_block_slots
        return self.full_copy_tokens / slots if slots else float("inf")

    @property
    def peak_blocks_shared(self) -> int:
        """Most blocks the pool held at the end of a step."""
        return max(self.blocks_shared)

    @property
    def peak_blocks_unshared(self) -> int:
        """Most blocks the beams would hold with a copy each."""
        return max(self.blocks_unshared)

    @property
    def memory_saved(self) -> float:
        """``1 − peak shared / peak unshared``, a fraction."""
        return _saved(self.peak_blocks_shared, self.peak_blocks_unshared)

    @property
    def mean_memory_saved(self) -> float:
        """``1 − Σ shared / Σ unshared`` over the steps: the saving averaged over time."""
        return _saved(sum(self.blocks_shared), sum(self.blocks_unshared))


def _check_parents(
    parents: Sequence[Sequence[int]], beam_width: int, steps: int
) -> tuple[tuple[int, ...], ...]:
    if isinstance(parents, (str, bytes)) or len(parents) != steps:
        raise ValueError(
            f"parents must list one step of parent indices for each of the {steps} steps, got "
            f"{len(parents) if not isinstance(parents, (str, bytes)) else parents!r}"
        )
    checked = []
    for s, step in enumerate(parents):
        step = tuple(step)
        choices = 1 if s == 0 else beam_width  # step 0 has one parent: the prompt
        if len(step) != beam_width or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < choices for i in step
        ):
            raise ValueError(
                f"step {s}: need {beam_width} parent indices in 0..{choices - 1} (one per new "
                f"beam{'; step 0 forks every beam from the prompt, index 0' if s == 0 else ''}), "
                f"got {step!r}"
            )
        checked.append(step)
    return tuple(checked)


def scripted_beam_search(
    parents: Sequence[Sequence[int]] | None = None,
    *,
    beam_width: int = 4,
    prompt_len: int = 64,
    steps: int = 32,
    block_size: int = 16,
    seed: int = 0,
    manager_factory: ManagerFactory = SharedBlockManager,
) -> BeamCopyReport:
    """Beam search with given parent choices, counted under both schemes (Ex 5).

    ``parents[s][j]`` is the index (among the beams of step ``s − 1``) of new beam ``j``'s parent;
    step 0's parent is the prompt, so ``parents[0]`` is all zeros. By default the choices come
    from :func:`random_parent_choices` with ``seed``. At each step the new beams fork their
    parents, the old beams are freed, and each new beam appends one token, in order. The count
    of copy-on-writes equals :func:`expected_cow_count` exactly, and the full-copy scheme's
    tokens equal :func:`full_copy_tokens`.
    """
    k = _positive("beam_width", beam_width)
    p = _positive("prompt_len", prompt_len)
    n_steps = _non_negative("steps", steps)
    size = _positive("block_size", block_size)
    if parents is None:
        parents = random_parent_choices(k, n_steps, seed=seed)
    script = _check_parents(parents, k, n_steps)
    pool = BlockPool(k * _blocks(p + n_steps, size) + k + 1, size)
    manager = _new_manager(manager_factory, pool)
    manager.add_sequence(0)
    manager.append(0, p)
    live: list[int] = [0]
    next_id = 1
    full_copy = cows = cow_tokens = 0
    shared, unshared = [pool.num_used], [_blocks(p, size)]
    for s, step in enumerate(script):
        length = p + s
        children = list(range(next_id, next_id + k))
        next_id += k
        for child, parent in zip(children, step, strict=True):
            manager.fork(live[parent], child)
            full_copy += length
        for old in live:
            manager.free(old)
        for child in children:
            made, slots = _append_counting(manager, child, length, 1)
            cows, cow_tokens = cows + made, cow_tokens + slots
        live = children
        shared.append(pool.num_used)
        unshared.append(k * _blocks(length + 1, size))
    leaked = _free_all(manager, live)
    return BeamCopyReport(
        k,
        p,
        n_steps,
        size,
        script,
        full_copy,
        cows,
        cow_tokens,
        tuple(shared),
        tuple(unshared),
        leaked,
    )


# ---------------------------------------------------------------------------- shared prefix


@dataclass(frozen=True)
class SharedPrefixReport:
    """Requests that start with one shared prefix (a system prompt, few-shot examples; §5.3).

    The prefix's ``prefix_blocks`` blocks are stored once and every request's block table points
    at them; each request adds ``suffix_lens[i]`` tokens of its own. A partly filled last prefix
    block is copied once per request (``cow_count``) when the request writes its own tokens.
    Memory in blocks with sharing (``blocks_shared``, prefix included) and without
    (``blocks_unshared``: each request with its own copy of the prefix).
    """

    prefix_len: int
    suffix_lens: tuple[int, ...]
    block_size: int
    prefix_blocks: int
    cow_count: int
    blocks_shared: int
    blocks_unshared: int
    leaked_blocks: int

    @property
    def memory_saved(self) -> float:
        """``1 − shared / unshared``, a fraction."""
        return _saved(self.blocks_shared, self.blocks_unshared)


def shared_prefix(
    prefix_len: int = 341,
    suffix_lens: Sequence[int] | None = None,
    *,
    num_requests: int = 8,
    block_size: int = 16,
    seed: int = 0,
    manager_factory: ManagerFactory = SharedBlockManager,
) -> SharedPrefixReport:
    """Memory of ``len(suffix_lens)`` requests sharing one ``prefix_len``-token prefix.

    The prefix is a sequence of its own, kept alive (like a shared library); each request forks
    it and appends its suffix. By default ``num_requests`` suffixes of 10–30 tokens are drawn
    with ``random.Random(seed)``; the default prefix is §8's 5-shot prompt of 341 tokens.
    """
    p = _positive("prefix_len", prefix_len)
    size = _positive("block_size", block_size)
    if suffix_lens is None:
        rng = random.Random(seed)
        suffix_lens = [rng.randint(10, 30) for _ in range(_positive("num_requests", num_requests))]
    suffixes = tuple(_non_negative("each suffix length", q) for q in suffix_lens)
    if not suffixes:
        raise ValueError("suffix_lens is empty; give at least one request")
    unshared = sum(_blocks(p + q, size) for q in suffixes)
    pool = BlockPool(unshared + _blocks(p, size), size)
    manager = _new_manager(manager_factory, pool)
    manager.add_sequence("prefix")
    manager.append("prefix", p)
    prefix_blocks = pool.num_used
    cows = 0
    for request, q in enumerate(suffixes):
        manager.fork("prefix", request)
        cows += _append_counting(manager, request, p, q)[0]
    shared = pool.num_used
    leaked = _free_all(manager, ["prefix", *range(len(suffixes))])
    return SharedPrefixReport(p, suffixes, size, prefix_blocks, cows, shared, unshared, leaked)


# ---------------------------------------------------------------------------- with K and V


def copy_sequence(cache: ManagedKVCache, parent_id: Hashable, child_id: Hashable) -> int:
    """The full-copy fork: add ``child_id`` and copy all of ``parent_id``'s K and V into it, layer
    by layer. Returns the tokens copied (counted once, not per layer)."""
    num_layers = getattr(cache, "num_layers", None)
    if isinstance(num_layers, bool) or not isinstance(num_layers, int):
        raise TypeError(f"{type(cache).__name__} has no num_layers; copy_sequence needs it")
    cache.length(parent_id)  # an unknown parent raises before the child exists
    cache.add_sequence(child_id)
    for layer in range(num_layers):
        k, v = cache.read(parent_id, layer)
        cache.write(child_id, layer, k.clone(), v.clone())
    return cache.length(child_id)


@dataclass(frozen=True)
class Beam:
    """One finished beam: the generated ``tokens`` and their cumulative log-probability."""

    tokens: tuple[int, ...]
    score: float


@dataclass(frozen=True)
class BeamSearchRun:
    """One beam search over the tiny transformer under ``scheme``.

    ``beams``: the final beams, best first. ``parents``: per step, the parent index of each new
    beam (feed it to :func:`scripted_beam_search` to recount). ``copied_tokens``: tokens copied
    (full copy: every child's whole inherited KV; paged: the filled slots of copy-on-written
    blocks), ``cow_count`` copy-on-writes (0 under full copy). Memory at the end of each step
    (after the prefill, then after each step): ``blocks`` and ``tokens`` actually stored, and
    ``blocks_unshared`` / ``tokens_unshared`` if every beam kept its own copy (for the full-copy
    scheme the two are the same).
    """

    scheme: str
    block_size: int
    beams: tuple[Beam, ...]
    parents: tuple[tuple[int, ...], ...]
    copied_tokens: int
    cow_count: int
    blocks: tuple[int, ...]
    tokens: tuple[int, ...]
    blocks_unshared: tuple[int, ...]
    tokens_unshared: tuple[int, ...]
    leaked_blocks: int

    @property
    def peak_blocks(self) -> int:
        """Most blocks stored at the end of a step."""
        return max(self.blocks)

    @property
    def peak_tokens(self) -> int:
        """Most token slots holding KV at the end of a step."""
        return max(self.tokens)

    @property
    def memory_saved(self) -> float:
        """``1 − peak blocks / peak blocks without sharing``, a fraction."""
        return _saved(self.peak_blocks, max(self.blocks_unshared))


def _stored_tokens(manager: ForkAppendFree, lengths: dict[Hashable, int]) -> int:
    """Distinct token slots holding KV: each used block counted once, at its fullest."""
    size = manager.pool.block_size
    filled: dict[int, int] = {}
    for seq_id, length in lengths.items():
        for i, block in enumerate(manager.block_ids(seq_id)):
            filled[block] = max(filled.get(block, 0), min(size, length - i * size))
    return sum(filled.values())


def beam_search(
    model: TinyTransformer,
    prompt: Sequence[int],
    *,
    beam_width: int = 4,
    steps: int = 32,
    block_size: int = 16,
    scheme: Scheme = "paged",
    manager_factory: ManagerFactory = SharedBlockManager,
    attention: AttentionMode = "read",
) -> BeamSearchRun:
    """Beam search of ``steps`` tokens from ``prompt`` over ``model``, keeping ``beam_width``
    beams.

    Each step, every beam proposes its ``k`` most likely next tokens (score = cumulative
    log-probability); the best ``k`` proposals overall become the new beams (ties: earlier parent,
    then smaller token id). Each new beam is made from its parent: ``scheme="paged"`` forks it on
    a :class:`~kvcourse.kv.sharing_cache.SharingPagedKVCache` (shared blocks, copy-on-write on the first
    write into a shared, partly filled block); ``scheme="full_copy"`` copies the parent's entire
    KV into a new sequence of a contiguous cache, as systems before PagedAttention did. Then the
    old beams are freed (a parent nobody chose takes its private blocks with it) and the new beams
    run one forward pass together, writing their new token's KV.
    """
    if not isinstance(model, TinyTransformer):
        raise TypeError(f"model must be a TinyTransformer, got {type(model).__name__}")
    prompt = [int(t) for t in prompt]
    if not prompt:
        raise ValueError("the prompt is empty; give at least one token id")
    k = _positive("beam_width", beam_width)
    n_steps = _non_negative("steps", steps)
    size = _positive("block_size", block_size)
    if scheme not in ("paged", "full_copy"):
        raise ValueError(f"scheme must be 'paged' or 'full_copy', got {scheme!r}")
    if k > model.config.vocab_size:
        raise ValueError(
            f"beam_width {k} exceeds the vocabulary ({model.config.vocab_size} tokens)"
        )
    p = len(prompt)
    manager: ForkAppendFree | None = None
    cache: ManagedKVCache
    if scheme == "paged":
        pool = BlockPool(k * _blocks(p + n_steps, size) + k + 1, size)
        manager = _new_manager(manager_factory, pool)
        cache = SharingPagedKVCache.for_model(model, pool, manager=manager)
    else:
        cache = model.contiguous_cache()

    cache.add_sequence(0)
    logits = model.forward({0: prompt}, cache, attention=attention)[0][-1]
    live: list[tuple[int, tuple[int, ...], float, torch.Tensor]] = [(0, (), 0.0, logits)]
    lengths = {0: p}
    next_id = 1
    copied = 0
    parents_log: list[tuple[int, ...]] = []
    blocks, tokens = [_blocks(p, size)], [p]
    for _ in range(n_steps):
        proposals: list[tuple[float, int, int]] = []
        for index, (_, _, score, last) in enumerate(live):
            top = torch.topk(torch.log_softmax(last, dim=-1), k)
            for logp, token in zip(top.values.tolist(), top.indices.tolist(), strict=True):
                proposals.append((score + logp, index, token))
        proposals.sort(key=lambda c: (-c[0], c[1], c[2]))
        chosen = proposals[:k]
        children: list[int] = []
        for _, index, _ in chosen:
            parent = live[index][0]
            if isinstance(cache, SharingPagedKVCache):
                cache.fork_sequence(parent, next_id)
            else:
                copied += copy_sequence(cache, parent, next_id)
            lengths[next_id] = lengths[parent]
            children.append(next_id)
            next_id += 1
        for seq_id, *_ in live:
            cache.free_sequence(seq_id)
            del lengths[seq_id]
        batch = {child: [token] for child, (_, _, token) in zip(children, chosen, strict=True)}
        out = model.forward(batch, cache, attention=attention)
        for child in children:
            lengths[child] += 1
        live = [
            (child, live[index][1] + (token,), score, out[child][-1])
            for child, (score, index, token) in zip(children, chosen, strict=True)
        ]
        parents_log.append(tuple(index for _, index, _ in chosen))
        if manager is not None:
            blocks.append(manager.pool.num_used)
            tokens.append(_stored_tokens(manager, lengths))
        else:
            blocks.append(sum(_blocks(n, size) for n in lengths.values()))
            tokens.append(sum(lengths.values()))

    unshared_blocks = [_blocks(p, size)] + [k * _blocks(p + s + 1, size) for s in range(n_steps)]
    unshared_tokens = [p] + [k * (p + s + 1) for s in range(n_steps)]
    beams = tuple(Beam(toks, score) for _, toks, score, _ in live)
    if isinstance(cache, SharingPagedKVCache):
        copied, cows = cache.copied_slots, cache.cow_count
    else:
        cows = 0
    for seq_id, *_ in live:
        cache.free_sequence(seq_id)
    leaked = manager.pool.num_used if manager is not None else 0
    return BeamSearchRun(
        scheme,
        size,
        beams,
        tuple(parents_log),
        copied,
        cows,
        tuple(blocks),
        tuple(tokens),
        tuple(unshared_blocks),
        tuple(unshared_tokens),
        leaked,
    )


@dataclass(frozen=True)
class BeamComparison:
    """The same beam search under both schemes (§5.2's demo).

    ``identical``: the two produced the same beams (tokens and scores, exactly). Copies:
    ``full_copy.copied_tokens`` against ``paged.copied_tokens`` (filled slots) or
    ``paged.cow_count × block_size`` (whole blocks). Memory: ``paged.peak_blocks`` against
    ``full_copy.peak_blocks``.
    """

    paged: BeamSearchRun
    full_copy: BeamSearchRun

    @property
    def identical(self) -> bool:
        """True when both schemes kept the same beams, token for token, with equal scores."""
        return self.paged.beams == self.full_copy.beams

    @property
    def cow_block_slots(self) -> int:
        """Slots the paged scheme moves when each copy-on-write copies a whole block."""
        return self.paged.cow_count * self.paged.block_size

    @property
    def copy_ratio(self) -> float:
        """Full-copy tokens over paged block slots copied (``inf`` if paged copied nothing)."""
        slots = self.cow_block_slots
        return self.full_copy.copied_tokens / slots if slots else float("inf")

    @property
    def memory_saved(self) -> float:
        """``1 − paged peak blocks / full-copy peak blocks``, a fraction."""
        return _saved(self.paged.peak_blocks, self.full_copy.peak_blocks)

    @property
    def token_memory_saved(self) -> float:
        """The same in token slots holding KV: ``1 − paged peak / full-copy peak``."""
        return _saved(self.paged.peak_tokens, self.full_copy.peak_tokens)


def compare_beam_search(
    model: TinyTransformer | None = None,
    prompt: Sequence[int] | None = None,
    *,
    beam_width: int = 4,
    prompt_len: int = 64,
    steps: int = 32,
    block_size: int = 16,
    seed: int = 0,
    manager_factory: ManagerFactory = SharedBlockManager,
) -> BeamComparison:
    """Run :func:`beam_search` with fork/copy-on-write and with full copies; see
    :class:`BeamComparison`. Defaults: §5.2's setting (k = 4, a 64-token prompt drawn from
    ``seed``, 32 steps, block 16) on ``TinyTransformer(seed=seed)``."""
    model = model if model is not None else TinyTransformer(seed=seed)
    if prompt is None:
        gen = torch.Generator().manual_seed(seed)
        prompt_len = _positive("prompt_len", prompt_len)
        prompt = torch.randint(model.config.vocab_size, (prompt_len,), generator=gen).tolist()
    runs = {
        scheme: beam_search(
            model,
            prompt,
            beam_width=beam_width,
            steps=steps,
            block_size=block_size,
            scheme=scheme,
            manager_factory=manager_factory,
        )
        for scheme in ("paged", "full_copy")
    }
    return BeamComparison(runs["paged"], runs["full_copy"])


# ------------------------------------------------------------------ parallel sampling, K/V


@dataclass(frozen=True)
class SamplingRun:
    """Parallel sampling over the tiny transformer under ``scheme``: each sample's tokens, the
    copies made (paged: copy-on-writes and their filled slots; full copy: ``n − 1`` prompt
    copies), and the peak blocks stored beside the peak without sharing."""

    scheme: str
    samples: tuple[tuple[int, ...], ...]
    cow_count: int
    copied_tokens: int
    peak_blocks: int
    peak_blocks_unshared: int
    leaked_blocks: int

    @property
    def memory_saved(self) -> float:
        """``1 − peak blocks / peak blocks without sharing``, a fraction."""
        return _saved(self.peak_blocks, self.peak_blocks_unshared)


def sample_in_parallel(
    model: TinyTransformer,
    prompt: Sequence[int],
    num_samples: int,
    tokens_per_sample: int,
    *,
    scheme: Scheme = "paged",
    block_size: int = 16,
    temperature: float = 1.0,
    seed: int = 0,
    manager_factory: ManagerFactory = SharedBlockManager,
) -> SamplingRun:
    """Draw ``num_samples`` continuations of ``prompt``, ``tokens_per_sample`` tokens each.

    The prompt is prefilled once as sample 0. ``scheme="paged"``: samples ``1 .. n−1`` fork it on
    a :class:`~kvcourse.kv.sharing_cache.SharingPagedKVCache`; ``"full_copy"``: they get a full copy of its
    KV in a contiguous cache. Each step every sample draws a token from
    ``softmax(logits / temperature)`` with its own generator (seeded ``seed + i`` for sample
    ``i``), and all samples run one forward pass together. The sampler sees only the logits, so
    the samples are the same under both schemes exactly when the logits are.
    """
    if not isinstance(model, TinyTransformer):
        raise TypeError(f"model must be a TinyTransformer, got {type(model).__name__}")
    prompt = [int(t) for t in prompt]
    if not prompt:
        raise ValueError("the prompt is empty; give at least one token id")
    n = _positive("num_samples", num_samples)
    steps = _non_negative("tokens_per_sample", tokens_per_sample)
    size = _positive("block_size", block_size)
    if scheme not in ("paged", "full_copy"):
        raise ValueError(f"scheme must be 'paged' or 'full_copy', got {scheme!r}")
    if not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    p = len(prompt)
    manager: ForkAppendFree | None = None
    cache: ManagedKVCache
    if scheme == "paged":
        pool = BlockPool(n * _blocks(p + steps, size) + n, size)
        manager = _new_manager(manager_factory, pool)
        cache = SharingPagedKVCache.for_model(model, pool, manager=manager)
    else:
        cache = model.contiguous_cache()
    cache.add_sequence(0)
    last = model.forward({0: prompt}, cache)[0][-1]
    copied = 0
    for sample in range(1, n):
        if isinstance(cache, SharingPagedKVCache):
            cache.fork_sequence(0, sample)
        else:
            copied += copy_sequence(cache, 0, sample)
    logits = {sample: last for sample in range(n)}
    generators = [torch.Generator().manual_seed(seed + i) for i in range(n)]
    drawn: list[list[int]] = [[] for _ in range(n)]
    peak_unshared = n * _blocks(p, size)
    peak = peak_unshared if manager is None else manager.pool.num_used
    for step in range(steps):
        batch = {}
        for sample in range(n):
            probs = torch.softmax(logits[sample] / temperature, dim=-1)
            token = int(torch.multinomial(probs, 1, generator=generators[sample]))
            drawn[sample].append(token)
            batch[sample] = [token]
        out = model.forward(batch, cache)
        logits = {sample: out[sample][-1] for sample in range(n)}
        unshared = n * _blocks(p + step + 1, size)
        peak_unshared = max(peak_unshared, unshared)
        peak = max(peak, unshared if manager is None else manager.pool.num_used)
    cows = 0
    if isinstance(cache, SharingPagedKVCache):
        copied, cows = cache.copied_slots, cache.cow_count
    for sample in range(n):
        cache.free_sequence(sample)
    leaked = manager.pool.num_used if manager is not None else 0
    return SamplingRun(
        scheme, tuple(tuple(d) for d in drawn), cows, copied, peak, peak_unshared, leaked
    )
