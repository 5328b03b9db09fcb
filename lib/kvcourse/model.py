"""A tiny decoder-only transformer that runs on any KV cache (§4.2).

Random weights from a seed, float64 on the CPU: small enough to read in one sitting, real enough
to show that paging changes *where* the KV lives and not *what* the model computes. Architecture
(Llama-like): token embedding, ``num_layers`` blocks of RMSNorm → grouped-query attention with
rotary position embeddings (RoPE) → residual, RMSNorm → SwiGLU MLP → residual, then a final
RMSNorm and an output projection to the vocabulary.

:meth:`TinyTransformer.forward` takes a *ragged batch*: for each sequence, the token ids that are
new this step (a whole prompt for prefill, one token for decode, mixed freely in one batch). The
linear layers run on all new tokens of the batch at once; attention runs per sequence, against that
sequence's cache (selective batching, as in Orca and vLLM, the paper's and v1). The cache is
anything with the :class:`~kvcourse.kv.protocols.KVCache` methods ``length``, ``write`` and
``read``. Attention can also be a function passed in (a :data:`DecodeAttention`, the interface of
assignment a2): the model then calls it once per new token, over the sequence's blocks.
``attention="kernel"`` runs each layer's attention for the whole batch through the Triton paged
decode kernel, on the paged cache's own block arrays and block tables
(:mod:`kvcourse.attention.cache_decode`). The kernel takes float32, float16 or bfloat16, so that
mode needs a cache built in one of them (``paged_cache(pool, dtype=torch.float32)``); the rest of
the model stays float64.

:func:`paged_vs_contiguous` runs the lecture's experiment in one call: a batch of uneven prompts,
prefill plus greedy decode steps, on a contiguous cache and on paged caches of several block
sizes, and reports the largest logit difference.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

import torch

from kvcourse._checks import ceil_div, check_count, is_int
from kvcourse.attention.backend import kernel_device
from kvcourse.attention.blockwise import blockwise_attention, contiguous_attention
from kvcourse.attention.cache_decode import cache_decode_attention, check_cache_for_kernel
from kvcourse.blocks.pool import BlockPool
from kvcourse.kv.cache import ContiguousKVCache, PagedKVCache
from kvcourse.kv.protocols import KVCache, ManagedKVCache

Batch = Mapping[Hashable, Sequence[int]] | Iterable[tuple[Hashable, Sequence[int]]]
#: ``"read"``: gather through ``cache.read``, then plain attention; ``"blockwise"``: walk the
#: block table with the online softmax; ``"kernel"``: the Triton kernel on the cache's blocks.
AttentionMode = Literal["read", "blockwise", "kernel"]
#: Attention of one query over one sequence's paged KV, as assignment a2 writes it:
#: ``attend(q, k_blocks, v_blocks, block_ids, seq_len)`` with ``q`` ``[Hq, D]``, the block arrays
#: ``[num_blocks, block_size, Hkv, D]`` and the sequence's physical block ids in logical order.
#: It returns ``[Hq, D]``: the query's attention over the first ``seq_len`` tokens, scale 1/√D.
DecodeAttention = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, Sequence[int], int], torch.Tensor
]


@dataclass(frozen=True)
class TinyConfig:
    """Shape of the tiny model. ``num_heads`` query heads share ``num_kv_heads`` KV heads (GQA)."""

    vocab_size: int = 128
    d_model: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    ffn_size: int = 128
    rope_base: float = 10000.0
    norm_eps: float = 1e-6

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "d_model",
            "num_layers",
            "num_heads",
            "num_kv_heads",
            "ffn_size",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"TinyConfig: {name} must be a positive int, got {value!r}")
        if self.d_model % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"TinyConfig: d_model ({self.d_model}) must split evenly into num_heads "
                f"({self.num_heads}), and num_heads into num_kv_heads ({self.num_kv_heads})"
            )
        if (self.d_model // self.num_heads) % 2:
            raise ValueError("TinyConfig: the head size d_model / num_heads must be even for RoPE")

    @property
    def head_dim(self) -> int:
        """Size of one attention head, ``d_model / num_heads``."""
        return self.d_model // self.num_heads


class TinyTransformer:
    """The tiny model with weights drawn from ``seed``; :meth:`forward` runs a ragged batch."""

    def __init__(self, config: TinyConfig | None = None, *, seed: int = 0) -> None:
        self.config = c = config or TinyConfig()
        gen = torch.Generator().manual_seed(seed)

        def weight(fan_in: int, *shape: int) -> torch.Tensor:
            return torch.randn(*shape, generator=gen, dtype=torch.float64) / math.sqrt(fan_in)

        q_width, kv_width = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
        self.embed = weight(1, c.vocab_size, c.d_model)
        self.layers = [
            {
                "wq": weight(c.d_model, c.d_model, q_width),
                "wk": weight(c.d_model, c.d_model, kv_width),
                "wv": weight(c.d_model, c.d_model, kv_width),
                "wo": weight(q_width, q_width, c.d_model),
                "w_gate": weight(c.d_model, c.d_model, c.ffn_size),
                "w_up": weight(c.d_model, c.d_model, c.ffn_size),
                "w_down": weight(c.ffn_size, c.ffn_size, c.d_model),
            }
            for _ in range(c.num_layers)
        ]
        self.lm_head = weight(c.d_model, c.d_model, c.vocab_size)
        half = c.head_dim // 2
        self.inv_freq = c.rope_base ** (-torch.arange(half, dtype=torch.float64) / half)

    # ------------------------------------------------------------------ caches for this model

    def contiguous_cache(self) -> ContiguousKVCache:
        """An empty contiguous KV cache shaped for this model."""
        c = self.config
        return ContiguousKVCache(c.num_layers, c.num_kv_heads, c.head_dim)

    def paged_cache(
        self,
        pool: BlockPool,
        *,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
    ) -> PagedKVCache:
        """An empty paged KV cache shaped for this model, taking its blocks from ``pool``. For
        ``attention="kernel"`` pass ``dtype=torch.float32`` (and ``device=kernel_device()``)."""
        c = self.config
        return PagedKVCache(
            pool, c.num_layers, c.num_kv_heads, c.head_dim, dtype=dtype, device=device
        )

    # ------------------------------------------------------------------ the model

    def forward(
        self, batch: Batch, cache: KVCache, *, attention: AttentionMode | DecodeAttention = "read"
    ) -> dict[Hashable, torch.Tensor]:
        """Run the new tokens of each sequence and return their logits, ``[new_tokens, vocab]``
        per sequence id, in batch order. Writes the new tokens' K and V into ``cache``.

        ``batch`` maps sequence id → new token ids (a dict or a list of pairs). Each new token
        attends to the sequence's cached tokens and to the new tokens up to itself (causal).
        ``attention="read"`` reads each layer's K and V through ``cache.read`` and runs plain
        attention; ``"blockwise"`` walks the block table with the online softmax instead and needs
        a cache with ``paged_view`` (a :class:`~kvcourse.kv.cache.PagedKVCache`). ``"kernel"``
        runs one Triton kernel call per layer for the whole batch, every new token a row of it,
        and needs a paged cache in a dtype the kernel takes (see the module docstring). A function
        (a :data:`DecodeAttention`) needs ``paged_view`` too. Both are asked, for the token at
        position ``p``, about the first ``p + 1`` tokens, which keeps a prefill causal.

        Everything is checked before the first write: unknown sequences, bad token ids and, for a
        cache with a ``check_room`` method, a step that would not fit in its memory all raise
        with the cache unchanged.
        """
        items = self._check_batch(batch, cache, attention)
        c = self.config
        ids = [seq_id for seq_id, _ in items]
        starts = [cache.length(seq_id) for seq_id in ids]  # before anything is written
        sizes = [len(tokens) for _, tokens in items]
        tokens = torch.tensor([t for _, ts in items for t in ts], dtype=torch.long)
        positions = torch.cat([torch.arange(s, s + n) for s, n in zip(starts, sizes, strict=True)])
        bounds = [0, *torch.cumsum(torch.tensor(sizes), 0).tolist()]
        parts = [slice(a, b) for a, b in pairwise(bounds)]  # each sequence's rows
        owners = [seq_id for seq_id, n in zip(ids, sizes, strict=True) for _ in range(n)]

        x = self.embed[tokens]  # [total_new_tokens, d_model]
        for layer, w in enumerate(self.layers):
            h = self._rms_norm(x)
            q = self._rope((h @ w["wq"]).view(-1, c.num_heads, c.head_dim), positions)
            k = self._rope((h @ w["wk"]).view(-1, c.num_kv_heads, c.head_dim), positions)
            v = (h @ w["wv"]).view(-1, c.num_kv_heads, c.head_dim)
            for seq_id, part in zip(ids, parts, strict=True):
                cache.write(seq_id, layer, k[part], v[part])
            if attention == "kernel":  # one kernel call for the whole batch
                out = cache_decode_attention(q, cache, layer, owners, positions)  # a PagedKVCache
            else:  # sequence by sequence
                out = torch.empty_like(q)
                for s, p in zip(ids, parts, strict=True):
                    out[p] = self._attend(cache, s, layer, q[p], positions[p], attention)
            x = x + out.reshape(-1, c.num_heads * c.head_dim) @ w["wo"]
            h = self._rms_norm(x)
            x = x + (torch.nn.functional.silu(h @ w["w_gate"]) * (h @ w["w_up"])) @ w["w_down"]
        logits = self._rms_norm(x) @ self.lm_head
        return {seq_id: logits[part] for seq_id, part in zip(ids, parts, strict=True)}

    __call__ = forward

    def _attend(
        self,
        cache: KVCache,
        seq_id: Hashable,
        layer: int,
        q: torch.Tensor,
        q_positions: torch.Tensor,
        attention: AttentionMode | DecodeAttention,
    ) -> torch.Tensor:
        if callable(attention):
            return self._attend_per_query(cache, seq_id, layer, q, q_positions, attention)
        if attention == "blockwise":
            view = cache.paged_view(seq_id, layer)  # type: ignore[attr-defined]
            return blockwise_attention(
                q,
                view.k_blocks,
                view.v_blocks,
                view.block_ids,
                view.length,
                q_positions=q_positions,
            )
        k, v = cache.read(seq_id, layer)
        return contiguous_attention(q, k, v, q_positions=q_positions)

    def _attend_per_query(
        self,
        cache: KVCache,
        seq_id: Hashable,
        layer: int,
        q: torch.Tensor,
        q_positions: torch.Tensor,
        attend: DecodeAttention,
    ) -> torch.Tensor:
        """Call ``attend`` for each query, over the tokens up to and including its position."""
        view = cache.paged_view(seq_id, layer)  # type: ignore[attr-defined]
        block_ids = list(view.block_ids)
        rows = []
        for i, position in enumerate(q_positions.tolist()):
            row = attend(q[i], view.k_blocks, view.v_blocks, block_ids, position + 1)
            if not isinstance(row, torch.Tensor) or tuple(row.shape) != tuple(q.shape[1:]):
                shape = tuple(row.shape) if isinstance(row, torch.Tensor) else type(row).__name__
                raise ValueError(
                    f"the attention function must return a tensor of shape "
                    f"{tuple(q.shape[1:])} (query heads, head size) for one query, got {shape}"
                )
            rows.append(row.to(dtype=q.dtype))
        return torch.stack(rows)

    def _rms_norm(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.config.norm_eps)

    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotate each pair of dimensions (i, i + D/2) by the angle ``position × inv_freq[i]``."""
        angles = positions.to(torch.float64)[:, None] * self.inv_freq[None, :]  # [T, D/2]
        cos, sin = torch.cos(angles)[:, None, :], torch.sin(angles)[:, None, :]
        first, second = x.chunk(2, dim=-1)
        return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)

    def _check_batch(
        self, batch: Batch, cache: KVCache, attention: AttentionMode | DecodeAttention
    ) -> list[tuple[Hashable, list[int]]]:
        if callable(attention) or attention == "blockwise":
            if not hasattr(cache, "paged_view"):
                what = "an attention function" if callable(attention) else "attention='blockwise'"
                raise TypeError(
                    f"{what} walks block tables, so it needs a paged cache with paged_view(); "
                    f"{type(cache).__name__} has none. Use attention='read'"
                )
        elif attention == "kernel":
            check_cache_for_kernel(cache)  # a paged cache in a dtype the kernel takes
        elif attention != "read":
            raise ValueError(
                f"attention must be 'read', 'blockwise' or 'kernel' (or a function), got "
                f"{attention!r}"
            )
        pairs = list(batch.items()) if isinstance(batch, Mapping) else list(batch)
        if not pairs:
            raise ValueError("the batch is empty; pass at least one (seq_id, token_ids) pair")
        items: list[tuple[Hashable, list[int]]] = []
        for pair in pairs:
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise TypeError(
                    f"each batch entry must be a (seq_id, token_ids) pair, got {pair!r}"
                )
            seq_id, token_ids = pair
            ids = token_ids.tolist() if isinstance(token_ids, torch.Tensor) else list(token_ids)
            if not ids:
                raise ValueError(
                    f"sequence {seq_id!r} has no new tokens; leave it out of the batch"
                )
            vocab = self.config.vocab_size
            if not all(is_int(t) and 0 <= t < vocab for t in ids):
                raise ValueError(
                    f"sequence {seq_id!r}: token ids must be ints in 0..{vocab - 1}, got {ids}"
                )
            items.append((seq_id, ids))
        seen = [seq_id for seq_id, _ in items]
        if len(set(seen)) != len(seen):
            raise ValueError(f"a sequence appears twice in the batch: {seen}; merge its tokens")
        for seq_id, _ in items:
            cache.length(seq_id)  # raises for an unknown sequence before anything is written
        check_room = getattr(cache, "check_room", None)
        if callable(check_room):  # a cache with a memory limit says now if the step fits
            check_room({seq_id: len(ids) for seq_id, ids in items})
        return items


