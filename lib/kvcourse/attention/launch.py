"""How the paged decode kernel is launched (§4): tile size, split-KV, warps and pipeline stages.

:func:`choose_launch_config` reads the shape of one decode step (batch, heads, head size, longest
context, element type, the GPU's multiprocessor count) and returns a :class:`LaunchConfig`. It is a
small fixed rule, not an autotuner, so it works in Triton's interpreter too and its choices can be
read and tested on a laptop. The padding rules the kernel itself uses (:func:`group_pad`,
:func:`head_dim_pad`) live here as well, because the launch rule sizes its tiles with them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import torch

from kvcourse._checks import check_positive_int, is_int

#: Most programs one sequence's context may be split across.
MAX_SPLITS = 256

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


def group_pad(group: int) -> int:
    """Rows of the kernel's query matrix for ``group`` query heads per KV head: the next power of
    two, at least 16 (``tl.dot`` needs 16 rows on a GPU; the extra rows are masked)."""
    return max(16, 1 << (group - 1).bit_length())


def head_dim_pad(head_dim: int) -> int:
    """Columns the kernel computes with for a head of ``head_dim``: the next power of two, at least
    16 (Triton tiles are powers of two). A head of 80 is computed as 128 wide, its last 48 columns
    masked: loaded as 0, never stored."""
    return max(16, 1 << (head_dim - 1).bit_length())


def check_splits(num_splits: object) -> int:
    """``num_splits`` as an int from 1 to :data:`MAX_SPLITS`; ``ValueError`` otherwise."""
    if not is_int(num_splits) or not 1 <= num_splits <= MAX_SPLITS:
        raise ValueError(
            "num_splits must be None (chosen from the shape) or an integer from 1 to "
            f"{MAX_SPLITS}, got {num_splits!r}"
        )
    return int(num_splits)


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
        if not is_int(self.tile_tokens) or self.tile_tokens not in (16, 32, 64, 128):
            raise ValueError(
                f"LaunchConfig: tile_tokens must be 16, 32, 64 or 128, got {self.tile_tokens!r}"
            )
        check_splits(self.num_splits)
        if not is_int(self.num_warps) or self.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError(
                f"LaunchConfig: num_warps must be 1, 2, 4, 8 or 16, got {self.num_warps!r}"
            )
        if not is_int(self.num_stages) or not 1 <= self.num_stages <= 8:
            raise ValueError(
                f"LaunchConfig: num_stages must be an integer from 1 to 8, got {self.num_stages!r}"
            )


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
      tokens; with 3 pipeline stages that lets 3 programs share an SM. A head that is not a power
      of two counts as wide as the kernel computes it (:func:`head_dim_pad`: 80 as 128);
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
        if not is_int(value) or value < 1:
            raise ValueError(
                f"choose_launch_config: {name} must be a positive integer, got {value!r}"
            )
    if num_sms is not None:
        check_positive_int("choose_launch_config: num_sms", num_sms, "None or the SM count")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(
            f"choose_launch_config: dtype must be a torch floating dtype, got {dtype!r}"
        )
    width = head_dim_pad(head_dim)
    tile = _TILE_BYTES // (width * dtype.itemsize)
    tile = min(128, max(16, tile))
    rows = group_pad(q_heads // max(1, kv_heads))
    num_warps = 8 if rows * width > 8192 else 4
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
def num_sms(device_index: int) -> int:
    """Streaming multiprocessors of CUDA device ``device_index`` (asked once per device)."""
    return int(torch.cuda.get_device_properties(device_index).multi_processor_count)
