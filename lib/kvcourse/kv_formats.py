"""Making the KV cache itself smaller (§10): attention layouts, quantized formats and token windows.

The methods of §3–§9 change where KV lives and how often it is computed, never what it holds.
The ones here shrink the KV itself and may change the model's output:

* an :class:`AttentionLayout` says what one layer caches per token: ``kv_heads`` key and value
  heads of ``head_dim`` (MHA, GQA, MQA), or one compressed latent of ``latent_dim`` plus a
  decoupled RoPE key of ``rope_dim`` (DeepSeek's MLA);
* a :class:`KVFormat` says how many bits one cached element takes, counting the scale (and zero
  point) that group-wise quantization stores once per ``group_size`` elements;
* :func:`sink_window_tokens` and :func:`sink_window_blocks` count what a StreamingLLM-style
  rule keeps (a few attention-sink tokens and a recent window), token by token and in whole
  paged blocks, which are freed only when every token in them has left the window.

Bytes per token are ``layers × elements per layer × effective bits / 8``: with the model's own
layout and FP16 they equal :func:`~kvcourse.sizing.kv_bytes_per_token` (OPT-13B: 819,200 B).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from kvcourse._checks import ceil_div, check_count, check_positive_int
from kvcourse.sizing import weight_bytes
from kvcourse.specs import GPUSpec, ModelSpec

__all__ = [
    "DEEPSEEK_V3_LAYERS",
    "DEEPSEEK_V3_MHA",
    "DEEPSEEK_V3_MLA",
    "FP16",
    "FP8",
    "INT4_G64",
    "INT8_G128",
    "KV_FORMATS",
    "AttentionLayout",
    "KVFormat",
    "attention_layouts",
    "effective_bits",
    "kv_block_bytes_layout",
    "kv_bytes_per_token_layout",
    "layout_bytes_per_token",
    "model_layout",
    "requests_that_fit",
    "sink_window_blocks",
    "sink_window_kept_blocks",
    "sink_window_tokens",
]


@dataclass(frozen=True)
class AttentionLayout:
    """What one attention layer caches for one token: ``kv_heads`` pairs of key and value heads
    of ``head_dim`` elements each, and/or a ``latent_dim`` latent plus a ``rope_dim`` RoPE key.

    MHA, GQA and MQA differ only in ``kv_heads`` (all query heads, a group's worth, one); MLA
    caches no per-head K or V (``kv_heads=0``) but one latent vector from which every head's K
    and V are projected back, plus the small position-carrying key that cannot be compressed.
    """

    name: str
    kv_heads: int = 0
    head_dim: int = 0
    latent_dim: int = 0
    rope_dim: int = 0

    def __post_init__(self) -> None:
        owner = f"AttentionLayout({self.name!r})"
        for field in ("kv_heads", "head_dim", "latent_dim", "rope_dim"):
            check_count(f"{owner}: {field}", getattr(self, field))
        if (self.kv_heads == 0) != (self.head_dim == 0):
            raise ValueError(
                f"{owner}: kv_heads ({self.kv_heads}) and head_dim ({self.head_dim}) must be both "
                f"positive (cached K and V heads) or both 0 (a latent-only layout such as MLA)"
            )
        if self.elements_per_layer == 0:
            raise ValueError(
                f"{owner} caches nothing; give kv_heads and head_dim (MHA/GQA/MQA) or latent_dim "
                f"(MLA)"
            )

    @property
    def elements_per_layer(self) -> int:
        """Cached elements per token and layer: ``2 × kv_heads × head_dim + latent + rope``."""
        return 2 * self.kv_heads * self.head_dim + self.latent_dim + self.rope_dim


@dataclass(frozen=True)
class KVFormat:
    """How cached elements are stored: ``bits`` per value, and for group-wise quantization one
    ``scale_bits`` scale (and, with ``zero_point``, one zero point as well) per ``group_size``
    values; ``group_size=None`` means no per-group metadata (FP16, or FP8 with one scale per
    tensor, which is negligible)."""

    name: str
    bits: int
    group_size: int | None = None
    scale_bits: int = 16
    zero_point: bool = False

    def __post_init__(self) -> None:
        owner = f"KVFormat({self.name!r})"
        check_positive_int(f"{owner}: bits", self.bits, "e.g. 8 or 4")
        check_positive_int(f"{owner}: scale_bits", self.scale_bits, "e.g. 16 (an fp16 scale)")
        if self.group_size is not None:
            check_positive_int(f"{owner}: group_size", self.group_size, "e.g. 64, or None")
        if not isinstance(self.zero_point, bool):
            raise TypeError(f"{owner}: zero_point must be True or False, got {self.zero_point!r}")
        if self.zero_point and self.group_size is None:
            raise ValueError(
                f"{owner}: a zero point is stored per group; give group_size (e.g. 64) as well"
            )


FP16 = KVFormat("FP16", 16)
FP8 = KVFormat("FP8", 8)  # E4M3 with one scale per tensor
INT8_G128 = KVFormat("INT8 g128", 8, group_size=128)  # symmetric: a scale per group
INT4_G64 = KVFormat("INT4 g64", 4, group_size=64, zero_point=True)  # KIVI-style scale + zero
#: The formats §10 compares, widest first.
KV_FORMATS: tuple[KVFormat, ...] = (FP16, FP8, INT8_G128, INT4_G64)

#: DeepSeek-V3 (technical report, arXiv 2412.19437, and its config.json): 61 layers, 128 heads;
#: MLA caches a latent of kv_lora_rank = 512 and a RoPE key of qk_rope_head_dim = 64.
DEEPSEEK_V3_LAYERS = 61
DEEPSEEK_V3_MLA = AttentionLayout("MLA", latent_dim=512, rope_dim=64)
#: The MHA the DeepSeek-V2/V3 papers compare MLA with: K and V for all 128 heads of 128.
DEEPSEEK_V3_MHA = AttentionLayout("MHA", kv_heads=128, head_dim=128)


def _exact_bits(fmt: KVFormat) -> Fraction:
    if not isinstance(fmt, KVFormat):
        raise TypeError(f"expected a KVFormat (e.g. kvcourse.kv_formats.FP8), got {fmt!r}")
    if fmt.group_size is None:
        return Fraction(fmt.bits)
    metadata = fmt.scale_bits * (2 if fmt.zero_point else 1)
    return fmt.bits + Fraction(metadata, fmt.group_size)


def effective_bits(fmt: KVFormat) -> float:
    """Bits one cached element really costs: its own bits plus its share of the group's scale
    (and zero point). INT4 in groups of 64 with an fp16 scale and zero point: 4 + 32/64 = 4.5."""
    return float(_exact_bits(fmt))


def _check_layout(layout: object) -> AttentionLayout:
    if not isinstance(layout, AttentionLayout):
        raise TypeError(f"expected an AttentionLayout (e.g. model_layout(OPT_13B)), got {layout!r}")
    return layout


def _check_model(model: object) -> ModelSpec:
    if not isinstance(model, ModelSpec):
        raise TypeError(f"expected a ModelSpec (e.g. kvcourse.specs.OPT_13B), got {model!r}")
    return model


def layout_bytes_per_token(num_layers: int, layout: AttentionLayout, fmt: KVFormat = FP16) -> float:
    """Bytes of KV one token leaves in ``num_layers`` layers of ``layout`` stored as ``fmt``:
    ``layers × elements per layer × effective bits / 8`` (DeepSeek-V3's MLA in FP16: 61 × 576 ×
    2 = 70,272 B)."""
    num_layers = check_positive_int("num_layers", num_layers)
    layout = _check_layout(layout)
    return float(num_layers * layout.elements_per_layer * _exact_bits(fmt) / 8)


def kv_bytes_per_token_layout(
    model: ModelSpec, layout: AttentionLayout | None = None, fmt: KVFormat = FP16
) -> float:
    """Bytes of KV per token for ``model``'s layers with attention ``layout`` (default: the
    model's own) stored as ``fmt``. OPT-13B in FP16: 819,200 B; LLaMA2-70B: 327,680 B."""
    model = _check_model(model)
    layout = model_layout(model) if layout is None else layout
    return layout_bytes_per_token(model.num_layers, layout, fmt)


def model_layout(model: ModelSpec) -> AttentionLayout:
    """The layout ``model`` ships with: its own KV heads of its head dimension, named by
    :attr:`~kvcourse.specs.ModelSpec.attention_kind` (OPT-13B: MHA, 40 × 128)."""
    model = _check_model(model)
    return AttentionLayout(model.attention_kind, model.num_kv_heads, model.head_dim)


def attention_layouts(
    model: ModelSpec, *, gqa_heads: int | None = None, latent_dim: int = 512, rope_dim: int = 64
) -> tuple[AttentionLayout, ...]:
    """The same model's layers under MHA (a KV head per query head), GQA (``gqa_heads``, default
    the model's own if it is GQA, else 8), MQA (one KV head) and MLA (one ``latent_dim`` latent
    plus a ``rope_dim`` RoPE key: DeepSeek-V3's 512 and 64, which are also DeepSeek-V2's rule
    4·d_h and d_h/2 for d_h = 128)."""
    model = _check_model(model)
    if gqa_heads is None:
        gqa_heads = model.num_kv_heads if model.attention_kind == "GQA" else 8
    gqa_heads = check_positive_int("gqa_heads", gqa_heads, "e.g. 8")
    heads = model.num_heads
    if not 1 < gqa_heads < heads or heads % gqa_heads:
        raise ValueError(
            f"gqa_heads must divide {model.name}'s {heads} query heads and lie between 2 and "
            f"{heads // 2} (1 KV head is MQA, {heads} is MHA); got {gqa_heads}"
        )
    latent_dim = check_positive_int("latent_dim", latent_dim, "e.g. 512")
    rope_dim = check_count("rope_dim", rope_dim)
    d = model.head_dim
    return (
        AttentionLayout("MHA", heads, d),
        AttentionLayout("GQA", gqa_heads, d),
        AttentionLayout("MQA", 1, d),
        AttentionLayout("MLA", latent_dim=latent_dim, rope_dim=rope_dim),
    )


def kv_block_bytes_layout(
    model: ModelSpec,
    layout: AttentionLayout | None = None,
    fmt: KVFormat = FP16,
    block_size: int = 16,
) -> float:
    """Bytes of one paged block of ``block_size`` tokens under ``layout`` and ``fmt``: what a
    block pool or a prefix cache stores per block (Llama-3.1-8B, GQA, FP16, 16 tokens: 2 MiB)."""
    block_size = check_positive_int("block_size", block_size, "e.g. 16")
    return block_size * kv_bytes_per_token_layout(model, layout, fmt)


def requests_that_fit(
    model: ModelSpec,
    gpu: GPUSpec,
    layout: AttentionLayout | None = None,
    fmt: KVFormat = FP16,
    *,
    tokens_per_request: int = 4096,
    weights: int | None = None,
    activation_fraction: float = 0.1,
) -> int:
    """How many requests of ``tokens_per_request`` tokens fit at once on ``gpu`` beside the
    weights (16-bit, :func:`~kvcourse.sizing.weight_bytes`) and an activation reserve, when KV
    uses ``layout`` and ``fmt``; with the model's own layout in FP16 this is
    :func:`~kvcourse.sizing.max_concurrent_requests`."""
    model = _check_model(model)
    if not isinstance(gpu, GPUSpec):
        raise TypeError(f"expected a GPUSpec (e.g. kvcourse.specs.A100_80GB), got {gpu!r}")
    tokens_per_request = check_positive_int("tokens_per_request", tokens_per_request, "e.g. 4096")
    if isinstance(activation_fraction, bool) or not isinstance(activation_fraction, (int, float)):
        raise TypeError(f"activation_fraction must be a number, got {activation_fraction!r}")
    if not 0 <= activation_fraction < 1:
        raise ValueError(f"activation_fraction must be in [0, 1), got {activation_fraction!r}")
    weights = weight_bytes(model) if weights is None else check_count("weights", weights)
    usable = int(round(gpu.memory_bytes * (1 - activation_fraction))) - weights
    per_request = tokens_per_request * Fraction(kv_bytes_per_token_layout(model, layout, fmt))
    return int(max(usable, 0) // per_request)


def _check_window(num_tokens: int, sinks: int, window: int) -> tuple[int, int, int]:
    return (
        check_count("num_tokens", num_tokens),
        check_count("sinks", sinks),
        check_positive_int("window", window, "e.g. 1024 recent tokens"),
    )


def sink_window_tokens(num_tokens: int, sinks: int = 4, window: int = 1024) -> int:
    """Tokens whose KV a StreamingLLM-style rule keeps after ``num_tokens``: the first
    ``sinks`` (attention sinks) and the last ``window``, all of them while there are no more
    than ``sinks + window`` (a full cache keeps ``num_tokens``)."""
    num_tokens, sinks, window = _check_window(num_tokens, sinks, window)
    return min(num_tokens, sinks + window)


def _kept_ranges(num_tokens: int, sinks: int, window: int, block_size: int) -> list[range]:
    num_tokens, sinks, window = _check_window(num_tokens, sinks, window)
    block_size = check_positive_int("block_size", block_size, "e.g. 16")
    used = ceil_div(num_tokens, block_size)  # logical blocks written so far
    sink_blocks = min(ceil_div(sinks, block_size), used)
    # The block holding the oldest token still in the window; every later one is kept too.
    first_window = max(num_tokens - window, 0) // block_size
    start = max(first_window, sink_blocks)
    return [range(sink_blocks), range(start, used)]


def sink_window_blocks(
    num_tokens: int, sinks: int = 4, window: int = 1024, block_size: int = 16
) -> int:
    """Paged blocks of ``block_size`` tokens the sink-and-window rule holds after
    ``num_tokens``: a block is freed, whole, only once none of its tokens is a sink or in the
    window, so the sinks take whole blocks and the window holds between ``window`` and
    ``window + block_size − 1`` tokens' worth (4 sinks, 1,024, 16: 65 or 66 blocks when full)."""
    return sum(len(r) for r in _kept_ranges(num_tokens, sinks, window, block_size))


def sink_window_kept_blocks(
    num_tokens: int, sinks: int = 4, window: int = 1024, block_size: int = 16
) -> tuple[int, ...]:
    """The logical block numbers (0 = the first block of the sequence) that the sink-and-window
    rule still holds after ``num_tokens``; the ones missing between them have been freed."""
    return tuple(b for r in _kept_ranges(num_tokens, sinks, window, block_size) for b in r)
