"""Latency against request rate (§7): the vLLM paper's Fig. 12, simulated, and the highest rate
each scheme sustains.

:func:`latency_rate_sweep` serves the same seeded workload at each of several request rates under
each scheme (:func:`~kvcourse.serving.latency.measure_latency`) and collects the results in a
:class:`RateSweep`. The same seed at every rate gives the same lengths and the same arrival
pattern, squeezed in time (common random numbers), so the curves are smooth and the run
deterministic. Each curve is flat while the system keeps up and turns up sharply at a knee: past
its capacity the queue grows as long as requests keep coming.

**The highest sustainable rate** (:func:`sustainable_rate`) is where a curve first crosses a
latency target, by default the lecture's mean normalized latency of 50 ms per token: linearly
interpolated between the last swept rate that meets the target and the first that does not; the
largest swept rate if every one meets it (a lower bound: sweep further); NaN if none does.
``interpolate=False`` gives the last swept rate that meets it instead. The curves bend upwards,
so interpolation between two grid points lands a little below the true crossing; the finer the
grid, the closer. :func:`bisect_sustainable_rate` bisects on the rate instead, as the lecture
does, to a stated tolerance.

:func:`sweep_each_scheme` sweeps each scheme on a grid of its own (§7 sweeps each only up to a
little past its knee, :data:`SHAREGPT_GRIDS`), one :class:`RateSweep` per scheme.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from kvcourse._checks import check_positive_int, check_positive_number
from kvcourse.serving.cost import IterationCost, check_cost
from kvcourse.serving.latency import LatencyResult, measure_latency
from kvcourse.serving.preemption import VllmPaperScheduler, check_scheduler_class
from kvcourse.serving.scheduler import IterationScheduler
from kvcourse.serving.schemes import A100_SLOTS, MemoryScheme, check_scheme, default_schemes
from kvcourse.serving.simulation import workload_lengths
from kvcourse.workloads import LengthDistribution, generate_requests

__all__ = [
    "LATENCY_TARGET_S",
    "SHAREGPT_GRIDS",
    "SHAREGPT_RATES",
    "RateSweep",
    "bisect_sustainable_rate",
    "latency_rate_sweep",
    "sustainable_rate",
    "sweep_each_scheme",
]

#: The lecture's latency target: mean normalized latency of at most 50 ms per token.
LATENCY_TARGET_S: float = 0.05
#: §7's grids (req/s), one per default scheme, on ShareGPT-like requests, OPT-13B on an
#: A100-40GB: each scheme swept up to a little past its knee. Max crosses 50 ms/token between
#: 0.45 and 0.5, Oracle between 0.7 and 0.8, Paged between 1.7 and 1.8 (seed 0; pinned in
#: ``tests/serving/test_sweep.py``). §7, §12 and assignment a4's last cell read their rates off
#: these grids, so with the same scheduler they print the same digits.
SHAREGPT_GRIDS: Mapping[str, tuple[float, ...]] = MappingProxyType(
    {
        "Max": (0.2, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7),
        "Oracle": (0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 1.0),
        "Paged": (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.7, 1.8, 2.0),
    }
)
#: One grid for all three schemes at once (the default of :func:`latency_rate_sweep`). It holds
#: the two rates of :data:`SHAREGPT_GRIDS` around each scheme's crossing, so each scheme is
#: interpolated between the same two rates as on its own grid.
SHAREGPT_RATES: tuple[float, ...] = (0.2, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.4)
SHAREGPT_RATES += (1.6, 1.7, 1.8, 2.0)


def sustainable_rate(
    rates: Sequence[float],
    latencies: Sequence[float],
    target_s: float = LATENCY_TARGET_S,
    *,
    interpolate: bool = True,
) -> float:
    """The highest request rate whose mean normalized latency stays at or under ``target_s``
    (seconds per token), read off a swept curve: ``rates`` in increasing order and the latency at
    each. Interpolated linearly between the last rate that meets the target and the first that
    does not (``interpolate=False``: that last rate); the largest rate if all meet it; NaN if the
    first already misses it."""
    rates = [check_positive_number("each rate", r, " of requests per second") for r in rates]
    if len(rates) != len(latencies) or not rates:
        raise ValueError(
            f"rates and latencies must be equally long and not empty, got {len(rates)} rates "
            f"and {len(latencies)} latencies"
        )
    if any(b <= a for a, b in zip(rates, rates[1:], strict=False)):
        raise ValueError(f"rates must increase, got {rates}")
    target_s = check_positive_number("target_s", target_s, " of seconds per token")
    for i, latency in enumerate(latencies):
        if not latency <= target_s:  # NaN (nothing finished) misses the target too
            if i == 0:
                return math.nan
            low, high = latencies[i - 1], latency
            if not interpolate or not math.isfinite(high):
                return rates[i - 1]
            return rates[i - 1] + (target_s - low) / (high - low) * (rates[i] - rates[i - 1])
    return rates[-1]


@dataclass(frozen=True)
class RateSweep:
    """Latency against request rate for several schemes on one workload.

    ``results[name]`` holds one :class:`~kvcourse.serving.latency.LatencyResult` per rate of
    ``rates`` (req/s, increasing); ``max_rates[name]`` is the highest rate that meets the target
    mean normalized latency ``target_s``, interpolated (:func:`sustainable_rate`), and
    ``max_swept_rates[name]`` the largest swept rate that meets it.
    """

    workload: str
    num_requests: int
    seed: int
    rates: tuple[float, ...]
    target_s: float
    results: dict[str, tuple[LatencyResult, ...]]
    max_rates: dict[str, float]
    max_swept_rates: dict[str, float]

    def latencies(self, name: str) -> list[float]:
        """Mean normalized latency (s/token) of scheme ``name`` at each rate."""
        return [r.normalized_latency_s for r in self.results[name]]

    def ratios(self, of: str = "Paged") -> dict[str, float]:
        """How many times the rate of scheme ``of`` each other scheme sustains:
        ``{"paged/oracle": …, "paged/max": …}`` for the default schemes."""
        if of not in self.max_rates:
            raise ValueError(f"no scheme named {of!r} in this sweep: {list(self.max_rates)}")
        top = self.max_rates[of]
        return {
            f"{of.lower()}/{name.lower()}": top / rate if rate > 0 else math.nan
            for name, rate in self.max_rates.items()
            if name != of
        }


def _progress_bar(total: int, progress: bool | None, workload: str):
    """A tqdm bar, or None: ``progress=None`` shows one only on an interactive terminal, so a
    notebook executed to build the book prints nothing; True shows one anywhere (in Jupyter as a
    widget, through tqdm.auto)."""
    if progress is False or (progress is None and not _on_a_terminal()):
        return None
    if progress is None:
        from tqdm import tqdm
    else:
        from tqdm.auto import tqdm
    return tqdm(total=total, desc=f"latency sweep, {workload}", unit="run", leave=False)


def _on_a_terminal() -> bool:
    stream = sys.stderr
    return stream is not None and hasattr(stream, "isatty") and stream.isatty()


def latency_rate_sweep(
    rates: Sequence[float] = SHAREGPT_RATES,
    schemes: Sequence[MemoryScheme] | None = None,
    *,
    workload: str | LengthDistribution = "sharegpt",
    num_requests: int = 1000,
    seed: int = 0,
    num_slots: int = A100_SLOTS,
    cost: IterationCost | None = None,
    target_s: float = LATENCY_TARGET_S,
    progress: bool | None = None,
    scheduler: type[IterationScheduler] = VllmPaperScheduler,
) -> RateSweep:
    """Serve ``num_requests`` seeded requests of ``workload`` (``"sharegpt"``, ``"alpaca"`` or a
    :class:`~kvcourse.workloads.LengthDistribution`) at each of ``rates`` (req/s) under each of
    ``schemes`` (default Max, Oracle + buddy, Paged), every run until its queue drains, and find
    each scheme's highest rate at a mean normalized latency ≤ ``target_s`` (50 ms/token).

    ``progress``: a tqdm progress bar, one step per run; None (default) shows it only on an
    interactive terminal, so a notebook executed for the book prints nothing; False never; True
    always (in Jupyter as a widget: for JupyterLab, not for book pages). ``scheduler``: the
    scheduler class every run uses, the 2023 vLLM paper's by default (a student's of assignment
    a4 plugs in here). Deterministic for a seed. How long the default grid takes is measured by
    ``bench/serving_speed.py``, not stated here.
    """
    rates = tuple(sorted(check_positive_number("each rate", r, " of req/s") for r in rates))
    if not rates or len(set(rates)) != len(rates):
        raise ValueError(f"rates must be distinct positive rates, at least one; got {rates}")
    if schemes is None:
        schemes = default_schemes()
    if isinstance(schemes, MemoryScheme) or not isinstance(schemes, Sequence) or not schemes:
        raise ValueError(f"schemes must be a non-empty list of MemoryScheme, got {schemes!r}")
    names = [check_scheme(p).name for p in schemes]
    if len(set(names)) != len(names):
        raise ValueError(f"schemes must have distinct names to key the results, got {names}")
    dist = workload_lengths(workload)
    num_requests = check_positive_int("num_requests", num_requests, "e.g. 1000")
    if num_requests < 2:
        raise ValueError("num_requests must be at least 2, so that the requests have a rate")
    cost = check_cost(cost)
    target_s = check_positive_number("target_s", target_s, " of seconds per token")
    check_scheduler_class(scheduler)
    if not isinstance(progress, bool) and progress is not None:
        raise TypeError(f"progress must be True, False or None, got {progress!r}")
    workloads = {r: generate_requests(num_requests, dist, rate=r, seed=seed) for r in rates}
    bar = _progress_bar(len(rates) * len(schemes), progress, dist.name)
    results: dict[str, tuple[LatencyResult, ...]] = {}
    try:
        for scheme in schemes:
            row = []
            for rate in rates:
                if bar is not None:
                    bar.set_postfix_str(f"{scheme.name} at {rate:g} req/s")
                run = measure_latency(
                    workloads[rate], scheme, num_slots=num_slots, cost=cost, scheduler=scheduler
                )
                row.append(run)
                if bar is not None:
                    bar.update()
            results[scheme.name] = tuple(row)
    finally:
        if bar is not None:
            bar.close()
    return RateSweep(
        workload=dist.name,
        num_requests=num_requests,
        seed=seed,
        rates=rates,
        target_s=target_s,
        results=results,
        max_rates={
            name: sustainable_rate(rates, [r.normalized_latency_s for r in row], target_s)
            for name, row in results.items()
        },
        max_swept_rates={
            name: sustainable_rate(
                rates, [r.normalized_latency_s for r in row], target_s, interpolate=False
            )
            for name, row in results.items()
        },
    )


def sweep_each_scheme(
    grids: Mapping[str, Sequence[float]],
    schemes: Sequence[MemoryScheme] | None = None,
    **options: object,
) -> list[RateSweep]:
    """One :func:`latency_rate_sweep` per scheme, each on its own grid of rates.

    ``grids`` maps a scheme's name to the rates (req/s) it is swept at, in the order the sweeps
    come back; ``schemes`` holds the schemes those names are looked up in (default Max, Oracle +
    buddy, Paged). ``options`` (``num_requests``, ``seed``, ``workload``, ``progress``, ...) go
    to every sweep unchanged, so a scheme's curve is the one ``latency_rate_sweep`` gives on its
    grid alone. Merge the list into one curve per scheme with
    :func:`kvcourse.viz.latency_curves`. Raises ``ValueError`` for an empty ``grids`` or a name
    that is not one of ``schemes``.
    """
    if not isinstance(grids, Mapping) or not grids:
        raise ValueError(
            f"grids must map scheme names to rates, e.g. SHAREGPT_GRIDS; got {grids!r}"
        )
    if schemes is None:
        schemes = default_schemes()
    if isinstance(schemes, MemoryScheme) or not isinstance(schemes, Sequence) or not schemes:
        raise ValueError(f"schemes must be a non-empty list of MemoryScheme, got {schemes!r}")
    by_name = {check_scheme(s).name: s for s in schemes}
    unknown = [name for name in grids if name not in by_name]
    if unknown:
        raise ValueError(f"grids name schemes {unknown} that are not among {list(by_name)}")
    return [latency_rate_sweep(rates, [by_name[name]], **options) for name, rates in grids.items()]


def bisect_sustainable_rate(
    scheme: MemoryScheme,
    *,
    low: float,
    high: float,
    workload: str | LengthDistribution = "sharegpt",
    num_requests: int = 1000,
    seed: int = 0,
    num_slots: int = A100_SLOTS,
    cost: IterationCost | None = None,
    target_s: float = LATENCY_TARGET_S,
    tolerance: float = 0.01,
) -> float:
    """The highest rate at which ``scheme`` keeps the mean normalized latency ≤ ``target_s``,
    bisected between ``low`` and ``high`` req/s until they are within ``tolerance`` of each other
    (the lecture's method): the last rate found to meet the target. NaN if ``low`` already misses
    it; ``high`` if it meets it (raise ``high``). Each probe is one run of ``num_requests``
    seeded requests (the same seed at every rate), served until the queue drains."""
    check_scheme(scheme)
    low = check_positive_number("low", low, " of req/s")
    high = check_positive_number("high", high, " of req/s")
    tolerance = check_positive_number("tolerance", tolerance, " of req/s")
    target_s = check_positive_number("target_s", target_s, " of seconds per token")
    if not low < high:
        raise ValueError(f"low must be below high, got low={low} and high={high}")
    dist = workload_lengths(workload)
    cost = check_cost(cost)

    def meets(rate: float) -> bool:
        requests = generate_requests(num_requests, dist, rate=rate, seed=seed)
        result = measure_latency(requests, scheme, num_slots=num_slots, cost=cost)
        return result.normalized_latency_s <= target_s

    if not meets(low):
        return math.nan
    if meets(high):
        return high
    while high - low > tolerance:
        mid = (low + high) / 2
        if meets(mid):
            low = mid
        else:
            high = mid
    return low
