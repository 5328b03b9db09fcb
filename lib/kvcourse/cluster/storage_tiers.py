"""Storage for compute (§9, Exercise 8): is reading a token's KV back from a memory tier faster
than recomputing it?

Mooncake keeps KV blocks in a cluster-wide pool of CPU DRAM and SSD and reads a prefix back
instead of prefilling it again. Whether that pays depends on two per-token times:

* **read**: the token's KV bytes (:func:`~kvcourse.sizing.kv_bytes_per_token`) over the tier's
  bandwidth (:func:`~kvcourse.sizing.transfer_seconds`);
* **recompute**: the token's FLOPs (:func:`~kvcourse.sizing.flops_per_token`, or the mean over a
  whole causal prefill, :func:`~kvcourse.sizing.prefill_flops` ``/ n``) on one prefill node,
  8 × A800-80GB at **60 % of peak** (the lecture's Exercise 8 constant).

The tiers are node totals, each stated as an assumption (:data:`NODE_TIERS`). For LLaMA2-70B
(GQA, 327,680 B/token) every tier, even one 6 GB/s SSD (54.6 µs), beats recomputing (≈99 µs per
token over an 8,700-token prefill). OPT-13B has full multi-head KV (819,200 B/token) and fewer
FLOPs (≈19.5 µs): RDMA is only ≈2.4× faster than recomputing and one SSD loses to it — the case
the lecture calls "when SSD loses to recompute".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvcourse._checks import check_positive_int, check_positive_number
from kvcourse.sizing import (
    flops_per_token,
    kv_bytes_per_token,
    prefill_flops,
    recompute_seconds,
    transfer_seconds,
)
from kvcourse.specs import A800_80GB, LLAMA2_70B, OPT_13B, GPUSpec, ModelSpec

__all__ = [
    "HBM_TIER",
    "LOCAL_DRAM_TIER",
    "NODE_SSD_TIER",
    "NODE_TIERS",
    "ONE_SSD_TIER",
    "REMOTE_DRAM_TIER",
    "StorageTier",
    "TierComparison",
    "get_tier",
    "mean_recompute_seconds_per_token",
    "read_seconds_per_token",
    "recompute_seconds_per_token",
    "storage_vs_compute",
    "tiers_losing_to_recompute",
]


@dataclass(frozen=True)
class StorageTier:
    """A place a prefill node can read KV from (or write it to): its ``name``, its bandwidth in
    bytes per second for the whole node, and the ``assumption`` that number rests on."""

    name: str
    bandwidth_bytes_per_s: float
    assumption: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a StorageTier needs a non-empty name, got {self.name!r}")
        check_positive_number(f"StorageTier({self.name!r}): bandwidth_bytes_per_s",
                              self.bandwidth_bytes_per_s, " (bytes per second)")  # fmt: skip


HBM_TIER = StorageTier(
    "HBM",
    8 * A800_80GB.memory_bandwidth,
    "8 × A800-80GB HBM at 2.039 TB/s each (the KV is already on the GPUs)",
)
LOCAL_DRAM_TIER = StorageTier(
    "local DRAM",
    8 * 25e9,
    "the node's CPU DRAM over PCIe, 8 GPUs × 25 GB/s (PCIe 4.0 x16 in practice)",
)
REMOTE_DRAM_TIER = StorageTier(
    "remote DRAM",
    100e9,
    "another node's DRAM over RDMA at 100 GB/s (Exercise 8's figure, ≈8 × 100 Gb/s NICs)",
)
NODE_SSD_TIER = StorageTier(
    "node SSDs",
    8 * 6e9,
    "the node's 8 NVMe SSDs read together, 6 GB/s each",
)
ONE_SSD_TIER = StorageTier(
    "one SSD",
    6e9,
    "a single NVMe SSD at 6 GB/s (Exercise 8's figure)",
)

#: The tiers of one prefill node, fastest first, as node totals.
NODE_TIERS: tuple[StorageTier, ...] = (
    HBM_TIER,
    LOCAL_DRAM_TIER,
    REMOTE_DRAM_TIER,
    NODE_SSD_TIER,
    ONE_SSD_TIER,
)


def get_tier(name: str, tiers: Sequence[StorageTier] = NODE_TIERS) -> StorageTier:
    """The tier of ``tiers`` called ``name`` (e.g. ``"node SSDs"``); ``KeyError`` lists them."""
    for tier in tiers:
        if tier.name == name:
            return tier
    raise KeyError(f"unknown tier {name!r}; the tiers are: {', '.join(t.name for t in tiers)}")


def _check_tier(tier: object) -> StorageTier:
    if not isinstance(tier, StorageTier):
        raise TypeError(
            f"tier must be a StorageTier (e.g. kvcourse.cluster.storage_tiers.NODE_SSD_TIER), "
            f"got {tier!r}"
        )
    return tier


def _check_utilization(utilization: object) -> float:
    value = check_positive_number("utilization", utilization, " (a fraction such as 0.6)")
    if value > 1:
        raise ValueError(f"utilization is a fraction of the peak, at most 1; got {value}")
    return value


def recompute_seconds_per_token(
    model: ModelSpec,
    *,
    context_len: int = 0,
    gpu: GPUSpec = A800_80GB,
    num_gpus: int = 8,
    utilization: float = 0.6,
) -> float:
    """Seconds to recompute one token that attends to ``context_len`` tokens on one prefill node
    (``num_gpus`` × ``gpu`` at ``utilization`` of peak; the lecture's 60 %).

    Exercise 8: LLaMA2-70B's 137.4 GFLOP of linear layers (``context_len=0``) take 91.8 µs on
    8 × A800 (the lecture rounds to 137 GFLOP and prints ≈91 µs).
    """
    if not isinstance(gpu, GPUSpec):
        raise TypeError(f"gpu must be a GPUSpec (e.g. kvcourse.specs.A800_80GB), got {gpu!r}")
    return recompute_seconds(
        flops_per_token(model, context_len),
        num_gpus=num_gpus,
        peak_flops=gpu.peak_flops,
        utilization=_check_utilization(utilization),
    )


def mean_recompute_seconds_per_token(
    model: ModelSpec,
    prompt_len: int,
    *,
    gpu: GPUSpec = A800_80GB,
    num_gpus: int = 8,
    utilization: float = 0.6,
) -> float:
    """Mean seconds per token of a whole causal prefill of ``prompt_len`` tokens on one prefill
    node: ``prefill_flops(model, prompt_len) / prompt_len`` at ``utilization`` (60 %) of the peak.

    Token ``i`` attends to ``i`` tokens, so this is dearer than the linear layers alone:
    LLaMA2-70B over 8,700 tokens ≈99.4 µs per token, OPT-13B ≈19.5 µs.
    """
    prompt_len = check_positive_int("prompt_len", prompt_len, "e.g. 8700")
    if not isinstance(gpu, GPUSpec):
        raise TypeError(f"gpu must be a GPUSpec (e.g. kvcourse.specs.A800_80GB), got {gpu!r}")
    return recompute_seconds(
        prefill_flops(model, prompt_len) / prompt_len,
        num_gpus=num_gpus,
        peak_flops=gpu.peak_flops,
        utilization=_check_utilization(utilization),
    )


def read_seconds_per_token(model: ModelSpec, tier: StorageTier) -> float:
    """Seconds to read one token's KV of ``model`` back from ``tier`` (bytes / bandwidth).

    LLaMA2-70B: 3.3 µs from remote DRAM over 100 GB/s RDMA, 54.6 µs from one 6 GB/s SSD.
    """
    tier = _check_tier(tier)
    return transfer_seconds(kv_bytes_per_token(model), tier.bandwidth_bytes_per_s)


@dataclass(frozen=True)
class TierComparison:
    """One row of the storage-for-compute table: reading one token of ``model`` from ``tier``
    takes ``read_s``, recomputing it ``recompute_s`` (mean over the prompt's prefill)."""

    model: str
    tier: str
    read_s: float
    recompute_s: float

    @property
    def speedup(self) -> float:
        """``recompute_s / read_s``: how many times faster reading back is (below 1: it loses)."""
        return self.recompute_s / self.read_s

    @property
    def loses_to_recompute(self) -> bool:
        """True when reading the KV back takes longer than recomputing it."""
        return self.read_s > self.recompute_s


def storage_vs_compute(
    models: Sequence[ModelSpec] = (LLAMA2_70B, OPT_13B),
    tiers: Sequence[StorageTier] = NODE_TIERS,
    *,
    prompt_len: int = 8700,
    gpu: GPUSpec = A800_80GB,
    num_gpus: int = 8,
    utilization: float = 0.6,
) -> list[TierComparison]:
    """The storage-for-compute table: for every model and tier, one token's read time against
    its recompute time, the mean per token over a ``prompt_len`` prefill on one node
    (``num_gpus`` × ``gpu`` at 60 % of peak by default). Rows go model by model, tiers in order."""
    if not models or not tiers:
        raise ValueError("models and tiers must each list at least one entry")
    rows = []
    for model in models:
        recompute = mean_recompute_seconds_per_token(
            model, prompt_len, gpu=gpu, num_gpus=num_gpus, utilization=utilization
        )
        for tier in tiers:
            rows.append(
                TierComparison(
                    model.name, tier.name, read_seconds_per_token(model, tier), recompute
                )
            )
    return rows


def tiers_losing_to_recompute(
    models: Sequence[ModelSpec] = (LLAMA2_70B, OPT_13B),
    tiers: Sequence[StorageTier] = NODE_TIERS,
    *,
    prompt_len: int = 8700,
    gpu: GPUSpec = A800_80GB,
    num_gpus: int = 8,
    utilization: float = 0.6,
) -> dict[str, list[str]]:
    """Per model name, the names of the tiers from which reading KV back is slower than
    recomputing it (:func:`storage_vs_compute`). Defaults: LLaMA2-70B none, OPT-13B one SSD."""
    rows = storage_vs_compute(
        models, tiers, prompt_len=prompt_len, gpu=gpu, num_gpus=num_gpus, utilization=utilization
    )
    losing: dict[str, list[str]] = {model.name: [] for model in models}
    for row in rows:
        if row.loses_to_recompute:
            losing[row.model].append(row.tier)
    return losing
