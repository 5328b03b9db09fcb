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
the lecture calls "when SSD loses to recompute":

>>> from kvcourse.sizing import kv_bytes_per_token
>>> [kv_bytes_per_token(node.model) for node in TABLE_NODES]
[327680, 819200]
>>> row = {(r.model, r.tier): r for r in storage_vs_compute()}
>>> ssd, rdma = row["LLaMA2-70B", "one SSD"], row["OPT-13B", "remote DRAM"]
>>> round(ssd.read_s * 1e6, 1), round(ssd.recompute_s * 1e6)  # µs
(54.6, 99)
>>> round(rdma.recompute_s * 1e6, 1), round(rdma.speedup, 1), row["OPT-13B", "one SSD"].speedup < 1
(19.5, 2.4, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvcourse._checks import check_positive_int, check_positive_number
from kvcourse.cluster.prefill_node import DEFAULT_NODE, PrefillNode
from kvcourse.sizing import flops_per_token, kv_bytes_per_token, prefill_flops, transfer_seconds
from kvcourse.specs import A800_80GB, LLAMA2_70B, OPT_13B, ModelSpec

__all__ = [
    "HBM_TIER",
    "LOCAL_DRAM_TIER",
    "NODE_SSD_TIER",
    "NODE_TIERS",
    "ONE_SSD_TIER",
    "REMOTE_DRAM_TIER",
    "TABLE_NODES",
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
        check_positive_number(
            f"StorageTier({self.name!r}): bandwidth_bytes_per_s",
            self.bandwidth_bytes_per_s,
            " (bytes per second)",
        )


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


def _check_node(node: object) -> PrefillNode:
    if not isinstance(node, PrefillNode):
        raise TypeError(
            f"node must be a PrefillNode (e.g. kvcourse.cluster.PrefillNode(OPT_13B)), got {node!r}"
        )
    return node


def recompute_seconds_per_token(context_len: int = 0, node: PrefillNode = DEFAULT_NODE) -> float:
    """Seconds to recompute one token that attends to ``context_len`` tokens on ``node`` (by
    default the lecture's: LLaMA2-70B on 8 × A800 at 60 %).

    The count is the library's (:func:`~kvcourse.sizing.flops_per_token`: linear layers and
    output head, plus attention to ``context_len`` tokens). For LLaMA2-70B's linear layers it is
    137.4 GFLOP, the "about 137 GFLOP" Exercise 8 gives; the exercise's answer, ≈91 µs, divides
    the given 137 GFLOP (:func:`~kvcourse.sizing.compute_seconds`), so this count lands a little
    above it:

    >>> round(flops_per_token(LLAMA2_70B) / 1e9, 1), round(recompute_seconds_per_token() * 1e6, 1)
    (137.4, 91.8)
    """
    node = _check_node(node)
    return node.seconds(flops_per_token(node.model, context_len))


def mean_recompute_seconds_per_token(prompt_len: int, node: PrefillNode = DEFAULT_NODE) -> float:
    """Mean seconds per token of a whole causal prefill of ``prompt_len`` tokens on ``node``:
    ``prefill_flops(model, prompt_len) / prompt_len`` at the node's rate.

    Token ``i`` attends to ``i`` tokens, so this is dearer than the linear layers alone
    (LLaMA2-70B and OPT-13B over 8,700 tokens, in µs):

    >>> [round(mean_recompute_seconds_per_token(8700, PrefillNode(m)) * 1e6, 1)
    ...  for m in (LLAMA2_70B, OPT_13B)]
    [99.4, 19.5]
    """
    prompt_len = check_positive_int("prompt_len", prompt_len, "e.g. 8700")
    node = _check_node(node)
    return node.seconds(prefill_flops(node.model, prompt_len) / prompt_len)


def read_seconds_per_token(model: ModelSpec, tier: StorageTier) -> float:
    """Seconds to read one token's KV of ``model`` back from ``tier`` (bytes / bandwidth).

    LLaMA2-70B: 3.3 µs from remote DRAM over 100 GB/s RDMA, 54.6 µs from one 6 GB/s SSD:

    >>> for tier in (REMOTE_DRAM_TIER, ONE_SSD_TIER):
    ...     print(round(read_seconds_per_token(LLAMA2_70B, tier) * 1e6, 1))
    3.3
    54.6
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


#: The nodes of the storage-for-compute table: LLaMA2-70B (GQA) and OPT-13B (full multi-head KV),
#: each on the lecture's 8 × A800 at 60 %.
TABLE_NODES: tuple[PrefillNode, ...] = (PrefillNode(LLAMA2_70B), PrefillNode(OPT_13B))


def storage_vs_compute(
    nodes: Sequence[PrefillNode] = TABLE_NODES,
    tiers: Sequence[StorageTier] = NODE_TIERS,
    *,
    prompt_len: int = 8700,
) -> list[TierComparison]:
    """The storage-for-compute table: for every node's model and every tier, one token's read
    time against its recompute time on that node, the mean per token over a ``prompt_len``
    prefill (:data:`TABLE_NODES` by default). Rows go node by node, tiers in order."""
    if not nodes or not tiers:
        raise ValueError("nodes and tiers must each list at least one entry")
    rows = []
    for node in nodes:
        recompute = mean_recompute_seconds_per_token(prompt_len, node)
        for tier in tiers:
            rows.append(
                TierComparison(
                    node.model.name, tier.name, read_seconds_per_token(node.model, tier), recompute
                )
            )
    return rows


def tiers_losing_to_recompute(
    nodes: Sequence[PrefillNode] = TABLE_NODES,
    tiers: Sequence[StorageTier] = NODE_TIERS,
    *,
    prompt_len: int = 8700,
) -> dict[str, list[str]]:
    """Per model name, the names of the tiers from which reading KV back is slower than
    recomputing it (:func:`storage_vs_compute`). Defaults: LLaMA2-70B none, OPT-13B one SSD:

    >>> tiers_losing_to_recompute()
    {'LLaMA2-70B': [], 'OPT-13B': ['one SSD']}
    """
    rows = storage_vs_compute(nodes, tiers, prompt_len=prompt_len)
    losing: dict[str, list[str]] = {node.model.name: [] for node in nodes}
    for row in rows:
        if row.loses_to_recompute:
            losing[row.model].append(row.tier)
    return losing
