"""Paged decode attention (§4): the Triton kernel's checked entry point, and its oracle.

During decoding every sequence of a batch has one new query token, and it attends to all the keys
and values the sequence has cached so far. In a paged cache those live in fixed-size *pages*
(blocks) scattered over one pool, found through each sequence's *block table*. The tensors' layout
is described in :mod:`kvcourse.attention.paged_inputs`: ``q`` ``[batch, q_heads, head_dim]``, the
page pool ``k_cache``/``v_cache`` ``[num_blocks, block_size, kv_heads, head_dim]``, the int32
``block_tables`` ``[batch, max_blocks]`` and ``seq_lens`` ``[batch]``.

Two functions compute the same thing:

* :func:`paged_decode_attention` runs the Triton kernels of
  :mod:`kvcourse.attention.triton_paged_decode` -- compiled on a GPU, in Triton's interpreter on a
  CPU (chosen by :mod:`kvcourse.attention.backend`) -- and falls back to the reference where
  Triton is not installed;
* :func:`paged_decode_attention_reference` is plain PyTorch: it gathers each sequence's pages into
  one contiguous K and V and computes ``softmax(q Kᵀ · scale) V``. It is the correctness oracle.

Grouped-query attention (GQA) is supported: ``q_heads`` must be a multiple of ``kv_heads``, and
query head ``h`` uses KV head ``h // (q_heads // kv_heads)``. How the kernel is launched (tile,
split-KV, warps, stages) is decided by :func:`~kvcourse.attention.launch.choose_launch_config`.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from types import ModuleType

import torch

from kvcourse.attention.backend import load_triton
from kvcourse.attention.launch import (
    LaunchConfig,
    check_splits,
    choose_launch_config,
    group_pad,
    head_dim_pad,
    num_sms,
)
from kvcourse.attention.paged_inputs import PagedShapes, check_paged_inputs, check_paged_values

_LOG2_E = 1.4426950408889634


# --------------------------------------------------------------------------------------------
# The reference
# --------------------------------------------------------------------------------------------


def paged_decode_attention_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    scale: float | None = None,
    num_splits: int | None = None,
) -> torch.Tensor:
    """Decode attention over a paged KV cache, in plain PyTorch: the oracle for the kernel.

    For each sequence it gathers the pages its block table lists into one contiguous K and V,
    keeps the first ``seq_lens[b]`` tokens, and computes ``softmax(q Kᵀ · scale) V`` per query head
    (query head ``h`` reads KV head ``h // group``). Arithmetic is in float32, or float64 for
    float64 inputs; the result has ``q``'s dtype and shape ``[batch, q_heads, head_dim]``.
    ``scale`` defaults to ``1/sqrt(head_dim)``. ``num_splits`` is accepted so the two functions are
    interchangeable, and ignored: splitting changes only the order of the arithmetic.

    Checks every argument like :func:`paged_decode_attention`, including the values of
    ``seq_lens`` and the block ids in use (reading them from a GPU is fine here: this is the slow
    path).
    """
    shapes = check_paged_inputs(
        q, k_cache, v_cache, block_tables, seq_lens, scale, for_kernel=False
    )
    if num_splits is not None:
        check_splits(num_splits)
    check_paged_values(block_tables, seq_lens, shapes)
    scale = 1.0 / math.sqrt(shapes.head_dim) if scale is None else float(scale)
    acc_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    group = shapes.q_heads // shapes.kv_heads

    out = torch.empty(q.shape, dtype=acc_dtype, device=q.device)
    for b, length in enumerate(seq_lens.tolist()):
        pages = block_tables[b, : math.ceil(length / shapes.block_size)].long()
        # [pages, block_size, kv_heads, d] -> [tokens, kv_heads, d], then drop the unused slots.
        k = k_cache[pages].reshape(-1, shapes.kv_heads, shapes.head_dim)[:length].to(acc_dtype)
        v = v_cache[pages].reshape(-1, shapes.kv_heads, shapes.head_dim)[:length].to(acc_dtype)
        queries = q[b].to(acc_dtype).reshape(shapes.kv_heads, group, shapes.head_dim)
        scores = torch.einsum("kgd,nkd->kgn", queries, k) * scale
        weights = torch.softmax(scores, dim=-1)
        out[b] = torch.einsum("kgn,nkd->kgd", weights, v).reshape(shapes.q_heads, shapes.head_dim)
    return out.to(q.dtype)


# --------------------------------------------------------------------------------------------
# The kernel's wrapper
# --------------------------------------------------------------------------------------------

_kernels_module: ModuleType | None = None
_kernels_loaded = False


def _load_kernels() -> ModuleType | None:
    """The module of Triton kernels, or None where Triton is missing (load_triton says so once)."""
    global _kernels_module, _kernels_loaded
    if not _kernels_loaded:
        if load_triton() is not None:
            from kvcourse.attention import triton_paged_decode as paged_decode

            _kernels_module = paged_decode
        _kernels_loaded = True
    return _kernels_module


def paged_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    scale: float | None = None,
    num_splits: int | None = None,
    config: LaunchConfig | None = None,
    validate: bool | None = None,
) -> torch.Tensor:
    """Decode attention over a paged KV cache with the course's Triton kernel.

    Shapes are those of the module docstring; the result is ``[batch, q_heads, head_dim]`` in
    ``q``'s dtype. Inputs may be float32, float16 or bfloat16 (arithmetic is float32); head_dim
    from 1 to 256 (a size that is not a power of two, such as 80 or 192, is padded inside the
    kernel, not copied); page size a power of two from 1 to 128; ``block_tables`` int32.

    * ``scale``: the softmax scale, default ``1/sqrt(head_dim)``;
    * ``num_splits``: force the number of programs per (sequence, KV head) (split-KV); by default
      :func:`choose_launch_config` decides;
    * ``config``: a whole :class:`LaunchConfig` instead of the automatic one (``num_splits``, if
      given, still overrides its split count);
    * ``validate``: also check ``seq_lens`` (1 … max_blocks × block_size) and the block ids each
      sequence uses (within the cache). Default: only for tensors on the CPU, where it is cheap; on
      a GPU the check reads the tensors back and waits for the device, so pass ``validate=True``
      while debugging. An out-of-range id that is not caught reads the wrong memory.

    Runs compiled on a GPU and in Triton's interpreter on a CPU (see
    :mod:`kvcourse.attention.backend`). In the interpreter, bfloat16 inputs are widened to float32
    first (exactly) because the interpreter computes bfloat16 ``tl.dot`` wrongly. Where Triton is
    not installed it returns :func:`paged_decode_attention_reference`'s result. Raises
    ``TypeError`` or ``ValueError`` saying what was wrong when the arguments do not fit.
    """
    shapes = check_paged_inputs(q, k_cache, v_cache, block_tables, seq_lens, scale, for_kernel=True)
    if num_splits is not None:
        check_splits(num_splits)
    if config is not None and not isinstance(config, LaunchConfig):
        raise TypeError(f"config must be a LaunchConfig or None, got {type(config).__name__}")
    if validate is None:
        validate = q.device.type == "cpu"
    if validate:
        check_paged_values(block_tables, seq_lens, shapes)

    kernels = _load_kernels()
    if kernels is None:
        return paged_decode_attention_reference(
            q, k_cache, v_cache, block_tables, seq_lens, scale=scale
        )
    interpreted = os.environ.get("TRITON_INTERPRET", "0").strip() not in ("", "0")
    if not interpreted and q.device.type != "cuda":
        raise ValueError(
            f"the tensors are on {q.device}, but Triton runs compiled on the GPU in this process: "
            "move them to 'cuda', or set TRITON_INTERPRET=1 before starting Python to use the "
            "interpreter"
        )
    if shapes.batch == 0:
        return torch.empty_like(q)

    if config is None:
        config = choose_launch_config(
            batch=shapes.batch,
            q_heads=shapes.q_heads,
            kv_heads=shapes.kv_heads,
            head_dim=shapes.head_dim,
            max_context=max(1, shapes.max_blocks * shapes.block_size),
            dtype=q.dtype,
            num_sms=None if interpreted else num_sms(q.device.index or 0),
        )
    if num_splits is not None:
        config = replace(config, num_splits=num_splits)

    out_dtype = q.dtype
    if interpreted and q.dtype == torch.bfloat16:
        q, k_cache, v_cache = q.float(), k_cache.float(), v_cache.float()
    scale = 1.0 / math.sqrt(shapes.head_dim) if scale is None else float(scale)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    _launch(kernels, q, k_cache, v_cache, block_tables, seq_lens, out, scale, shapes, config)
    return out if out.dtype == out_dtype else out.to(out_dtype)


def _launch(
    kernels: ModuleType,
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    out: torch.Tensor,
    scale: float,
    shapes: PagedShapes,
    config: LaunchConfig,
) -> None:
    splits = config.num_splits
    if splits > 1:
        part_out = torch.empty(
            (shapes.batch, shapes.q_heads, splits, shapes.head_dim),
            dtype=torch.float32,
            device=q.device,
        )
        part_lse = torch.empty(
            (shapes.batch, shapes.q_heads, splits), dtype=torch.float32, device=q.device
        )
    else:  # unused by the kernel when SPLIT is False; any tensor will do as a pointer
        part_out = part_lse = out
    group = shapes.q_heads // shapes.kv_heads
    kernels.paged_decode_kernel[(shapes.batch * shapes.kv_heads, splits)](
        q,
        k_cache,
        v_cache,
        block_tables,
        seq_lens,
        out,
        part_out,
        part_lse,
        scale * _LOG2_E,
        shapes.kv_heads,
        splits,
        *q.stride(),
        *k_cache.stride(),
        *v_cache.stride(),
        *block_tables.stride(),
        seq_lens.stride(0),
        *out.stride(),
        GROUP=group,
        GROUP_PAD=group_pad(group),
        HEAD_DIM=shapes.head_dim,
        HEAD_DIM_PAD=head_dim_pad(shapes.head_dim),
        BLOCK_SIZE=shapes.block_size,
        TILE=config.tile_tokens,
        SPLIT=splits > 1,
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )
    if splits > 1:
        splits_pad = 1 << (splits - 1).bit_length()
        kernels.combine_splits_kernel[(shapes.batch, shapes.q_heads)](
            part_out,
            part_lse,
            out,
            shapes.q_heads,
            splits,
            *out.stride(),
            HEAD_DIM=shapes.head_dim,
            HEAD_DIM_PAD=head_dim_pad(shapes.head_dim),
            SPLITS_PAD=splits_pad,
            CHUNK=min(splits_pad, max(1, 4096 // head_dim_pad(shapes.head_dim))),
            num_warps=4,
        )
