"""Model and hardware specifications used throughout the course.

A :class:`ModelSpec` holds just the shape numbers that decide how large a model's KV cache is and
how many FLOPs one token costs; a :class:`GPUSpec` holds the memory size, peak throughput and
bandwidth of an accelerator. The numbers are the published configurations of each model and data
sheet.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcourse._checks import check_positive_int, check_positive_number

#: Storage width of each element type, in bits. KV caches are usually stored in the model's
#: 16-bit type; the narrower types appear in §10 (quantized KV).
DTYPE_BITS: dict[str, int] = {
    "fp32": 32,
    "fp16": 16,
    "bf16": 16,
    "fp8": 8,
    "int8": 8,
    "int4": 4,
}


def dtype_bytes(dtype: str) -> float:
    """Bytes one element of ``dtype`` occupies (0.5 for int4).

    Raises ``ValueError`` naming the known types when ``dtype`` is not one of them.
    """
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        known = ", ".join(sorted(DTYPE_BITS))
        raise ValueError(f"unknown dtype {dtype!r}; use one of: {known}")
    return DTYPE_BITS[dtype] / 8


@dataclass(frozen=True)
class ModelSpec:
    """The shape of a decoder-only transformer, as far as KV-cache sizing needs it.

    ``num_kv_heads`` equals ``num_heads`` for multi-head attention (MHA) and is smaller for
    grouped-query attention (GQA). ``gated_mlp`` marks a SwiGLU feed-forward block (three weight
    matrices instead of two); ``tied_embeddings`` marks a model whose output projection reuses the
    input embedding matrix.
    """

    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    ffn_size: int
    vocab_size: int
    gated_mlp: bool
    tied_embeddings: bool
    dtype: str = "fp16"
    max_context: int = 2048

    def __post_init__(self) -> None:
        owner = f"ModelSpec({self.name!r})"
        for field in (
            "num_layers",
            "hidden_size",
            "num_heads",
            "num_kv_heads",
            "head_dim",
            "ffn_size",
            "vocab_size",
            "max_context",
        ):
            check_positive_int(f"{owner}: {field}", getattr(self, field))
        if self.num_heads % self.num_kv_heads != 0:
            raise ValueError(
                f"{owner}: num_heads ({self.num_heads}) must be a multiple of num_kv_heads "
                f"({self.num_kv_heads}) so each KV head serves a whole group of query heads"
            )
        dtype_bytes(self.dtype)  # raises for an unknown dtype

    @property
    def attention_kind(self) -> str:
        """'MHA' when every query head has its own KV head, 'MQA' for one KV head, else 'GQA'."""
        if self.num_kv_heads == self.num_heads:
            return "MHA"
        return "MQA" if self.num_kv_heads == 1 else "GQA"


@dataclass(frozen=True)
class GPUSpec:
    """An accelerator: memory in bytes, dense 16-bit peak in FLOP/s, HBM bandwidth in bytes/s."""

    name: str
    memory_bytes: int
    peak_flops: float
    memory_bandwidth: float

    def __post_init__(self) -> None:
        owner = f"GPUSpec({self.name!r})"
        check_positive_int(f"{owner}: memory_bytes", self.memory_bytes)
        check_positive_number(f"{owner}: peak_flops", self.peak_flops)
        check_positive_number(f"{owner}: memory_bandwidth", self.memory_bandwidth)


OPT_13B = ModelSpec(
    name="OPT-13B",
    num_layers=40,
    hidden_size=5120,
    num_heads=40,
    num_kv_heads=40,
    head_dim=128,
    ffn_size=20480,
    vocab_size=50272,
    gated_mlp=False,
    tied_embeddings=True,
    dtype="fp16",
    max_context=2048,
)

LLAMA2_70B = ModelSpec(
    name="LLaMA2-70B",
    num_layers=80,
    hidden_size=8192,
    num_heads=64,
    num_kv_heads=8,
    head_dim=128,
    ffn_size=28672,
    vocab_size=32000,
    gated_mlp=True,
    tied_embeddings=False,
    dtype="bf16",
    max_context=4096,
)

LLAMA31_8B = ModelSpec(
    name="Llama-3.1-8B",
    num_layers=32,
    hidden_size=4096,
    num_heads=32,
    num_kv_heads=8,
    head_dim=128,
    ffn_size=14336,
    vocab_size=128256,
    gated_mlp=True,
    tied_embeddings=False,
    dtype="bf16",
    max_context=131072,
)

LLAMA31_70B = ModelSpec(
    name="Llama-3.1-70B",
    num_layers=80,
    hidden_size=8192,
    num_heads=64,
    num_kv_heads=8,
    head_dim=128,
    ffn_size=28672,
    vocab_size=128256,
    gated_mlp=True,
    tied_embeddings=False,
    dtype="bf16",
    max_context=131072,
)

#: The models the course sizes, by name.
MODELS: dict[str, ModelSpec] = {m.name: m for m in (OPT_13B, LLAMA2_70B, LLAMA31_8B, LLAMA31_70B)}

# Decimal gigabytes, as on the data sheets and in the vLLM paper.
A100_40GB = GPUSpec(
    "A100-40GB", memory_bytes=40 * 10**9, peak_flops=312e12, memory_bandwidth=1.555e12
)
A100_80GB = GPUSpec(
    "A100-80GB", memory_bytes=80 * 10**9, peak_flops=312e12, memory_bandwidth=2.039e12
)
A800_80GB = GPUSpec(
    "A800-80GB", memory_bytes=80 * 10**9, peak_flops=312e12, memory_bandwidth=2.039e12
)
H200 = GPUSpec("H200", memory_bytes=141 * 10**9, peak_flops=989e12, memory_bandwidth=4.8e12)
# NVIDIA A10 data sheet: 24 GB GDDR6 at 600 GB/s, 125 TFLOPS dense FP16 on the tensor cores (the
# 250 it also quotes is with sparsity). The reading guide's §10 experiment runs on one.
A10 = GPUSpec("A10", memory_bytes=24 * 10**9, peak_flops=125e12, memory_bandwidth=600e9)

#: The accelerators the course refers to, by name.
GPUS: dict[str, GPUSpec] = {g.name: g for g in (A100_40GB, A100_80GB, A800_80GB, H200, A10)}


def get_model(name: str) -> ModelSpec:
    """Look a model up by its name (e.g. ``"OPT-13B"``); raises ``KeyError`` listing the names."""
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known models: {', '.join(MODELS)}") from None
