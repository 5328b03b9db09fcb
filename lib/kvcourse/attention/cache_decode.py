"""Decode attention straight from a paged KV cache (§4): the block tables drive the Triton kernel.

:func:`cache_decode_attention` takes the queries of a ragged batch (any number of new tokens per
sequence) and runs them through :func:`~kvcourse.attention.paged_decode.paged_decode_attention` in
one call, on the cache's own per-layer block arrays and its sequences' block tables (from
:meth:`~kvcourse.kv.cache.PagedKVCache.kernel_inputs`; a student's block table from assignment a2
works the same). Every query is one row of the kernel's batch: the row of the query at position
``p`` of a sequence gets that sequence's block table and ``seq_len = p + 1``, so it sees the
tokens up to and including itself. A decode step (one token per sequence) is exactly the kernel's
decode batch; a prefill becomes one row per prompt token, which keeps it causal.

**The dtype rule.** The kernel reads the cache's block tensors as they are, without copying them,
so the cache must hold an element type the kernel takes (float32, float16 or bfloat16): build it
with ``dtype=torch.float32`` (``TinyTransformer.paged_cache(pool, dtype=torch.float32)``). The
queries are rounded to the cache's dtype, and the result comes back in the queries' dtype and
device (float64 for the tiny model). On a GPU the cache must live on it (``device="cuda"``); in
the interpreter and where Triton is missing, on the CPU.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

from kvcourse.attention.backend import kernel_device
from kvcourse.attention.paged_decode import paged_decode_attention
from kvcourse.attention.paged_inputs import KERNEL_DTYPES, check_kernel_support
from kvcourse.kv.cache import PagedKVCache


def check_cache_for_kernel(cache: object) -> None:
    """Raise unless the Triton kernel can read ``cache``'s blocks as they are.

    ``TypeError`` for a cache without block arrays (no ``kernel_inputs``) or one whose dtype the
    kernel does not take (the tiny model's float64 default); ``ValueError`` for a page size or head
    size outside the kernel's limits, or a cache on the CPU when the kernel runs compiled on a GPU.
    """
    if not hasattr(cache, "kernel_inputs"):
        raise TypeError(
            f"attention through the kernel reads a paged cache's block arrays, so it needs a cache "
            f"with kernel_inputs() (a PagedKVCache); {type(cache).__name__} has none"
        )
    dtype = cache.dtype  # type: ignore[attr-defined]
    if dtype not in KERNEL_DTYPES:
        names = ", ".join(str(d).replace("torch.", "") for d in KERNEL_DTYPES)
        raise TypeError(
            f"the kernel reads the cache's own block tensors, so they must be {names}, but this "
            f"cache holds {str(dtype).replace('torch.', '')}; build it with dtype=torch.float32, "
            "e.g. model.paged_cache(pool, dtype=torch.float32)"
        )
    check_kernel_support(
        dtype=dtype,
        block_size=cache.block_size,  # type: ignore[attr-defined]
        head_dim=cache.head_dim,  # type: ignore[attr-defined]
    )
    device = torch.device(cache.device)  # type: ignore[attr-defined]
    if kernel_device() == "cuda" and device.type != "cuda":
        raise ValueError(
            f"the kernel runs compiled on the GPU here, but the cache is on {device}; build it "
            "with device='cuda' (kvcourse.attention.kernel_device() says where it runs)"
        )


def cache_decode_attention(
    q: torch.Tensor,
    cache: PagedKVCache,
    layer: int,
    seq_ids: Sequence[Hashable],
    q_positions: torch.Tensor,
    *,
    scale: float | None = None,
) -> torch.Tensor:
    """Attention of new tokens over ``layer`` of a paged cache, through the Triton kernel.

    ``q`` is ``[n, q_heads, head_dim]``: ``n`` queries, query ``i`` belonging to sequence
    ``seq_ids[i]`` at position ``q_positions[i]``. Each attends to the first ``q_positions[i] + 1``
    tokens its sequence holds in ``layer``, which must already be written (write the new tokens'
    K and V first, as the model does). Returns ``[n, q_heads, head_dim]`` in ``q``'s dtype and on
    its device. ``scale`` defaults to ``1/sqrt(head_dim)``. See the module docstring for the rule
    on dtypes and devices; the cache is checked by :func:`check_cache_for_kernel`.
    """
    check_cache_for_kernel(cache)
    if not isinstance(q, torch.Tensor) or q.ndim != 3:
        got = f"shape {tuple(q.shape)}" if isinstance(q, torch.Tensor) else type(q).__name__
        raise ValueError(f"q must be a [n, q_heads, head_dim] tensor, got {got}")
    positions = torch.as_tensor(q_positions, dtype=torch.int64).cpu()
    if len(seq_ids) != q.shape[0] or tuple(positions.shape) != (q.shape[0],):
        raise ValueError(
            f"q has {q.shape[0]} queries, so seq_ids and q_positions need one entry each, got "
            f"{len(seq_ids)} and shape {tuple(positions.shape)}"
        )
    order = list(dict.fromkeys(seq_ids))  # each sequence once, in the order of first appearance
    k_blocks, v_blocks, block_tables, lengths = cache.kernel_inputs(order, layer)
    row_of = {seq_id: row for row, seq_id in enumerate(order)}
    rows = torch.tensor([row_of[seq_id] for seq_id in seq_ids], dtype=torch.long)
    seq_lens = positions + 1
    held = lengths.cpu().to(torch.int64)[rows]
    bad = torch.nonzero((seq_lens < 1) | (seq_lens > held))
    if bad.numel():
        i = int(bad[0, 0])
        raise ValueError(
            f"query {i} of sequence {seq_ids[i]!r} is at position {int(positions[i])}, but layer "
            f"{layer} holds {int(held[i])} of its tokens; write the new tokens' K and V first"
        )
    device = k_blocks.device
    out = paged_decode_attention(
        q.to(device=device, dtype=k_blocks.dtype),
        k_blocks,
        v_blocks,
        block_tables[rows.to(device)],
        seq_lens.to(device=device, dtype=torch.int32),
        scale=scale,
    )
    return out.to(device=q.device, dtype=q.dtype)
