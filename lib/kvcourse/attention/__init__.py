"""Attention over a KV cache: the reference maths, the paged walk and the Triton kernel (§4).

* :mod:`kvcourse.attention.blockwise`: contiguous attention and the block-by-block walk with an
  online softmax (numpy or torch);
* :mod:`kvcourse.attention.paged_inputs`: the inputs of paged decode attention, what the kernel
  accepts (element types, page sizes, head sizes) and the checks;
* :mod:`kvcourse.attention.launch`: how the kernel is launched (tile, split-KV, warps, stages);
* :mod:`kvcourse.attention.paged_decode`: the checked entry point of paged decode attention and
  its reference;
* :mod:`kvcourse.attention.triton_paged_decode`: the Triton kernels themselves (imported only
  through the entry point, after :mod:`kvcourse.attention.backend` has chosen a mode);
* :mod:`kvcourse.attention.backend`: which mode runs here (compiled, interpreted, reference);
* :mod:`kvcourse.attention.cache_decode`: a ragged batch through the kernel, straight from a paged
  KV cache's own blocks and block tables (what the tiny model's ``attention="kernel"`` runs).
"""

from __future__ import annotations

from kvcourse.attention.backend import kernel_device
from kvcourse.attention.blockwise import (
    Array,
    BlockStep,
    OnlineSoftmaxState,
    block_scores,
    blockwise_attention,
    blockwise_decode_attention,
    contiguous_attention,
    finish_online_softmax,
    init_online_softmax,
    iter_blockwise_attention,
    online_softmax_step,
)
from kvcourse.attention.cache_decode import cache_decode_attention, check_cache_for_kernel
from kvcourse.attention.launch import (
    MAX_SPLITS,
    LaunchConfig,
    choose_launch_config,
    head_dim_pad,
)
from kvcourse.attention.paged_decode import (
    paged_decode_attention,
    paged_decode_attention_reference,
)
from kvcourse.attention.paged_inputs import (
    KERNEL_DTYPES,
    KERNEL_HEAD_DIMS,
    MAX_BLOCK_SIZE,
    MAX_HEAD_DIM,
    check_kernel_support,
)

__all__ = [
    "Array",
    "OnlineSoftmaxState",
    "BlockStep",
    "contiguous_attention",
    "init_online_softmax",
    "block_scores",
    "online_softmax_step",
    "finish_online_softmax",
    "iter_blockwise_attention",
    "blockwise_attention",
    "blockwise_decode_attention",
    "KERNEL_DTYPES",
    "KERNEL_HEAD_DIMS",
    "MAX_HEAD_DIM",
    "MAX_BLOCK_SIZE",
    "MAX_SPLITS",
    "check_kernel_support",
    "head_dim_pad",
    "LaunchConfig",
    "choose_launch_config",
    "kernel_device",
    "paged_decode_attention_reference",
    "paged_decode_attention",
    "check_cache_for_kernel",
    "cache_decode_attention",
]
