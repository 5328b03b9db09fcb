"""Beam search over the tiny transformer on real K and V (§5.2): with fork and copy-on-write on a
sharing paged cache, or with a full copy of the parent's KV per new beam; the beams must not
depend on which."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

from kvcourse._checks import ceil_div, check_count, check_positive_int
from kvcourse.blocks.sharing import ForkAppendFree, SharedBlockManager
from kvcourse.generation._setup import ManagerFactory, check_model_and_prompt, fraction_saved
from kvcourse.generation.kv_schemes import Scheme, SchemeCache, check_scheme
from kvcourse.model import AttentionMode, TinyTransformer

__all__ = ["Beam", "BeamComparison", "BeamSearchRun", "beam_search", "compare_beam_search"]


@dataclass(frozen=True)
class Beam:
    """One finished beam: the generated ``tokens`` and their cumulative log-probability."""

    tokens: tuple[int, ...]
    score: float


@dataclass(frozen=True)
class BeamSearchRun:
    """One beam search over the tiny transformer under ``scheme``.

    ``beams``: the final beams, best first. ``parents``: per step, the parent index of each new
    beam (feed it to :func:`~kvcourse.generation.beam_counts.scripted_beam_search` to recount).
    ``copied_tokens``: tokens copied (full copy: every child's whole inherited KV; paged: the
    filled slots of copy-on-written blocks), ``cow_count`` copy-on-writes (0 under full copy).
    Memory at the end of each step (after the prefill, then after each step): ``blocks`` and
    ``tokens`` actually stored, and ``blocks_unshared`` / ``tokens_unshared`` if every beam kept
    its own copy (for the full-copy scheme the two are the same).
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
        return fraction_saved(self.peak_blocks, max(self.blocks_unshared))


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
    a :class:`~kvcourse.kv.sharing_cache.SharingPagedKVCache` (shared blocks, copy-on-write on the
    first write into a shared, partly filled block); ``scheme="full_copy"`` copies the parent's
    entire KV into a new sequence of a contiguous cache, as systems before PagedAttention did.
    Then the old beams are freed (a parent nobody chose takes its private blocks with it) and the
    new beams run one forward pass together, writing their new token's KV.
    """
    prompt = check_model_and_prompt(model, prompt)
    k = check_positive_int("beam_width", beam_width)
    n_steps = check_count("steps", steps)
    size = check_positive_int("block_size", block_size)
    check_scheme(scheme)
    if k > model.config.vocab_size:
        raise ValueError(
            f"beam_width {k} exceeds the vocabulary ({model.config.vocab_size} tokens)"
        )
    p = len(prompt)
    kv = SchemeCache(
        model,
        scheme,
        num_blocks=k * ceil_div(p + n_steps, size) + k + 1,
        block_size=size,
        manager_factory=manager_factory,
    )
    cache = kv.cache
    cache.add_sequence(0)
    logits = model.forward({0: prompt}, cache, attention=attention)[0][-1]
    live: list[tuple[int, tuple[int, ...], float, torch.Tensor]] = [(0, (), 0.0, logits)]
    lengths = {0: p}
    next_id = 1
    parents_log: list[tuple[int, ...]] = []
    blocks, tokens = [ceil_div(p, size)], [p]
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
            kv.fork(parent, next_id)
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
        if kv.manager is not None:
            blocks.append(kv.manager.pool.num_used)
            tokens.append(_stored_tokens(kv.manager, lengths))
        else:
            blocks.append(sum(ceil_div(n, size) for n in lengths.values()))
            tokens.append(sum(lengths.values()))

    unshared_blocks = [ceil_div(p, size)]
    unshared_blocks += [k * ceil_div(p + s + 1, size) for s in range(n_steps)]
    unshared_tokens = [p] + [k * (p + s + 1) for s in range(n_steps)]
    beams = tuple(Beam(toks, score) for _, toks, score, _ in live)
    copied, cows = kv.copied_tokens, kv.cow_count
    leaked = kv.free([seq_id for seq_id, *_ in live])
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
        return fraction_saved(self.paged.peak_blocks, self.full_copy.peak_blocks)

    @property
    def token_memory_saved(self) -> float:
        """The same in token slots holding KV: ``1 − paged peak / full-copy peak``."""
        return fraction_saved(self.paged.peak_tokens, self.full_copy.peak_tokens)


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
        prompt_len = check_positive_int("prompt_len", prompt_len)
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
