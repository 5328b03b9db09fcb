"""KV-cache and compute sizing (§1, §9; exercises 1, 8 and 9).

Every function here is closed-form arithmetic on a :class:`~kvcourse.specs.ModelSpec`: how many
bytes of K and V one token leaves behind, how many tokens fit next to the weights on a GPU, how
many FLOPs it takes to recompute a token, and how long reading it back over a link would take
instead.

The FLOP model counts the dense matrix multiplications of one forward pass (2 FLOPs per
multiply-add): the Q/K/V/O projections, the MLP and the output head, plus attention's two matmuls
(QKᵀ and AV), which cost ``4 · layers · heads · head_dim`` FLOPs per token of context. Norms,
softmax and biases are left out: they are well under 1 % of the total for these models.
"""

from __future__ import annotations

from kvcourse._checks import check_count, check_fraction, check_positive_int, check_positive_number
from kvcourse.specs import GPUSpec, ModelSpec, dtype_bytes


def _check_model(model: object) -> ModelSpec:
    if not isinstance(model, ModelSpec):
        raise TypeError(f"expected a ModelSpec (e.g. kvcourse.specs.OPT_13B), got {model!r}")
    return model


def _as_bytes(elements: int, dtype: str) -> int:
    # Exact: every supported width is a whole number of bits and element counts here are even.
    return (elements * int(dtype_bytes(dtype) * 8)) // 8


def kv_bytes_per_token(model: ModelSpec, dtype: str | None = None) -> int:
    """Bytes of KV cache one token occupies: ``2 (K and V) × layers × KV heads × head_dim × bytes``.

    ``dtype`` overrides the model's own storage type (for example ``"fp8"`` for a quantized cache).
    OPT-13B in fp16 gives 819,200 B; LLaMA2-70B in bf16 (GQA, 8 KV heads) gives 327,680 B.
    """
    model = _check_model(model)
    elements = 2 * model.num_layers * model.num_kv_heads * model.head_dim
    return _as_bytes(elements, dtype or model.dtype)


def kv_bytes_per_request(model: ModelSpec, num_tokens: int, dtype: str | None = None) -> int:
    """Bytes of KV cache a request of ``num_tokens`` tokens (prompt plus output) occupies."""
    num_tokens = check_count("num_tokens", num_tokens)
    return num_tokens * kv_bytes_per_token(model, dtype)


def linear_params_per_layer(model: ModelSpec) -> int:
    """Weights in one transformer layer's matrix multiplications (attention projections and MLP)."""
    model = _check_model(model)
    h = model.hidden_size
    q_width = model.num_heads * model.head_dim
    kv_width = model.num_kv_heads * model.head_dim
    attention = h * q_width + 2 * h * kv_width + q_width * h
    mlp = (3 if model.gated_mlp else 2) * h * model.ffn_size
    return attention + mlp


def param_count(model: ModelSpec) -> int:
    """Parameters counted for memory: every layer's matmul weights plus the embedding matrices.

    Biases, norms and learned position embeddings are left out (≈0.1 % for these models). A model
    with tied embeddings stores its vocabulary matrix once; an untied one stores it twice.
    """
    model = _check_model(model)
    embeddings = (1 if model.tied_embeddings else 2) * model.vocab_size * model.hidden_size
    return model.num_layers * linear_params_per_layer(model) + embeddings


def weight_bytes(model: ModelSpec, dtype: str | None = None) -> int:
    """Bytes the model's weights occupy in ``dtype`` (default: the model's own type)."""
    return _as_bytes(param_count(model), dtype or model.dtype)


def kv_token_capacity(
    model: ModelSpec,
    gpu: GPUSpec,
    *,
    weights: int | None = None,
    activation_fraction: float = 0.1,
) -> int:
    """How many tokens' KV fit on one GPU after the weights and an activation reserve.

    ``activation_fraction`` of the GPU memory is kept for activations; ``weights`` defaults to
    :func:`weight_bytes`. OPT-13B on an A100-40GB gives 12,596 token slots. Returns 0 when the
    weights alone do not fit.
    """
    model = _check_model(model)
    if not isinstance(gpu, GPUSpec):
        raise TypeError(f"expected a GPUSpec (e.g. kvcourse.specs.A100_40GB), got {gpu!r}")
    if not isinstance(activation_fraction, (int, float)) or not 0 <= activation_fraction < 1:
        raise ValueError(f"activation_fraction must be in [0, 1), got {activation_fraction!r}")
    if weights is None:
        weights = weight_bytes(model)
    weights = check_count("weights", weights)
    usable = int(round(gpu.memory_bytes * (1 - activation_fraction))) - weights
    return max(usable, 0) // kv_bytes_per_token(model)


