"""Layer-wise prefill (Mooncake §5.2, §9 of the book): hiding the KV reads and writes of a
prefill behind its compute, one layer at a time.

A request of ``prompt_len`` tokens whose first ``cached_len`` tokens are in the KV pool runs its
layers in order. Layer ``l`` needs the cached prefix's KV *of layer l* (loaded from a
:class:`~kvcourse.cluster.storage_tiers.StorageTier`), computes that layer for the new tokens,
and leaves the new tokens' KV of layer ``l`` to be stored back to the tier. Per layer:

* compute: ``prefill_flops(model, new, cached) / num_layers`` on one prefill node (8 × A800-80GB
  at **60 % of peak**, the lecture's Exercise 8 constant);
* load: ``cached × kv bytes per token / num_layers`` over the tier's bandwidth;
* store: the same for the ``new`` tokens.

Two schedules:

* ``"serial"`` — what a prefill without layer-wise overlap does: load the whole prefix's KV
  (every layer, back to back), then compute every layer, then store every layer's new KV. Its
  total is the plain sum of the three.
* ``"overlapped"`` — layer-wise: the load of layer ``l + 1`` runs while layer ``l`` computes (a
  one-layer prefetch: it may start once layer ``l``'s compute has started), a layer computes
  once its own load and the previous layer's compute are done, and the store of layer ``l``
  runs while layer ``l + 1`` computes, stores queueing on the outgoing link. The link is taken as
  **full-duplex**: loads and stores travel in separate directions and do not wait for each other.

LLaMA2-70B, 8,700 tokens, no cache: ≈865 ms of compute (the lecture's 870 ms). Half of them
(4,350) cached on the node's SSDs (48 GB/s): overlapped ≈449.6 ms, just over the 448.9 ms of
compute (lecture 454 ms); serial adds the 1.43 GB read (29.7 ms) and the 1.43 GB written back
(29.7 ms) to the compute, ≈59.4 ms more:

>>> round(layerwise_prefill(8700).busy_s("compute") * 1e3)
865
>>> half = layerwise_prefill(8700, 4350)
>>> round(half.total_s * 1e3, 1), round(half.busy_s("compute") * 1e3, 1)
(449.6, 448.9)
>>> serial = layerwise_prefill(8700, 4350, schedule="serial")
>>> [round(serial.busy_s(kind) * 1e3, 1) for kind in ("load", "store")]
[29.7, 29.7]
>>> round((serial.total_s - serial.busy_s("compute")) * 1e3, 1)
59.4
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcourse._checks import check_count, check_positive_int
from kvcourse.cluster.prefill_node import DEFAULT_NODE, PrefillNode
from kvcourse.cluster.storage_tiers import NODE_SSD_TIER, StorageTier
from kvcourse.sizing import kv_bytes_per_token, prefill_flops, transfer_seconds

__all__ = [
    "INTERVAL_KINDS",
    "SCHEDULES",
    "LayerInterval",
    "LayerTimes",
    "LayerwiseTimeline",
    "layer_times",
    "layerwise_prefill",
]

#: The schedules :func:`layerwise_prefill` knows.
SCHEDULES: tuple[str, ...] = ("serial", "overlapped")
#: What an interval of a timeline does: read prefix KV in, compute a layer, write new KV out.
INTERVAL_KINDS: tuple[str, ...] = ("load", "compute", "store")


@dataclass(frozen=True)
class LayerInterval:
    """One bar of a layer-wise timeline: ``kind`` (load, compute or store) of ``layer``
    (0-based), from ``start_s`` to ``end_s`` seconds after the request's prefill began."""

    kind: str
    layer: int
    start_s: float
    end_s: float

    @property
    def duration_s(self) -> float:
        """How long the interval lasts, in seconds."""
        return self.end_s - self.start_s


@dataclass(frozen=True)
class LayerTimes:
    """The three per-layer costs of one request's prefill, in seconds: ``load_s`` (the cached
    prefix's KV of one layer), ``compute_s`` (one layer for the new tokens) and ``store_s`` (the
    new tokens' KV of one layer), over ``num_layers`` layers."""

    num_layers: int
    load_s: float
    compute_s: float
    store_s: float


@dataclass(frozen=True)
class LayerwiseTimeline:
    """One request's prefill laid out in time: every load, compute and store interval (in the
    order they were scheduled) and ``total_s``, when the last of them ends."""

    model: str
    tier: str
    schedule: str
    prompt_len: int
    cached_len: int
    intervals: tuple[LayerInterval, ...]
    total_s: float

    def of_kind(self, kind: str) -> tuple[LayerInterval, ...]:
        """The intervals of one ``kind`` (``"load"``, ``"compute"`` or ``"store"``), by layer."""
        if kind not in INTERVAL_KINDS:
            raise ValueError(f"unknown interval kind {kind!r}; use one of {INTERVAL_KINDS}")
        return tuple(sorted((i for i in self.intervals if i.kind == kind), key=lambda i: i.layer))

    def busy_s(self, kind: str) -> float:
        """Total seconds spent on ``kind`` (the link in, the GPUs, or the link out)."""
        return sum(i.duration_s for i in self.of_kind(kind))