def max_logit_difference(
    cache: ManagedKVCache,
    *,
    model: TinyTransformer | None = None,
    prompt_lengths: Sequence[int] = (5, 17, 33, 2),
    decode_steps: int = 20,
    attention: AttentionMode | DecodeAttention = "read",
    seed: int = 0,
) -> float:
    """Run prefill + greedy decode on ``cache`` beside a contiguous cache; the largest |Δlogit|.

    Sequences ``0, 1, ...`` get random prompts of ``prompt_lengths`` tokens (from ``seed``) and are
    added to both caches, which must be empty of those ids. All prompts are prefilled in one
    ragged batch, then all sequences decode ``decode_steps`` tokens together. The next token is
    the argmax of the *contiguous* run's logits and is fed to both runs, so the two always see
    the same tokens even if a near-tie would make their argmaxes differ.
    """
    model = model or TinyTransformer()
    if any(isinstance(n, bool) or not isinstance(n, int) or n <= 0 for n in prompt_lengths):
        raise ValueError(f"prompt_lengths must be positive ints, got {list(prompt_lengths)}")
    check_count("decode_steps", decode_steps)
    gen = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    batch = {
        i: torch.randint(vocab, (n,), generator=gen).tolist() for i, n in enumerate(prompt_lengths)
    }
    reference = model.contiguous_cache()
    for seq_id in batch:
        reference.add_sequence(seq_id)
        cache.add_sequence(seq_id)
    worst = 0.0
    for _ in range(decode_steps + 1):
        expected = model.forward(batch, reference)
        got = model.forward(batch, cache, attention=attention)
        for seq_id in batch:
            diff = (got[seq_id] - expected[seq_id]).abs().max().item()
            if math.isnan(diff):
                return diff  # NaN logits: report them, since max() would silently drop a NaN
            worst = max(worst, diff)
        batch = {seq_id: [int(expected[seq_id][-1].argmax())] for seq_id in batch}
    return worst