def max_concurrent_requests(
    model: ModelSpec,
    gpu: GPUSpec,
    tokens_per_request: int,
    *,
    weights: int | None = None,
    activation_fraction: float = 0.1,
) -> int:
    """How many requests of ``tokens_per_request`` tokens fit at once if each reserves its full KV.

    With OPT-13B on an A100-40GB: 26 GB of weights and nothing kept back gives 8 requests of 2048
    tokens; the computed weights with 10 % kept for activations give ⌊12596 / 2048⌋ = 6.
    """
    tokens_per_request = check_positive_int("tokens_per_request", tokens_per_request)
    slots = kv_token_capacity(model, gpu, weights=weights, activation_fraction=activation_fraction)
    return slots // tokens_per_request


def flops_per_token(model: ModelSpec, context_len: int = 0) -> float:
    """FLOPs to run one token through the model when it attends to ``context_len`` tokens.

    ``2 × (layer matmul weights + output head)`` for the linear layers, plus
    ``4 × layers × heads × head_dim × context_len`` for QKᵀ and AV. LLaMA2-70B: ≈137 GFLOP of
    linear layers; OPT-13B: ≈25.7 GFLOP.
    """
    model = _check_model(model)
    context_len = check_count("context_len", context_len)
    linear = (
        model.num_layers * linear_params_per_layer(model) + model.vocab_size * model.hidden_size
    )
    attention = 4 * model.num_layers * model.num_heads * model.head_dim * context_len
    return float(2 * linear + attention)


def prefill_flops(model: ModelSpec, num_tokens: int, cached_tokens: int = 0) -> float:
    """FLOPs to prefill ``num_tokens`` new tokens after ``cached_tokens`` already in the KV cache.

    Token ``i`` (1-based, counting the cached ones) attends to ``i`` tokens under the causal
    mask, so the attention term sums ``i`` over the new positions.
    """
    num_tokens = check_count("num_tokens", num_tokens)
    cached_tokens = check_count("cached_tokens", cached_tokens)
    linear = flops_per_token(model, 0)
    first, last = cached_tokens + 1, cached_tokens + num_tokens
    attended = (first + last) * num_tokens // 2
    per_context_token = flops_per_token(model, 1) - linear
    return num_tokens * linear + per_context_token * attended


def compute_seconds(
    flops: float, *, num_gpus: int = 1, peak_flops: float, utilization: float
) -> float:
    """Seconds of compute: ``flops`` executed on ``num_gpus`` GPUs running at ``utilization`` of
    their peak (what recomputing KV costs, once its FLOPs are counted).

    Exercise 8: 137 GFLOP on 8 A800s (312 TFLOP/s each) at 60 % of peak is ≈91 µs.
    """
    flops = check_positive_number("flops", flops)
    num_gpus = check_positive_int("num_gpus", num_gpus)
    peak_flops = check_positive_number("peak_flops", peak_flops)
    utilization = check_fraction("utilization", utilization)
    return flops / (num_gpus * peak_flops * utilization)


def transfer_seconds(num_bytes: float, bandwidth: float, *, latency: float = 0.0) -> float:
    """Seconds to move ``num_bytes`` over a link of ``bandwidth`` bytes/s with a fixed ``latency``.

    Exercise 8: one LLaMA2-70B token (327,680 B) over 100 GB/s RDMA is ≈3.3 µs; from a 6 GB/s SSD
    ≈54.6 µs.
    """
    if isinstance(num_bytes, bool) or not isinstance(num_bytes, (int, float)) or num_bytes < 0:
        raise ValueError(f"num_bytes must be a non-negative number, got {num_bytes!r}")
    bandwidth = check_positive_number("bandwidth", bandwidth)
    if isinstance(latency, bool) or not isinstance(latency, (int, float)) or latency < 0:
        raise ValueError(f"latency must be a non-negative number of seconds, got {latency!r}")
    return latency + num_bytes / bandwidth


def kv_bytes_per_flop(model: ModelSpec, context_len: int = 0) -> float:
    """KV bytes stored per FLOP spent computing a token, the FLOPs counted by
    :func:`flops_per_token` (the ratio of exercise 9).

    Reading a token back costs ∝ bytes / bandwidth and recomputing it ∝ FLOPs / compute, so the
    smaller this ratio, the more storing KV on slow tiers pays off. Exercise 9's worked answer
    divides by the lecture's FLOP counts instead (137 GFLOP for LLaMA2-70B, 26.2 for OPT-13B,
    whose count here is 2 % lower); the ratio between the two models rounds to 13 either way.
    """
    return kv_bytes_per_token(model) / flops_per_token(model, context_len)
