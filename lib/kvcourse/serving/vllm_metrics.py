"""A serving run's metrics under vLLM's names, in Prometheus text format (``prometheus_client``).

The names, their kinds and the histograms' bucket boundaries are those of vLLM v1 at release
v0.33.0, read in ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``) and
``vllm/v1/metrics/buckets.py``; what feeds them in ``vllm/v1/metrics/stats.py``:

* gauges ``vllm:num_requests_running``, ``vllm:num_requests_waiting`` and
  ``vllm:kv_cache_usage_perc`` (a fraction despite the name: ``BlockPool.get_usage`` is
  ``1 − free blocks / (blocks − 1)``, where a free block still holding cached KV counts as free,
  and the one left out is block 0, which vLLM keeps as its ``null_block`` and never lends; the
  course's pools lend every block, so a course pool of N blocks stands for vLLM's N + 1 and its
  usage here is ``1 − free / N``), set every iteration. The guide's
  ``vllm:gpu_cache_usage_perc`` and ``vllm:cpu_cache_usage_perc`` are the old names; v0.33.0
  has the first as ``kv_cache_usage_perc`` and no CPU one;
* counters ``vllm:prefix_cache_queries`` and ``vllm:prefix_cache_hits`` (tokens a new request
  looked up, and found cached; re-admitted victims are left out, as vLLM does),
  ``vllm:num_preemptions``, ``vllm:prompt_tokens`` and ``vllm:generation_tokens``.
  ``prometheus_client`` writes a counter's sample with ``_total`` appended:
  ``vllm:num_preemptions_total``;
* histograms ``vllm:time_to_first_token_seconds`` (arrival to first token) and
  ``vllm:inter_token_latency_seconds`` (each later token: the time since the request's previous
  one, a preemption's wait included).

Every metric carries vLLM's labels ``model_name`` and ``engine`` (``"0"``).
:func:`serve_with_metrics` runs :class:`~kvcourse.serving.paged_v1.VllmV1Scheduler` on a
:class:`~kvcourse.serving.paged_v1.PagedV1Scheme` to the end, filling a fresh ``CollectorRegistry``
and keeping each iteration's values for plots (:class:`MetricsRun`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from kvcourse._checks import check_positive_int
from kvcourse.serving.checks import check_requests
from kvcourse.serving.cost import IterationCost, check_cost
from kvcourse.serving.paged_v1 import PagedV1Scheme, VllmV1Scheduler
from kvcourse.workloads import Request

__all__ = [
    "INTER_TOKEN_LATENCY_BUCKETS",
    "METRIC_NAMES",
    "TIME_TO_FIRST_TOKEN_BUCKETS",
    "MetricsRun",
    "serve_with_metrics",
]

#: ``vllm/v1/metrics/buckets.py``, v0.33.0, in seconds.
TIME_TO_FIRST_TOKEN_BUCKETS: tuple[float, ...] = (
    *(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5),
    *(10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
)
#: ``vllm/v1/metrics/buckets.py``, v0.33.0, in seconds.
INTER_TOKEN_LATENCY_BUCKETS: tuple[float, ...] = (
    *(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5),
    *(10.0, 20.0, 40.0, 80.0),
)

#: The metrics this module reports, as they appear in the text format (counters with ``_total``).
METRIC_NAMES: tuple[str, ...] = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:num_preemptions_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
)

_LABELS = ("model_name", "engine")

# Each metric's kind, vLLM's name and help text (loggers.py), and its buckets.
_SPECS: dict[str, tuple[type, str, str, dict[str, object]]] = {
    "running": (
        Gauge,
        "vllm:num_requests_running",
        "Number of requests in model execution batches.",
        {},
    ),
    "waiting": (
        Gauge,
        "vllm:num_requests_waiting",
        "Number of requests waiting to be processed.",
        {},
    ),
    "usage": (Gauge, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", {}),
    "queries": (
        Counter,
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        {},
    ),
    "hits": (
        Counter,
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        {},
    ),
    "preempt": (
        Counter,
        "vllm:num_preemptions",
        "Cumulative number of preemption from the engine.",
        {},
    ),
    "prompt": (Counter, "vllm:prompt_tokens", "Number of prefill tokens processed.", {}),
    "gen": (Counter, "vllm:generation_tokens", "Number of generation tokens processed.", {}),
    "ttft": (
        Histogram,
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        {"buckets": TIME_TO_FIRST_TOKEN_BUCKETS},
    ),
    "itl": (
        Histogram,
        "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        {"buckets": INTER_TOKEN_LATENCY_BUCKETS},
    ),
}


@dataclass(frozen=True, eq=False)
class MetricsRun:
    """One run's metrics. ``registry`` holds them as vLLM would expose them at the end of the run
    (:meth:`text`); the arrays give each iteration's end time and the values after it, for plots:
    ``running``, ``waiting``, ``kv_usage`` (the gauges) and the counters so far
    (``prefix_queries``, ``prefix_hits``, ``preemptions``). ``ttft_s`` and ``itl_s`` are every
    observation the histograms got. ``duration_s`` runs from the first arrival to the last token;
    ``output_tokens`` counts the tokens generated."""

    registry: CollectorRegistry = field(repr=False)
    time_s: np.ndarray
    running: np.ndarray
    waiting: np.ndarray
    kv_usage: np.ndarray
    prefix_queries: np.ndarray
    prefix_hits: np.ndarray
    preemptions: np.ndarray
    ttft_s: np.ndarray
    itl_s: np.ndarray
    duration_s: float
    output_tokens: int
    num_requests: int

    def text(self, *, created: bool = True) -> str:
        """The Prometheus text format, as ``/metrics`` serves it (``generate_latest``).
        ``created=False`` leaves out the ``_created`` series ``prometheus_client`` adds to each
        counter and histogram (the wall-clock time it was made, so never the same twice)."""
        text = generate_latest(self.registry).decode()
        if created:
            return text
        kept = []
        for line in text.splitlines():
            name = line.split()[2] if line.startswith("#") else line.split("{")[0]
            if not name.endswith("_created"):
                kept.append(line)
        return "\n".join(kept) + "\n"

    @property
    def tokens_per_s(self) -> float:
        """Output throughput: generated tokens per second of the run."""
        return self.output_tokens / self.duration_s

    @property
    def hit_rate(self) -> float:
        """``prefix_cache_hits / prefix_cache_queries`` at the end (NaN with no queries)."""
        queries = int(self.prefix_queries[-1]) if len(self.prefix_queries) else 0
        return int(self.prefix_hits[-1]) / queries if queries else float("nan")

    def ttft_percentile(self, q: float) -> float:
        """The ``q``-th percentile (0–100) of the time to first token, in seconds."""
        if not 0 <= q <= 100:
            raise ValueError(f"q must be a percentile in [0, 100], got {q!r}")
        return float(np.percentile(self.ttft_s, q))

    @property
    def mean_kv_usage(self) -> float:
        """KV-cache usage averaged over the run's time (each iteration weighted by its length)."""
        steps = np.diff(np.concatenate(([self.time_s[0]], self.time_s)))
        steps[0] = 0.0
        total = steps.sum()
        return float((self.kv_usage * steps).sum() / total) if total > 0 else float("nan")