def _check_request(prompt_len: object, cached_len: object) -> tuple[int, int]:
    prompt_len = check_positive_int("prompt_len", prompt_len, "e.g. 8700")
    cached_len = check_count("cached_len", cached_len)
    if cached_len > prompt_len:
        raise ValueError(
            f"cached_len ({cached_len}) cannot exceed prompt_len ({prompt_len}): the cached "
            f"tokens are a prefix of the prompt"
        )
    if cached_len == prompt_len:
        raise ValueError(
            f"at least one new token must be computed (its logits choose the first output "
            f"token); pass cached_len ≤ prompt_len − 1 = {prompt_len - 1}"
        )
    return prompt_len, cached_len


def layer_times(
    prompt_len: int,
    cached_len: int = 0,
    tier: StorageTier = NODE_SSD_TIER,
    *,
    node: PrefillNode = DEFAULT_NODE,
) -> LayerTimes:
    """The per-layer load, compute and store times of a request of ``prompt_len`` tokens with
    ``cached_len`` of them in ``tier``, on ``node`` (by default LLaMA2-70B on 8 × A800 at 60 %)."""
    prompt_len, cached_len = _check_request(prompt_len, cached_len)
    if not isinstance(tier, StorageTier):
        raise TypeError(
            f"tier must be a StorageTier (e.g. kvcourse.cluster.storage_tiers.NODE_SSD_TIER), "
            f"got {tier!r}"
        )
    if not isinstance(node, PrefillNode):
        raise TypeError(f"node must be a kvcourse.cluster.PrefillNode, got {node!r}")
    model = node.model
    new = prompt_len - cached_len
    compute = node.seconds(prefill_flops(model, new, cached_len))
    layers = model.num_layers
    per_token = kv_bytes_per_token(model)
    bandwidth = tier.bandwidth_bytes_per_s
    return LayerTimes(
        num_layers=layers,
        load_s=transfer_seconds(cached_len * per_token, bandwidth) / layers,
        compute_s=compute / layers,
        store_s=transfer_seconds(new * per_token, bandwidth) / layers,
    )


def _serial(times: LayerTimes, store: bool) -> list[LayerInterval]:
    intervals, t = [], 0.0
    phases = [("load", times.load_s), ("compute", times.compute_s)]
    if store:
        phases.append(("store", times.store_s))
    for kind, duration in phases:
        if duration == 0:
            continue
        for layer in range(times.num_layers):
            intervals.append(LayerInterval(kind, layer, t, t + duration))
            t += duration
    return intervals


def _overlapped(times: LayerTimes, store: bool) -> list[LayerInterval]:
    intervals = []
    link_in = link_out = 0.0  # when each direction of the link is next free
    compute_start = compute_end = 0.0  # of the previous layer
    for layer in range(times.num_layers):
        ready = 0.0
        if times.load_s > 0:
            # One-layer prefetch: layer l's KV may stream in once layer l - 1 has started.
            start = max(link_in, compute_start if layer > 0 else 0.0)
            link_in = ready = start + times.load_s
            intervals.append(LayerInterval("load", layer, start, link_in))
        compute_start = max(ready, compute_end)
        compute_end = compute_start + times.compute_s
        intervals.append(LayerInterval("compute", layer, compute_start, compute_end))
        if store and times.store_s > 0:
            start = max(link_out, compute_end)
            link_out = start + times.store_s
            intervals.append(LayerInterval("store", layer, start, link_out))
    return intervals


def layerwise_prefill(
    prompt_len: int = 8700,
    cached_len: int = 0,
    tier: StorageTier = NODE_SSD_TIER,
    *,
    schedule: str = "overlapped",
    store: bool = True,
    node: PrefillNode = DEFAULT_NODE,
) -> LayerwiseTimeline:
    """Lay one request's prefill out in time, layer by layer: ``cached_len`` of its
    ``prompt_len`` tokens are read from ``tier``, the rest computed on ``node`` (by default
    LLaMA2-70B on 8 × A800-80GB at 60 % of peak) and, when ``store``, written back to ``tier``.

    ``schedule`` is ``"serial"`` (all loads, then all computes, then all stores: no overlap) or
    ``"overlapped"`` (Mooncake's layer-wise prefill over a full-duplex link); see the module
    docstring. Defaults: LLaMA2-70B, 8,700 tokens, no cache ≈865 ms:

    >>> round(layerwise_prefill().total_s * 1e3)
    865
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; use one of {SCHEDULES}")
    if not isinstance(store, bool):
        raise TypeError(f"store must be True or False, got {store!r}")
    times = layer_times(prompt_len, cached_len, tier, node=node)
    intervals = _serial(times, store) if schedule == "serial" else _overlapped(times, store)
    return LayerwiseTimeline(
        model=node.model.name,
        tier=tier.name,
        schedule=schedule,
        prompt_len=prompt_len,
        cached_len=cached_len,
        intervals=tuple(intervals),
        total_s=max(i.end_s for i in intervals),
    )
