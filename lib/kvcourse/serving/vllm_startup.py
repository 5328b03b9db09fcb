"""What vLLM logs at start-up: the KV cache it can hold, in tokens, and how many requests of
``max_model_len`` tokens fit at once — from the course's sizing, with vLLM's memory accounting.

Read at vLLM v1, release v0.33.0: ``Worker.determine_available_memory``
(``vllm/v1/worker/gpu_worker.py``) gives the KV cache what is left of the memory vLLM may use,

``available = total × gpu_memory_utilization − weights − peak activation − non-torch memory
− CUDA graphs``,

where it *measures* the last three in a profiling run (a dummy forward pass of
``max_num_batched_tokens`` tokens). ``vllm/v1/core/kv_cache_utils.py`` then cuts ``available``
into blocks of ``block_size`` tokens, each token holding ``2 × layers × kv_heads × head_dim``
values (K and V), and logs ``GPU KV cache size: N tokens`` and ``Maximum concurrency for
max_model_len tokens per request: N / max_model_len``.

The course cannot profile, so :func:`vllm_kv_capacity` *estimates* what vLLM measures, and says so:

* **weights**: :func:`~kvcourse.sizing.weight_bytes` in the serving type (exact for a dense model);
* **peak activation**: the profiling pass's largest live tensors, taken as the MLP's gate and up
  projections and four hidden-sized buffers for each of ``profile_tokens`` tokens in 2 bytes, plus
  the sampler's fp32 logits for ``max_num_seqs`` sequences (an estimate; vLLM logs what it
  measured);
* **non-torch memory** and **CUDA graphs**: fixed allowances (``non_torch_bytes``,
  ``cuda_graph_bytes``), of the size vLLM reports for a model this size; a real log gives its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcourse._checks import check_count, check_fraction, check_positive_int
from kvcourse.sizing import kv_bytes_per_token, weight_bytes
from kvcourse.specs import GPUSpec, ModelSpec

__all__ = ["VllmStartup", "vllm_kv_capacity"]


@dataclass(frozen=True)
class VllmStartup:
    """vLLM's memory accounting at start-up, in bytes, and what it logs: ``kv_tokens`` (``GPU KV
    cache size``, whole blocks) and ``max_concurrency`` (``kv_tokens / max_model_len``)."""

    total_bytes: int
    gpu_memory_utilization: float
    requested_bytes: int
    weight_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    kv_cache_bytes: int
    kv_bytes_per_token: int
    block_size: int
    num_blocks: int
    kv_tokens: int
    max_model_len: int
    max_concurrency: float

    def log_line(self) -> str:
        """The two figures as vLLM v0.33.0 logs them (``update_kv_cache_capacity``)."""
        return (
            f"GPU KV cache size: {self.kv_tokens:,} tokens, Maximum concurrency for "
            f"{self.max_model_len:,} tokens per request: {self.max_concurrency:.2f}x"
        )


def vllm_kv_capacity(
    model: ModelSpec,
    gpu: GPUSpec,
    *,
    max_model_len: int = 4096,
    gpu_memory_utilization: float = 0.9,
    dtype: str = "fp16",
    block_size: int = 16,
    profile_tokens: int = 2048,
    max_num_seqs: int = 256,
    non_torch_bytes: int = 400 * 10**6,
    cuda_graph_bytes: int = 500 * 10**6,
) -> VllmStartup:
    """vLLM's start-up figures for ``model`` on ``gpu`` (see the module docstring for what is
    computed and what estimated). ``gpu_memory_utilization`` is vLLM's flag (0.9 by default);
    ``profile_tokens`` the profiling pass's tokens (``max_num_batched_tokens``);
    ``max_num_seqs`` the sequences whose logits it samples. Raises ``ValueError`` when the
    weights and reserves leave no room for one block."""
    if not isinstance(model, ModelSpec):
        raise TypeError(
            f"model must be a ModelSpec (e.g. kvcourse.specs.LLAMA31_8B), got {model!r}"
        )
    if not isinstance(gpu, GPUSpec):
        raise TypeError(f"gpu must be a GPUSpec (e.g. kvcourse.specs.A10), got {gpu!r}")
    max_model_len = check_positive_int("max_model_len", max_model_len, "e.g. 4096")
    util = check_fraction("gpu_memory_utilization", gpu_memory_utilization, "0.9")
    block_size = check_positive_int("block_size", block_size, "e.g. 16")
    profile_tokens = check_positive_int("profile_tokens", profile_tokens, "e.g. 2048")
    max_num_seqs = check_positive_int("max_num_seqs", max_num_seqs, "e.g. 256")
    non_torch = check_count("non_torch_bytes", non_torch_bytes)
    graphs = check_count("cuda_graph_bytes", cuda_graph_bytes)
    requested = int(gpu.memory_bytes * util)
    weights = weight_bytes(model, dtype)
    activation = (
        profile_tokens * (2 * model.ffn_size + 4 * model.hidden_size) * 2
        + max_num_seqs * model.vocab_size * 4
    )
    per_token = kv_bytes_per_token(model, dtype)
    available = requested - weights - activation - non_torch - graphs
    num_blocks = max(available, 0) // (per_token * block_size)
    if num_blocks == 0:
        raise ValueError(
            f"{model.name} on {gpu.name} at gpu_memory_utilization={util:g}: {requested:,} bytes "
            f"requested, {weights:,} of weights and {activation + non_torch + graphs:,} of "
            f"reserves leave no room for one KV block; raise gpu_memory_utilization or use a "
            f"larger GPU"
        )
    kv_tokens = num_blocks * block_size
    return VllmStartup(
        total_bytes=gpu.memory_bytes,
        gpu_memory_utilization=util,
        requested_bytes=requested,
        weight_bytes=weights,
        activation_bytes=activation,
        non_torch_bytes=non_torch,
        cuda_graph_bytes=graphs,
        kv_cache_bytes=available,
        kv_bytes_per_token=per_token,
        block_size=block_size,
        num_blocks=num_blocks,
        kv_tokens=kv_tokens,
        max_model_len=max_model_len,
        max_concurrency=kv_tokens / max_model_len,
    )
