"""Mooncake's Conductor (§9.4): where one request's prefill runs, whether its prefix is copied
there first, or whether it is turned away.

The Conductor sees, for every prefill instance, how long its queue is (:attr:`ClusterView.queue_s`,
the predicted prefill time of the requests ahead) and how many leading blocks of this request's
prompt its local cache holds (:attr:`ClusterView.prefix_blocks`). It estimates the time to first
token on each instance:

``TTFT = transfer + queue + prefill(uncached tokens, cached tokens)``

where *transfer* is zero unless the instance first copies a longer prefix from the instance that
holds the longest one (Mooncake's Algorithm 1 considers it when that prefix is at least
``replication_threshold`` times longer than the instance's own: *hot-spot replication*; the copy
stays in the instance's cache). It picks the smallest estimate and rejects the request (HTTP 429)
when even that misses the TTFT SLO.

The four placements the book compares are functions ``(view, config) → Decision`` (random draws
with its own seeded generator):

* :class:`RandomPlacement`: any instance, uniformly;
* :func:`load_balanced`: the shortest queue;
* :func:`cache_aware`: the smallest TTFT with each instance's own prefix;
* :func:`cache_aware_replicating`: the smallest TTFT when an instance may also pull the longest
  prefix.

A cached prefix never covers the prompt's last token: that token is always prefilled, because its
logits choose the first output token (as in §8).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from kvcourse._checks import check_count, check_positive_int, check_positive_number, check_seconds
from kvcourse.cluster.prefill_node import DEFAULT_NODE, PrefillNode
from kvcourse.sizing import kv_bytes_per_token, prefill_flops

__all__ = [
    "ClusterView",
    "ConductorConfig",
    "Decision",
    "Placement",
    "PrefillCosts",
    "RandomPlacement",
    "cache_aware",
    "cache_aware_replicating",
    "check_decision",
    "check_placement",
    "estimate_ttft",
    "load_balanced",
]


@dataclass(frozen=True)
class PrefillCosts:
    """The Conductor's time model: how long a prefill node takes to prefill, and to pull KV blocks
    from another node.

    A prefill of ``new`` tokens after ``cached`` ones costs
    :func:`~kvcourse.sizing.prefill_flops` on ``node``
    (:class:`~kvcourse.cluster.prefill_node.PrefillNode`); a block of ``block_size`` tokens of the
    node's model's KV moves over RDMA at ``rdma_bandwidth`` bytes/s. Defaults: LLaMA2-70B on
    8 × A800 at 60 % (Ex 8), 100 GB/s RDMA, Mooncake's 512-token blocks.
    """

    node: PrefillNode = DEFAULT_NODE
    rdma_bandwidth: float = 100e9
    block_size: int = 512

    def __post_init__(self) -> None:
        if not isinstance(self.node, PrefillNode):
            raise TypeError(
                f"node must be a kvcourse.cluster.PrefillNode (e.g. PrefillNode(utilization=0.5)), "
                f"got {self.node!r}"
            )
        check_positive_number("rdma_bandwidth", self.rdma_bandwidth, " bytes/s (e.g. 100e9)")
        check_positive_int("block_size", self.block_size, "e.g. 512 (Mooncake's block size)")

    def cached_tokens(self, prompt_len: int, cached_blocks: int) -> int:
        """Tokens of a ``prompt_len``-token prompt that ``cached_blocks`` leading blocks cover,
        never the last one: ``min(cached_blocks × block_size, prompt_len − 1)``."""
        prompt_len = check_positive_int("prompt_len", prompt_len)
        return min(check_count("cached_blocks", cached_blocks) * self.block_size, prompt_len - 1)

    def prefill_s(self, prompt_len: int, cached_blocks: int = 0) -> float:
        """Seconds to prefill a ``prompt_len``-token prompt whose first ``cached_blocks`` blocks
        are cached (LLaMA2-70B, 8,700 tokens, none cached: ≈ 0.86 s):

        >>> round(PrefillCosts().prefill_s(8700), 2)
        0.86
        """
        cached = self.cached_tokens(prompt_len, cached_blocks)
        return self.node.seconds(prefill_flops(self.node.model, prompt_len - cached, cached))

    def transfer_s(self, num_blocks: int) -> float:
        """Seconds to pull ``num_blocks`` KV blocks from another node over RDMA (one 512-token
        LLaMA2-70B block, 168 MB: ≈ 1.7 ms):

        >>> round(PrefillCosts().transfer_s(1) * 1e3, 1)
        1.7
        """
        num_blocks = check_count("num_blocks", num_blocks)
        per_block = self.block_size * kv_bytes_per_token(self.node.model)
        return num_blocks * per_block / self.rdma_bandwidth


@dataclass(frozen=True)
class ConductorConfig:
    """What the Conductor decides with: the time model, the TTFT SLO in seconds (None: never
    reject) and the replication threshold (pull a prefix at least this many times longer than
    the instance's own)."""

    costs: PrefillCosts = PrefillCosts()
    ttft_slo_s: float | None = 5.0
    replication_threshold: float = 2.0

    def __post_init__(self) -> None:
        if not isinstance(self.costs, PrefillCosts):
            raise TypeError(f"costs must be a PrefillCosts, got {self.costs!r}")
        if self.ttft_slo_s is not None:
            check_positive_number("ttft_slo_s", self.ttft_slo_s, " seconds (or None)")
        check_positive_number("replication_threshold", self.replication_threshold)
        if self.replication_threshold < 1:
            raise ValueError(
                "replication_threshold compares a longer prefix with a shorter one, so it must be "
                f"at least 1; got {self.replication_threshold}"
            )


@dataclass(frozen=True)
class ClusterView:
    """What the Conductor sees when one request arrives: the prompt's length, and for every prefill
    instance the seconds of work queued ahead of it and the leading blocks of this prompt it
    caches."""

    prompt_len: int
    queue_s: tuple[float, ...]
    prefix_blocks: tuple[int, ...]

    def __post_init__(self) -> None:
        check_positive_int("prompt_len", self.prompt_len)
        if not isinstance(self.queue_s, tuple) or not isinstance(self.prefix_blocks, tuple):
            raise TypeError("queue_s and prefix_blocks must be tuples, one entry per instance")
        if not self.queue_s or len(self.queue_s) != len(self.prefix_blocks):
            raise ValueError(
                f"queue_s ({len(self.queue_s)}) and prefix_blocks ({len(self.prefix_blocks)}) "
                "must give one entry per prefill instance, at least one"
            )
        for i, q in enumerate(self.queue_s):
            check_seconds(f"queue_s[{i}]", q)
        for i, b in enumerate(self.prefix_blocks):
            check_count(f"prefix_blocks[{i}]", b)

    @property
    def num_instances(self) -> int:
        """How many prefill instances the cluster has."""
        return len(self.queue_s)


@dataclass(frozen=True)
class Decision:
    """The Conductor's answer for one request: the prefill ``instance`` (None: rejected), the
    prefix blocks its prefill reuses, the instance it pulls them from first (None: its own cache)
    and the estimated TTFT in seconds (of the best instance, also when rejected)."""

    instance: int | None
    cached_blocks: int
    pull_from: int | None
    ttft_s: float

    @property
    def rejected(self) -> bool:
        """Whether the request was turned away (no instance meets the TTFT SLO)."""
        return self.instance is None


#: A Conductor placement: the decision for one request from what the Conductor sees.
Placement = Callable[[ClusterView, ConductorConfig], Decision]


def estimate_ttft(
    view: ClusterView, config: ConductorConfig, instance: int, pull_from: int | None = None
) -> float:
    """The estimated TTFT of the request on ``instance``: queue + prefill of what its own cache
    misses, or, pulling the prefix of ``pull_from`` first, transfer + queue + prefill of what that
    longer prefix misses."""
    own = view.prefix_blocks[instance]
    costs = config.costs
    if pull_from is None or view.prefix_blocks[pull_from] <= own:
        return view.queue_s[instance] + costs.prefill_s(view.prompt_len, own)
    longest = view.prefix_blocks[pull_from]
    return (
        costs.transfer_s(longest - own)
        + view.queue_s[instance]
        + costs.prefill_s(view.prompt_len, longest)
    )


def _decide(
    view: ClusterView,
    config: ConductorConfig,
    instance: int,
    pull_from: int | None,
    ttft: float | None = None,
) -> Decision:
    if ttft is None:
        ttft = estimate_ttft(view, config, instance, pull_from)
    pulled = pull_from is not None and view.prefix_blocks[pull_from] > view.prefix_blocks[instance]
    blocks = view.prefix_blocks[pull_from if pulled else instance]
    if config.ttft_slo_s is not None and ttft > config.ttft_slo_s:
        return Decision(None, 0, None, ttft)
    return Decision(instance, blocks, pull_from if pulled else None, ttft)


class RandomPlacement:
    """Mooncake's baseline: each request to a uniformly random prefill instance (seeded); it is
    rejected when that instance misses the SLO."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)

    def __call__(self, view: ClusterView, config: ConductorConfig) -> Decision:
        """The decision for one request: a random instance with its own cached prefix."""
        return _decide(view, config, self._rng.randrange(view.num_instances), None)


def load_balanced(view: ClusterView, config: ConductorConfig) -> Decision:
    """The instance with the shortest queue (the lowest number on a tie), with whatever prefix
    its own cache holds; rejected when it misses the SLO."""
    best = min(range(view.num_instances), key=lambda i: (view.queue_s[i], i))
    return _decide(view, config, best, None)


def cache_aware(view: ClusterView, config: ConductorConfig) -> Decision:
    """The instance with the smallest estimated TTFT, each with its own cached prefix (the lowest
    number on a tie); rejected when even that misses the SLO."""
    ttfts = [estimate_ttft(view, config, i) for i in range(view.num_instances)]
    best = min(range(view.num_instances), key=lambda i: (ttfts[i], i))
    return _decide(view, config, best, None, ttfts[best])


def cache_aware_replicating(view: ClusterView, config: ConductorConfig) -> Decision:
    """Mooncake's Algorithm 1: like :func:`cache_aware`, but an instance whose own prefix is
    shorter than the longest one by at least ``replication_threshold`` times may also pull that
    longest prefix first (from the lowest-numbered instance holding it); the smallest estimate
    over every instance, with and without the pull, wins (on a tie: the lower instance, then no
    pull)."""
    longest = max(view.prefix_blocks)
    holder = view.prefix_blocks.index(longest)
    options: list[tuple[float, int, int, int | None]] = []
    for i, own in enumerate(view.prefix_blocks):
        options.append((estimate_ttft(view, config, i), i, 0, None))
        if longest > own and longest >= config.replication_threshold * own:
            options.append((estimate_ttft(view, config, i, holder), i, 1, holder))
    ttft, best, _, source = min(options)
    return _decide(view, config, best, source, ttft)


def check_placement(placement: object) -> Placement:
    """``placement`` if it is callable as ``placement(view, config)``; TypeError naming what to
    pass otherwise."""
    if not callable(placement):
        raise TypeError(
            f"placement must be a function (view, config) -> Decision such as "
            f"kvcourse.cluster.cache_aware, got {placement!r}"
        )
    return placement  # type: ignore[return-value]


def check_decision(decision: object, view: ClusterView) -> Decision:
    """``decision`` if it is a :class:`Decision` the cluster can carry out for ``view``: a valid
    instance (or None), a prefix no longer than the instance's own or the source's, a source
    that holds it. ValueError saying what is wrong otherwise."""
    if not isinstance(decision, Decision):
        raise TypeError(
            f"a placement must return a kvcourse.cluster.Decision, got {decision!r:.80}"
        )
    n = view.num_instances
    if decision.instance is None:
        return decision
    if not isinstance(decision.instance, int) or not 0 <= decision.instance < n:
        raise ValueError(f"Decision.instance must be None or 0..{n - 1}, got {decision.instance!r}")
    source = decision.instance if decision.pull_from is None else decision.pull_from
    if not isinstance(source, int) or not 0 <= source < n:
        raise ValueError(f"Decision.pull_from must be None or 0..{n - 1}, got {source!r}")
    held = view.prefix_blocks[source]
    blocks = decision.cached_blocks
    if not isinstance(blocks, int) or isinstance(blocks, bool) or not 0 <= blocks <= held:
        where = "its own cache" if decision.pull_from is None else f"instance {source}"
        raise ValueError(
            f"Decision.cached_blocks must be between 0 and the {held} blocks {where} holds, "
            f"got {blocks!r}"
        )
    return decision
