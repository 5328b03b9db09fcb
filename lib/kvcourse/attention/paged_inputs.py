"""The inputs of paged decode attention (§4): their layout, what the kernel accepts, and the checks.

One decode step of a batch, as both :func:`~kvcourse.attention.paged_decode.paged_decode_attention`
(the Triton kernel) and its reference take it:

* ``q``: ``[batch, q_heads, head_dim]``, the new token's queries;
* ``k_cache``, ``v_cache``: ``[num_blocks, block_size, kv_heads, head_dim]``, the page pool;
* ``block_tables``: ``[batch, max_blocks]`` int32, entry ``j`` of row ``b`` is the physical page
  holding tokens ``j·block_size … (j+1)·block_size − 1`` of sequence ``b`` (entries past the
  sequence's last page are ignored, so they may hold anything, e.g. ``-1``);
* ``seq_lens``: ``[batch]``, the number of cached tokens of each sequence (at least 1).

:func:`check_paged_inputs` checks types, shapes, dtypes and devices without reading any values
(they may live on a GPU); :func:`check_paged_values` reads ``seq_lens`` and the block ids in use.
:func:`check_kernel_support` says whether the kernel takes a cache of a given element type, page
size and head size, so a caller (the tiny model's ``attention="kernel"``) can refuse a cache
before it writes anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kvcourse._checks import is_int

#: Element types the Triton kernel accepts (the reference also takes float64).
KERNEL_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)
#: Widest head the kernel takes.
MAX_HEAD_DIM = 256
#: Head sizes the kernel takes: every one from 1 to :data:`MAX_HEAD_DIM`. Powers of two run as
#: they are; any other size (80, 96, 112, 192 in real models) is padded inside the kernel to the
#: next power of two (:func:`~kvcourse.attention.launch.head_dim_pad`) with masked loads and stores.
KERNEL_HEAD_DIMS: tuple[int, ...] = tuple(range(1, MAX_HEAD_DIM + 1))
#: Largest page (block) size the kernel supports, in tokens; page sizes are powers of two from 1.
MAX_BLOCK_SIZE = 128


@dataclass(frozen=True)
class PagedShapes:
    """The sizes of one paged decode problem, read off its tensors by :func:`check_paged_inputs`."""

    batch: int
    q_heads: int
    kv_heads: int
    head_dim: int
    num_blocks: int
    block_size: int
    max_blocks: int


def _check_block_size(block_size: object) -> None:
    is_power_of_two = is_int(block_size) and block_size >= 1 and not block_size & (block_size - 1)
    if not is_power_of_two or block_size > MAX_BLOCK_SIZE:
        raise ValueError(
            f"block_size (k_cache.shape[1]) must be a power of two from 1 to {MAX_BLOCK_SIZE}, "
            f"got {block_size}"
        )


def check_kernel_support(*, dtype: torch.dtype, block_size: int, head_dim: int) -> None:
    """Raise unless the Triton kernel takes a cache of this element type, page size and head size.

    ``TypeError`` for a dtype outside :data:`KERNEL_DTYPES`; ``ValueError`` for a page size that is
    not a power of two up to :data:`MAX_BLOCK_SIZE`, or a head size outside 1 …
    :data:`MAX_HEAD_DIM`. Each message says what to pass instead.
    """
    if dtype not in KERNEL_DTYPES:
        names = ", ".join(str(d).replace("torch.", "") for d in KERNEL_DTYPES)
        raise TypeError(f"the Triton kernel takes q/k_cache/v_cache in {names}; got {dtype}")
    _check_block_size(block_size)
    if not is_int(head_dim) or not 1 <= head_dim <= MAX_HEAD_DIM:
        raise ValueError(
            f"the Triton kernel takes head_dim from 1 to {MAX_HEAD_DIM}, got {head_dim}; for "
            "wider heads use paged_decode_attention_reference"
        )


def check_paged_inputs(
    q: object,
    k_cache: object,
    v_cache: object,
    block_tables: object,
    seq_lens: object,
    scale: object,
    *,
    for_kernel: bool,
) -> PagedShapes:
    """Check types, ranks, shapes, dtypes and devices (no values: those may live on a GPU).

    ``for_kernel`` adds the kernel's limits (:func:`check_kernel_support`); the reference also
    takes float64 and any page size. Returns the problem's sizes.
    """
    tensors = {
        "q": q,
        "k_cache": k_cache,
        "v_cache": v_cache,
        "block_tables": block_tables,
        "seq_lens": seq_lens,
    }
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")

    layouts = {
        "q": (q, 3, "[batch, q_heads, head_dim]"),
        "k_cache": (k_cache, 4, "[num_blocks, block_size, kv_heads, head_dim]"),
        "v_cache": (v_cache, 4, "[num_blocks, block_size, kv_heads, head_dim]"),
        "block_tables": (block_tables, 2, "[batch, max_blocks]"),
        "seq_lens": (seq_lens, 1, "[batch]"),
    }
    for name, (tensor, rank, layout) in layouts.items():
        if tensor.dim() != rank:
            raise ValueError(
                f"{name} must have shape {layout} ({rank} dimensions), "
                f"got shape {tuple(tensor.shape)}"
            )
    if k_cache.shape != v_cache.shape:
        raise ValueError(
            f"k_cache and v_cache must have the same shape, got {tuple(k_cache.shape)} and "
            f"{tuple(v_cache.shape)}"
        )

    batch, q_heads, head_dim = q.shape
    num_blocks, block_size, kv_heads, cache_head_dim = k_cache.shape
    if block_tables.shape[0] != batch or seq_lens.shape[0] != batch:
        raise ValueError(
            f"q, block_tables and seq_lens must agree on the batch size, got {batch}, "
            f"{block_tables.shape[0]} and {seq_lens.shape[0]}"
        )
    if head_dim < 1:
        raise ValueError(f"head_dim (q.shape[2]) must be positive, got {head_dim}")
    if cache_head_dim != head_dim:
        raise ValueError(
            f"q's head_dim ({head_dim}) differs from the cache's ({cache_head_dim}); the last "
            "dimension of q and of k_cache/v_cache must match"
        )
    if kv_heads < 1 or q_heads < 1 or q_heads % kv_heads != 0:
        raise ValueError(
            f"q_heads ({q_heads}) must be a positive multiple of the cache's kv_heads "
            f"({kv_heads}): each KV head serves a whole group of query heads (GQA)"
        )
    if q.dtype != k_cache.dtype or q.dtype != v_cache.dtype:
        raise TypeError(
            f"q, k_cache and v_cache must have the same dtype, got {q.dtype}, {k_cache.dtype} and "
            f"{v_cache.dtype}; convert them with .to(...) first"
        )
    if for_kernel:
        check_kernel_support(dtype=q.dtype, block_size=block_size, head_dim=head_dim)
    else:
        if q.dtype not in (*KERNEL_DTYPES, torch.float64):
            names = ", ".join(str(d).replace("torch.", "") for d in (*KERNEL_DTYPES, torch.float64))
            raise TypeError(f"the reference takes q/k_cache/v_cache in {names}; got {q.dtype}")
        _check_block_size(block_size)
    if block_tables.dtype != torch.int32:
        raise TypeError(
            f"block_tables must be int32, got {block_tables.dtype}; convert it with "
            ".to(torch.int32)"
        )
    if seq_lens.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"seq_lens must be int32 or int64, got {seq_lens.dtype}")

    devices = {name: tensor.device for name, tensor in tensors.items()}
    if len(set(devices.values())) > 1:
        listed = ", ".join(f"{name} on {device}" for name, device in devices.items())
        raise ValueError(f"all tensors must be on one device, got {listed}")

    if scale is not None and (
        isinstance(scale, bool)
        or not isinstance(scale, (int, float))
        or not math.isfinite(scale)
        or scale <= 0
    ):
        raise ValueError(
            f"scale must be None (1/sqrt(head_dim)) or a finite positive number, got {scale!r}"
        )
    return PagedShapes(
        batch, q_heads, kv_heads, head_dim, num_blocks, block_size, block_tables.shape[1]
    )


def check_paged_values(
    block_tables: torch.Tensor, seq_lens: torch.Tensor, shapes: PagedShapes
) -> None:
    """Check ``seq_lens`` (1 … max_blocks × block_size) and the block ids each sequence uses
    (within the cache). Reads the tensors, which waits for the device on a GPU."""
    lens = seq_lens.to(torch.int64)
    capacity = shapes.max_blocks * shapes.block_size
    too_short = torch.nonzero(lens < 1)
    if too_short.numel():
        b = int(too_short[0, 0])
        raise ValueError(
            f"seq_lens[{b}] = {int(lens[b])}: every sequence needs at least one cached token "
            "(the new token's own K and V are written to the cache before attention)"
        )
    too_long = torch.nonzero(lens > capacity)
    if too_long.numel():
        b = int(too_long[0, 0])
        raise ValueError(
            f"seq_lens[{b}] = {int(lens[b])} exceeds what the block table can address: "
            f"{shapes.max_blocks} pages × {shapes.block_size} tokens = {capacity}; widen "
            "block_tables or check seq_lens"
        )
    pages_used = (lens + shapes.block_size - 1) // shapes.block_size
    columns = torch.arange(shapes.max_blocks, device=lens.device)
    used = columns[None, :] < pages_used[:, None]
    bad = used & ((block_tables < 0) | (block_tables >= shapes.num_blocks))
    where = torch.nonzero(bad)
    if where.numel():
        b, j = int(where[0, 0]), int(where[0, 1])
        raise ValueError(
            f"block_tables[{b}, {j}] = {int(block_tables[b, j])} is not a page of the cache "
            f"(valid ids are 0..{shapes.num_blocks - 1}); sequence {b} has {int(lens[b])} tokens, "
            f"so it uses its first {int(pages_used[b])} table entries"
        )