def serve_with_metrics(
    requests: Sequence[Request],
    scheme: PagedV1Scheme,
    *,
    num_slots: int,
    cost: IterationCost | None = None,
    model_name: str = "kvcourse",
) -> MetricsRun:
    """Serve ``requests`` to the end with vLLM v1's scheduler and memory (``scheme``, with or
    without prefix caching) in a KV cache of ``num_slots`` slots, and report vLLM's metrics
    (module docstring). ``cost`` is the iteration time model (default
    :meth:`IterationCost.for_gpu`); ``model_name`` the ``model_name`` label."""
    ordered = check_requests(requests)
    if not isinstance(scheme, PagedV1Scheme):
        raise TypeError(
            f"vLLM's metrics need vLLM v1's memory: pass a PagedV1Scheme(), got {scheme!r}"
        )
    num_slots = check_positive_int("num_slots", num_slots, "e.g. the KV cache's tokens")
    cost = check_cost(cost)
    if not isinstance(model_name, str) or not model_name:
        raise TypeError(f"model_name must be a non-empty str, got {model_name!r}")
    registry = CollectorRegistry()
    labels = (model_name, "0")

    m = {
        key: kind(name, doc, _LABELS, registry=registry, **extra).labels(*labels)
        for key, (kind, name, doc, extra) in _SPECS.items()
    }

    rows: list[tuple[float, int, int, float, int, int, int]] = []
    ttft: list[float] = []
    itl: list[float] = []
    last = np.full(len(ordered), np.nan)  # each request's latest token time
    queries = hits = preemptions = produced = 0
    with VllmV1Scheduler(ordered, scheme, num_slots=num_slots, cost=cost) as run:
        memory = run.memory
        blocks = num_slots // scheme.block_size
        for it in run:
            end = it.time_s + it.duration_s
            preemptions += len(it.preempted)
            m["preempt"].inc(len(it.preempted))
            for live in (*run.running, *it.finished):  # everyone who got a token now
                previous = last[live.order]
                if np.isnan(previous):
                    ttft.append(end - live.request.arrival_s)
                    m["ttft"].observe(ttft[-1])
                else:
                    itl.append(end - previous)
                    m["itl"].observe(itl[-1])
                last[live.order] = end
            produced += it.running
            m["prompt"].inc(it.new_tokens - (it.running - len(it.admitted)))  # less the decodes
            m["gen"].inc(it.running)
            new_q, new_h = memory.queries - queries, memory.hits - hits
            m["queries"].inc(new_q)
            m["hits"].inc(new_h)
            queries, hits = memory.queries, memory.hits
            used = (it.stored + it.reserved + it.internal) // scheme.block_size
            usage = used / blocks
            m["running"].set(it.running)
            m["waiting"].set(it.waiting)
            m["usage"].set(usage)
            rows.append((end, it.running, it.waiting, usage, queries, hits, preemptions))
    table = np.array(rows, dtype=np.float64)
    return MetricsRun(
        registry=registry,
        time_s=table[:, 0],
        running=table[:, 1].astype(np.int64),
        waiting=table[:, 2].astype(np.int64),
        kv_usage=table[:, 3],
        prefix_queries=table[:, 4].astype(np.int64),
        prefix_hits=table[:, 5].astype(np.int64),
        preemptions=table[:, 6].astype(np.int64),
        ttft_s=np.array(ttft),
        itl_s=np.array(itl),
        duration_s=float(table[-1, 0] - ordered[0].arrival_s),
        output_tokens=produced,
        num_requests=len(ordered),
    )
