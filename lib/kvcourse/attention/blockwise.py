"""Attention over KV stored in blocks (§4.2): walk the block table, one block at a time.

A sequence's keys and values no longer sit in one array; they are scattered over physical blocks
of ``block_size`` tokens. The paper's equation (4) computes attention block by block anyway. This
module does it with the *online softmax*: for each block it computes the scores of the block's
keys, then updates three running quantities per query head,

* ``max``: the largest score seen so far (subtracted before ``exp`` so nothing overflows);
* ``sum``: Σ exp(score − max) over the keys seen so far;
* ``acc``: Σ exp(score − max) · v over the keys seen so far (the unnormalised output).

When a new block raises the maximum from ``m`` to ``m'``, the old ``sum`` and ``acc`` are
multiplied by ``exp(m − m')`` so that all terms share the new reference point. After the last block
the output is ``acc / sum``, which equals ``softmax(q Kᵀ / √d) V`` up to rounding: in float64 the
two agree to about 1e-16.

Every function works on NumPy arrays and on PyTorch tensors alike (all arguments of one call must
be the same kind), in any floating dtype. Shapes, with ``n`` queries, ``Hq`` query heads, ``Hkv``
KV heads and head size ``D``:

* queries ``q``: ``[n, Hq, D]`` (``n = 1`` for one decode step, more for a prefill chunk);
* contiguous keys and values: ``[length, Hkv, D]``;
* paged keys and values: ``[num_blocks, block_size, Hkv, D]``, the layout of the Triton kernel.

Grouped-query attention (GQA): ``Hq`` must be a multiple of ``Hkv``; query heads ``h·g .. h·g+g−1``
(``g = Hq / Hkv``) all read KV head ``h``. ``q_positions``, when given, makes the attention causal:
query ``i`` sees only keys at positions ``<= q_positions[i]``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import torch

# The module, not its functions: assignment a2's tests switch off every function in this module's
# namespace while a student's attention runs, and the shared checks must keep working for others.
import kvcourse._checks as checks

#: A NumPy array or a PyTorch tensor.
Array = np.ndarray | torch.Tensor


@dataclass(frozen=True)
class OnlineSoftmaxState:
    """The running quantities of the online softmax, for ``n`` queries in ``Hkv × g`` heads.

    ``max`` and ``sum`` have shape ``[Hkv, g, n]``; ``acc`` has shape ``[Hkv, g, n, D]``. Before the
    first block ``max`` is −∞ and ``sum`` and ``acc`` are 0.
    """

    max: Array
    sum: Array
    acc: Array


@dataclass(frozen=True)
class BlockStep:
    """What attention did with one block: logical block ``logical`` (physical ``physical``)
    contributed ``num_keys`` keys, and ``state`` is the running state after it."""

    logical: int
    physical: int
    num_keys: int
    state: OnlineSoftmaxState


# ---------------------------------------------------------------------------- the reference


def contiguous_attention(
    q: Array,
    k: Array,
    v: Array,
    *,
    q_positions: Sequence[int] | Array | None = None,
    scale: float | None = None,
) -> Array:
    """Plain attention ``softmax(q Kᵀ · scale) V`` over contiguous ``k`` and ``v`` ``[L, Hkv, D]``.

    ``scale`` defaults to ``1/√D``. Returns ``[n, Hq, D]``. This is the reference that blockwise
    attention must reproduce.
    """
    xp = _namespace(q, k, v)
    _check_shapes(q, k, v, "k", "length, kv_heads, head_dim")
    length = k.shape[0]
    if length == 0:
        raise ValueError("k and v hold no tokens; attention needs at least one key")
    num_q, q_heads, head_dim = q.shape
    kv_heads = k.shape[1]
    scale = _scale(scale, head_dim)
    qg = q.reshape(num_q, kv_heads, q_heads // kv_heads, head_dim)
    scores = xp.einsum("nhgd,khd->hgnk", qg, k) * scale
    if q_positions is not None:
        qpos = _positions(xp, q_positions, num_q, length, like=q)
        scores = _causal_mask(xp, scores, _arange(xp, 0, length, like=q), qpos)
    weights = xp.exp(scores - xp.amax(scores, axis=-1, keepdims=True))
    weights = weights / xp.sum(weights, axis=-1, keepdims=True)
    out = xp.einsum("hgnk,khd->nhgd", weights, v)
    return out.reshape(num_q, q_heads, head_dim)


# ---------------------------------------------------------------------------- the per-block steps


def init_online_softmax(q: Array, kv_heads: int) -> OnlineSoftmaxState:
    """The state before any block: ``max = −∞``, ``sum = 0``, ``acc = 0``."""
    xp = _namespace(q)
    num_q, q_heads, head_dim = q.shape
    shape = (kv_heads, q_heads // kv_heads, num_q)
    return OnlineSoftmaxState(
        max=_full(xp, shape, -math.inf, like=q),
        sum=_full(xp, shape, 0.0, like=q),
        acc=_full(xp, (*shape, head_dim), 0.0, like=q),
    )


def block_scores(
    q: Array,
    k_block: Array,
    *,
    scale: float,
    key_positions: Array | None = None,
    q_positions: Array | None = None,
) -> Array:
    """Scores ``q · kᵀ · scale`` of the queries against one block's keys ``[b, Hkv, D]``.

    Returns ``[Hkv, g, n, b]``. With positions given, keys after a query's position get −∞ (the
    causal mask), so they receive zero weight.
    """
    xp = _namespace(q, k_block)
    num_q, q_heads, head_dim = q.shape
    kv_heads = k_block.shape[1]
    qg = q.reshape(num_q, kv_heads, q_heads // kv_heads, head_dim)
    scores = xp.einsum("nhgd,bhd->hgnb", qg, k_block) * scale
    if q_positions is not None and key_positions is not None:
        scores = _causal_mask(xp, scores, key_positions, q_positions)
    return scores


def online_softmax_step(
    state: OnlineSoftmaxState, scores: Array, v_block: Array
) -> OnlineSoftmaxState:
    """Fold one block into the running state: scores ``[Hkv, g, n, b]``, values ``[b, Hkv, D]``.

    The new maximum ``m'`` is the larger of the old one and this block's; the old ``sum`` and
    ``acc`` are rescaled by ``exp(m − m')`` and this block's terms ``exp(score − m')`` are added.
    """
    xp = _namespace(scores, v_block)
    new_max = xp.maximum(state.max, xp.amax(scores, axis=-1))
    # A query that has seen only masked keys keeps max = −∞; use 0 as its reference point so that
    # exp(−∞ − 0) = 0 instead of exp(−∞ + ∞) = NaN.
    reference = xp.where(xp.isneginf(new_max), 0.0, new_max)
    rescale = xp.exp(state.max - reference)  # exp(m − m'), 0 before the first visible key
    weights = xp.exp(scores - reference[..., None])  # exp(score − m')
    return OnlineSoftmaxState(
        max=new_max,
        sum=rescale * state.sum + xp.sum(weights, axis=-1),
        acc=rescale[..., None] * state.acc + xp.einsum("hgnb,bhd->hgnd", weights, v_block),
    )


def finish_online_softmax(state: OnlineSoftmaxState) -> Array:
    """The attention output ``acc / sum`` after the last block, as ``[n, Hq, D]``."""
    xp = _namespace(state.acc)
    kv_heads, group, num_q, head_dim = state.acc.shape
    out = state.acc / state.sum[..., None]
    return xp.einsum("hgnd->nhgd", out).reshape(num_q, kv_heads * group, head_dim)


# ---------------------------------------------------------------------------- the block walk


def iter_blockwise_attention(
    q: Array,
    k_cache: Array,
    v_cache: Array,
    block_ids: Sequence[int] | Array,
    seq_len: int,
    *,
    q_positions: Sequence[int] | Array | None = None,
    scale: float | None = None,
) -> Iterator[BlockStep]:
    """Walk a sequence's block table and yield the running state after each block.

    ``k_cache`` and ``v_cache`` are the paged arrays ``[num_blocks, block_size, Hkv, D]``;
    ``block_ids`` lists the sequence's physical blocks in logical order; the sequence holds
    ``seq_len`` tokens, so its last block may be only partly filled (its other slots are skipped).
    The final step's state gives the output through :func:`finish_online_softmax`.
    """
    xp = _namespace(q, k_cache, v_cache)
    _check_shapes(q, k_cache, v_cache, "k_cache", "num_blocks, block_size, kv_heads, head_dim")
    block_size = k_cache.shape[1]
    kv_heads = k_cache.shape[2]
    seq_len = _check_seq_len(seq_len)
    num_logical = -(-seq_len // block_size)  # blocks the sequence's tokens fill
    blocks = _block_list(block_ids, k_cache.shape[0], num_logical)
    num_q, _, head_dim = q.shape
    scale = _scale(scale, head_dim)
    qpos = None if q_positions is None else _positions(xp, q_positions, num_q, seq_len, like=q)

    state = init_online_softmax(q, kv_heads)
    for logical in range(num_logical):
        physical = blocks[logical]
        start = logical * block_size
        num_keys = min(block_size, seq_len - start)
        k_block = k_cache[physical, :num_keys]
        v_block = v_cache[physical, :num_keys]
        key_positions = _arange(xp, start, start + num_keys, like=q)
        scores = block_scores(
            q, k_block, scale=scale, key_positions=key_positions, q_positions=qpos
        )
        state = online_softmax_step(state, scores, v_block)
        yield BlockStep(logical, physical, num_keys, state)


def blockwise_attention(
    q: Array,
    k_cache: Array,
    v_cache: Array,
    block_ids: Sequence[int] | Array,
    seq_len: int,
    *,
    q_positions: Sequence[int] | Array | None = None,
    scale: float | None = None,
) -> Array:
    """Attention of ``q`` over one sequence's paged KV, block by block. Returns ``[n, Hq, D]``.

    The arguments are those of :func:`iter_blockwise_attention`; the result equals
    :func:`contiguous_attention` over the gathered keys and values up to rounding.
    """
    state = None
    for step in iter_blockwise_attention(
        q, k_cache, v_cache, block_ids, seq_len, q_positions=q_positions, scale=scale
    ):
        state = step.state
    assert state is not None  # seq_len >= 1 was checked, so at least one block was walked
    return finish_online_softmax(state)


def blockwise_decode_attention(
    q: Array,
    k_cache: Array,
    v_cache: Array,
    block_tables: Array,
    seq_lens: Array | Sequence[int],
    *,
    scale: float | None = None,
) -> Array:
    """One decode step for a batch, from exactly the inputs of the paged-attention kernel.

    ``q`` is ``[batch, Hq, D]`` (one new token per sequence); ``block_tables`` is
    ``[batch, max_blocks]`` (rows padded past each sequence's blocks; padding is never read) and
    ``seq_lens`` is ``[batch]``. Each sequence's query attends to all its ``seq_lens[b]`` tokens.
    Returns ``[batch, Hq, D]``. A slow, readable reference for the Triton kernel.
    """
    xp = _namespace(q, k_cache, v_cache)
    if q.ndim != 3:
        raise ValueError(f"q must be [batch, q_heads, head_dim], got shape {tuple(q.shape)}")
    batch = q.shape[0]
    if block_tables.ndim != 2 or block_tables.shape[0] != batch:
        raise ValueError(
            f"block_tables must be [batch={batch}, max_blocks], got {tuple(block_tables.shape)}"
        )
    lens = [int(x) for x in (seq_lens.tolist() if hasattr(seq_lens, "tolist") else seq_lens)]
    if len(lens) != batch:
        raise ValueError(f"seq_lens must have {batch} entries (one per sequence), got {len(lens)}")
    outputs = [
        blockwise_attention(q[b : b + 1], k_cache, v_cache, block_tables[b], lens[b], scale=scale)
        for b in range(batch)
    ]
    return xp.concatenate(outputs, axis=0) if xp is np else torch.cat(outputs, dim=0)


# ---------------------------------------------------------------------------- helpers


def _namespace(*arrays: Any) -> ModuleType:
    if all(isinstance(a, torch.Tensor) for a in arrays):
        return torch
    if all(isinstance(a, np.ndarray) for a in arrays):
        return np
    kinds = ", ".join(type(a).__name__ for a in arrays)
    raise TypeError(
        f"pass all arrays as NumPy arrays or all as torch tensors, got: {kinds}; convert with "
        f"np.asarray(...) or torch.as_tensor(...)"
    )


def _check_shapes(q: Array, k: Array, v: Array, k_name: str, layout: str) -> None:
    if q.ndim != 3:
        raise ValueError(f"q must be [num_queries, q_heads, head_dim], got {tuple(q.shape)}")
    if k.ndim != len(layout.split(",")):
        raise ValueError(f"{k_name} must be [{layout}], got shape {tuple(k.shape)}")
    if tuple(k.shape) != tuple(v.shape):
        raise ValueError(
            f"{k_name} and its values must have the same shape, got {tuple(k.shape)} and "
            f"{tuple(v.shape)}"
        )
    kv_heads, head_dim = k.shape[-2], k.shape[-1]
    if q.shape[2] != head_dim:
        raise ValueError(f"q has head_dim {q.shape[2]} but {k_name} has head_dim {head_dim}")
    if kv_heads == 0 or q.shape[1] % kv_heads != 0:
        raise ValueError(
            f"q has {q.shape[1]} heads, not a multiple of the {kv_heads} KV heads of {k_name}; "
            f"grouped-query attention needs whole groups of query heads per KV head"
        )


def _scale(scale: float | None, head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim) if scale is None else float(scale)


def _full(xp: ModuleType, shape: tuple[int, ...], value: float, *, like: Array) -> Array:
    if xp is torch:
        return torch.full(shape, value, dtype=like.dtype, device=like.device)
    return np.full(shape, value, dtype=like.dtype)


def _arange(xp: ModuleType, start: int, stop: int, *, like: Array) -> Array:
    if xp is torch:
        return torch.arange(start, stop, device=like.device)
    return np.arange(start, stop)


def _positions(xp: ModuleType, q_positions: Any, num_q: int, seq_len: int, *, like: Array) -> Array:
    values = q_positions.tolist() if hasattr(q_positions, "tolist") else list(q_positions)
    if len(values) != num_q or not all(checks.is_int(p) for p in values):
        raise ValueError(f"q_positions must be {num_q} integers (one per query), got {values!r}")
    values = [int(p) for p in values]
    if values and not all(0 <= p < seq_len for p in values):
        raise ValueError(
            f"q_positions must lie in 0..{seq_len - 1} (a query sees its own key), got {values}"
        )
    if xp is torch:
        return torch.tensor(values, dtype=torch.long, device=like.device)
    return np.asarray(values, dtype=np.int64)


def _causal_mask(xp: ModuleType, scores: Array, key_positions: Array, q_positions: Array) -> Array:
    visible = key_positions[None, :] <= q_positions[:, None]  # [n, b]
    return xp.where(visible, scores, -math.inf)


def _block_list(block_ids: Any, num_blocks: int, num_logical: int) -> list[int]:
    values = block_ids.tolist() if hasattr(block_ids, "tolist") else list(block_ids)
    if len(values) < num_logical:
        raise ValueError(
            f"the block table lists {len(values)} blocks but the sequence needs {num_logical}"
        )
    used = values[:num_logical]  # entries past the sequence's blocks are padding, never read
    for b in used:
        if not checks.is_int(b):
            raise TypeError(f"block ids must be integers, got {b!r}")
        if not 0 <= b < num_blocks:
            raise ValueError(f"block id {b} is outside the cache's blocks 0..{num_blocks - 1}")
    return [int(b) for b in used]


def _check_seq_len(seq_len: Any) -> int:
    if isinstance(seq_len, bool) or not isinstance(seq_len, (int, np.integer)):
        raise TypeError(f"seq_len must be an int, got {seq_len!r}")
    if seq_len <= 0:
        raise ValueError(f"seq_len must be at least 1 (attention needs a key), got {seq_len}")
    return int(seq_len)
