"""Paged decode attention (§4): the Triton kernel's public face, its launch plans and its oracle.

During decoding every sequence of a batch has one new query token, and it attends to all the keys
and values the sequence has cached so far. In a paged cache those live in fixed-size *pages*
(blocks) scattered over one pool, found through each sequence's *block table*:

* ``q``: ``[batch, q_heads, head_dim]``, the new token's queries;
* ``k_cache``, ``v_cache``: ``[num_blocks, block_size, kv_heads, head_dim]``, the page pool;
* ``block_tables``: ``[batch, max_blocks]`` int32, entry ``j`` of row ``b`` is the physical page
  holding tokens ``j·block_size … (j+1)·block_size − 1`` of sequence ``b`` (entries past the
  sequence's last page are ignored, so they may hold anything, e.g. ``-1``);
* ``seq_lens``: ``[batch]``, the number of cached tokens of each sequence (at least 1).

Two functions compute the same thing:

* :func:`paged_decode_attention` runs the Triton kernels of :mod:`kvcourse.attention.triton_paged_decode`
  -- compiled on a GPU, in Triton's interpreter on a CPU (chosen by :mod:`kvcourse.attention.backend`) -- and
  falls back to the reference where Triton is not installed;
* :func:`paged_decode_attention_reference` is plain PyTorch: it gathers each sequence's pages into
  one contiguous K and V and computes ``softmax(q Kᵀ · scale) V``. It is the correctness oracle.

Grouped-query attention (GQA) is supported: ``q_heads`` must be a multiple of ``kv_heads``, and
query head ``h`` uses KV head ``h // (q_heads // kv_heads)``.

How the kernel is launched is decided by :func:`choose_launch_config` from the problem's shape: the
tile size, how many programs share one sequence's context (split-KV), and Triton's ``num_warps``
and ``num_stages``. It is a small fixed rule, not an autotuner, so it works in the interpreter too
and its choices can be read and tested on a laptop.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from functools import cache
from types import ModuleType

import torch

from kvcourse.attention.backend import load_triton

#: Element types the Triton kernel accepts (the reference also takes float64).
KERNEL_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)
#: Head dimensions the kernel supports: powers of two, because Triton tiles are powers of two.
KERNEL_HEAD_DIMS: tuple[int, ...] = (16, 32, 64, 128, 256)
#: Largest page (block) size the kernel supports, in tokens; page sizes are powers of two from 1.
MAX_BLOCK_SIZE = 128
#: Most programs one sequence's context may be split across.
MAX_SPLITS = 256

_LOG2_E = 1.4426950408889634


# --------------------------------------------------------------------------------------------
# Launch configurations
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaunchConfig:
    """How the decode kernel is launched.

    * ``tile_tokens``: tokens of K and V one loop iteration reads (a power of two, 16 to 128); a
      tile may span several pages or be part of one;
    * ``num_splits``: programs that share one (sequence, KV head); above 1 each writes a partial
      result and a second kernel merges them (split-KV, "flash-decoding");
    * ``num_warps``: warps per program; ``num_stages``: tiles whose loads are kept in flight by
      the compiler's software pipelining (GPU only; the interpreter ignores both).
    """

    tile_tokens: int
    num_splits: int = 1
    num_warps: int = 4
    num_stages: int = 3

    def __post_init__(self) -> None:
        if not _is_int(self.tile_tokens) or self.tile_tokens not in (16, 32, 64, 128):
            raise ValueError(
                f"LaunchConfig: tile_tokens must be 16, 32, 64 or 128, got {self.tile_tokens!r}"
            )
        _check_splits(self.num_splits)
        if not _is_int(self.num_warps) or self.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError(
                f"LaunchConfig: num_warps must be 1, 2, 4, 8 or 16, got {self.num_warps!r}"
            )
        if not _is_int(self.num_stages) or not 1 <= self.num_stages <= 8:
            raise ValueError(
                f"LaunchConfig: num_stages must be an integer from 1 to 8, got {self.num_stages!r}"
            )


#: Bytes of K one tile should hold on a GPU: 64 tokens of a 128-wide 16-bit head. With V as well
#: and three pipeline stages the compiled kernel keeps two tiles of K and V in flight in about
#: 70 KiB of shared memory (read off the kernel compiled for sm_90), so three programs fit on an SM.
_TILE_BYTES = 16 * 1024
#: Programs resident per SM when sizing the grid (see _TILE_BYTES).
_PROGRAMS_PER_SM = 3
#: Waves of programs to aim for when splitting: more waves, shorter tail when the last ones finish.
_TARGET_WAVES = 4
#: A split should cover at least this many tiles, or the partial results cost more than they save.
_MIN_TILES_PER_SPLIT = 2


def choose_launch_config(
    *,
    batch: int,
    q_heads: int,
    kv_heads: int,
    head_dim: int,
    max_context: int,
    dtype: torch.dtype,
    num_sms: int | None,
) -> LaunchConfig:
    """Pick the launch configuration for one decode step from the problem's shape.

    ``max_context`` is an upper bound on the sequence lengths (the wrapper passes the block table's
    width × page size, which it knows without reading ``seq_lens`` back from the GPU). ``num_sms``
    is the GPU's multiprocessor count, or ``None`` for Triton's interpreter on a CPU.

    The rule, for a GPU (the constants are named at the top of the module):

    * the tile holds 16 KiB of K (64 tokens for head_dim 128 in 16-bit), between 16 and 128
      tokens; with 3 pipeline stages that lets 3 programs share an SM;
    * one program per (sequence, KV head) when that already makes two full waves
      (``2 × 3 programs/SM × SMs``); otherwise each sequence's context is split into chunks of
      whole tiles so that there are about four waves, keeping at least two tiles per chunk
      (split-KV, for long contexts and small batches);
    * 4 warps (8 when the group × head_dim accumulator is large) and 3 pipeline stages.

    In the interpreter there is one configuration: the same tile, no split (the interpreter runs
    programs one after another, so splitting buys nothing there).
    """
    for name, value in (
        ("batch", batch),
        ("q_heads", q_heads),
        ("kv_heads", kv_heads),
        ("head_dim", head_dim),
        ("max_context", max_context),
    ):
        if not _is_int(value) or value < 1:
            raise ValueError(
                f"choose_launch_config: {name} must be a positive integer, got {value!r}"
            )
    if num_sms is not None and (not _is_int(num_sms) or num_sms < 1):
        raise ValueError(f"choose_launch_config: num_sms must be None or positive, got {num_sms!r}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(
            f"choose_launch_config: dtype must be a torch floating dtype, got {dtype!r}"
        )
    element_bytes = dtype.itemsize
    tile = _TILE_BYTES // (head_dim * element_bytes)
    tile = min(128, max(16, tile))
    group_pad = _group_pad(q_heads // max(1, kv_heads))
    num_warps = 8 if group_pad * head_dim > 8192 else 4
    if num_sms is None:
        return LaunchConfig(tile_tokens=tile, num_splits=1, num_warps=num_warps, num_stages=1)

    programs = batch * kv_heads
    slots = num_sms * _PROGRAMS_PER_SM
    tiles = math.ceil(max_context / tile)
    splits = 1
    if programs < 2 * slots:
        splits = math.ceil(_TARGET_WAVES * slots / programs)
        splits = max(1, min(splits, tiles // _MIN_TILES_PER_SPLIT, MAX_SPLITS))
        # Whole tiles per split, with no split left empty.
        splits = math.ceil(tiles / math.ceil(tiles / splits))
    return LaunchConfig(tile_tokens=tile, num_splits=splits, num_warps=num_warps, num_stages=3)


@cache
def _num_sms(device_index: int) -> int:
    return int(torch.cuda.get_device_properties(device_index).multi_processor_count)


# --------------------------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_power_of_two(value: int) -> bool:
    return value >= 1 and value & (value - 1) == 0


def _group_pad(group: int) -> int:
    # tl.dot needs at least 16 rows on a GPU, and Triton tiles are powers of two.
    return max(16, 1 << (group - 1).bit_length())


def _check_splits(num_splits: object) -> int:
    if not _is_int(num_splits) or not 1 <= num_splits <= MAX_SPLITS:
        raise ValueError(
            "num_splits must be None (chosen from the shape) or an integer from 1 to "
            f"{MAX_SPLITS}, got {num_splits!r}"
        )
    return num_splits


@dataclass(frozen=True)
class _Shapes:
    batch: int
    q_heads: int
    kv_heads: int
    head_dim: int
    num_blocks: int
    block_size: int
    max_blocks: int


def _check_inputs(
    q: object,
    k_cache: object,
    v_cache: object,
    block_tables: object,
    seq_lens: object,
    scale: object,
    *,
    for_kernel: bool,
) -> _Shapes:
    """Check types, ranks, shapes, dtypes and devices (no values: those may live on a GPU)."""
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
    if not _is_power_of_two(block_size) or block_size > MAX_BLOCK_SIZE:
        raise ValueError(
            f"block_size (k_cache.shape[1]) must be a power of two from 1 to {MAX_BLOCK_SIZE}, "
            f"got {block_size}"
        )

    if q.dtype != k_cache.dtype or q.dtype != v_cache.dtype:
        raise TypeError(
            f"q, k_cache and v_cache must have the same dtype, got {q.dtype}, {k_cache.dtype} and "
            f"{v_cache.dtype}; convert them with .to(...) first"
        )
    allowed = KERNEL_DTYPES if for_kernel else (*KERNEL_DTYPES, torch.float64)
    if q.dtype not in allowed:
        where = "the Triton kernel" if for_kernel else "the reference"
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise TypeError(f"{where} takes q/k_cache/v_cache in {names}; got {q.dtype}")
    if block_tables.dtype != torch.int32:
        raise TypeError(
            f"block_tables must be int32, got {block_tables.dtype}; convert it with "
            ".to(torch.int32)"
        )
    if seq_lens.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"seq_lens must be int32 or int64, got {seq_lens.dtype}")
    if for_kernel and head_dim not in KERNEL_HEAD_DIMS:
        raise ValueError(
            f"the Triton kernel supports head_dim in {KERNEL_HEAD_DIMS}, got {head_dim}; pad the "
            "heads with zeros to the next supported size, or use the reference"
        )

    devices = {name: tensor.device for name, tensor in tensors.items()}
    if len(set(devices.values())) > 1:
        listed = ", ".join(f"{name} on {device}" for name, device in devices.items())
        raise ValueError(f"all tensors must be on one device, got {listed}")

    if scale is not None:
        if (
            isinstance(scale, bool)
            or not isinstance(scale, (int, float))
            or not math.isfinite(scale)
            or scale <= 0
        ):
            raise ValueError(
                f"scale must be None (1/sqrt(head_dim)) or a finite positive number, got {scale!r}"
            )
    return _Shapes(
        batch, q_heads, kv_heads, head_dim, num_blocks, block_size, block_tables.shape[1]
    )


def _check_values(block_tables: torch.Tensor, seq_lens: torch.Tensor, shapes: _Shapes) -> None:
    """Check seq_lens and the block ids each sequence uses. Reads the tensors (a sync on a GPU)."""
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
    shapes = _check_inputs(q, k_cache, v_cache, block_tables, seq_lens, scale, for_kernel=False)
    if num_splits is not None:
        _check_splits(num_splits)
    _check_values(block_tables, seq_lens, shapes)
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
    ``q``'s dtype. Inputs may be float32, float16 or bfloat16 (arithmetic is float32); head_dim one
    of 16, 32, 64, 128, 256; page size a power of two from 1 to 128; ``block_tables`` int32.

    * ``scale``: the softmax scale, default ``1/sqrt(head_dim)``;
    * ``num_splits``: force the number of programs per (sequence, KV head) (split-KV); by default
      :func:`choose_launch_config` decides;
    * ``config``: a whole :class:`LaunchConfig` instead of the automatic one (``num_splits``, if
      given, still overrides its split count);
    * ``validate``: also check ``seq_lens`` (1 … max_blocks × block_size) and the block ids each
      sequence uses (within the cache). Default: only for tensors on the CPU, where it is cheap; on
      a GPU the check reads the tensors back and waits for the device, so pass ``validate=True``
      while debugging. An out-of-range id that is not caught reads the wrong memory.

    Runs compiled on a GPU and in Triton's interpreter on a CPU (see :mod:`kvcourse.attention.backend`). In
    the interpreter, bfloat16 inputs are widened to float32 first (exactly) because the interpreter
    computes bfloat16 ``tl.dot`` wrongly. Where Triton is not installed it returns
    :func:`paged_decode_attention_reference`'s result. Raises ``TypeError`` or ``ValueError``
    saying what was wrong when the arguments do not fit.
    """
    shapes = _check_inputs(q, k_cache, v_cache, block_tables, seq_lens, scale, for_kernel=True)
    if num_splits is not None:
        _check_splits(num_splits)
    if config is not None and not isinstance(config, LaunchConfig):
        raise TypeError(f"config must be a LaunchConfig or None, got {type(config).__name__}")
    if validate is None:
        validate = q.device.type == "cpu"
    if validate:
        _check_values(block_tables, seq_lens, shapes)

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
            num_sms=None if interpreted else _num_sms(q.device.index or 0),
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
    shapes: _Shapes,
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
        GROUP_PAD=_group_pad(group),
        HEAD_DIM=shapes.head_dim,
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
            SPLITS_PAD=splits_pad,
            CHUNK=min(splits_pad, max(1, 4096 // shapes.head_dim)),
            num_warps=4,
        )
