"""Attention over a KV cache: the reference maths, the paged walk and the Triton kernel (§4).

* :mod:`kvcourse.attention.blockwise`: contiguous attention and the block-by-block walk with an
  online softmax (numpy or torch);
* :mod:`kvcourse.attention.paged_decode`: the checked entry point of paged decode attention, its
  launch rule and its reference;
* :mod:`kvcourse.attention.triton_paged_decode`: the Triton kernels themselves (imported only
  through the entry point, after :mod:`kvcourse.attention.backend` has chosen a mode);
* :mod:`kvcourse.attention.backend`: which mode runs here (compiled, interpreted, reference).
"""

from __future__ import annotations

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
from kvcourse.attention.paged_decode import (
    KERNEL_DTYPES,
    KERNEL_HEAD_DIMS,
    MAX_BLOCK_SIZE,
    MAX_SPLITS,
    LaunchConfig,
    choose_launch_config,
    paged_decode_attention,
    paged_decode_attention_reference,
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
    "MAX_BLOCK_SIZE",
    "MAX_SPLITS",
    "LaunchConfig",
    "choose_launch_config",
    "paged_decode_attention_reference",
    "paged_decode_attention",
]