def paged_vs_contiguous(
    block_sizes: Sequence[int] = (1, 4, 16, 64),
    *,
    prompt_lengths: Sequence[int] = (5, 17, 33, 2),
    decode_steps: int = 20,
    attention: AttentionMode = "blockwise",
    seed: int = 0,
) -> dict[int, float]:
    """§4's experiment: for each block size, the largest logit difference between a paged cache
    and a contiguous one over a ragged batch (prefill + ``decode_steps`` greedy steps).

    Each paged cache gets a pool with exactly the blocks the run needs, so running out would show
    as an error. ``attention="blockwise"`` (the default) attends block by block with the online
    softmax, so the difference is rounding (about 1e-15); ``"read"`` gathers the blocks into a
    contiguous tensor first and gives exactly 0. ``"kernel"`` runs the Triton kernel on a float32
    paged cache (on the device :func:`~kvcourse.attention.backend.kernel_device` names), so the
    difference is float32 rounding (about 1e-6).
    """
    model = TinyTransformer(seed=seed)
    result: dict[int, float] = {}
    for block_size in block_sizes:
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size <= 0:
            raise ValueError(f"block sizes must be positive ints, got {block_size!r}")
        needed = sum(ceil_div(n + decode_steps, block_size) for n in prompt_lengths)
        pool = BlockPool(needed, block_size)
        if attention == "kernel":
            cache = model.paged_cache(pool, dtype=torch.float32, device=kernel_device())
        else:
            cache = model.paged_cache(pool)
        result[block_size] = max_logit_difference(
            cache,
            model=model,
            prompt_lengths=prompt_lengths,
            decode_steps=decode_steps,
            attention=attention,
            seed=seed,
        )
    return result
