"""How long §9's cluster simulations take on this machine (budget: the Conductor's four-placement
comparison on a real 12k-request trace ≤ 20 s).

Run from the repository root: ``.venv/bin/python bench/conductor_speed.py``. It prints, for each
of Mooncake's two traces, the wall time of the four-placement comparison (random, load-balanced,
cache-aware, cache-aware + replication; 8 prefill instances, 3,000-block caches) with and without
the 5 s TTFT SLO, then the three rejection rules of the overload simulation (8P + 8D, Poisson
at twice the decode capacity, one hour).
"""

from __future__ import annotations

import time

from kvcourse.cluster import (
    ConductorConfig,
    compare_placements,
    compare_rejection_rules,
    poisson_requests,
)
from kvcourse.traces import load_mooncake_trace


def main() -> None:
    """Time each simulation and print one line per run."""
    for name in ("conversation", "synthetic"):
        trace = load_mooncake_trace(name)
        for slo in (5.0, None):
            start = time.perf_counter()
            runs = compare_placements(trace, config=ConductorConfig(ttft_slo_s=slo))
            seconds = time.perf_counter() - start
            hits = " / ".join(f"{r.hit_rate:.3f}" for r in runs.values())
            print(
                f"conductor  {name:<12} ({trace.num_requests:>6,} requests) SLO {slo!s:>4}: "
                f"{seconds:5.2f} s for 4 placements (budget 20 s); hit rates {hits}"
            )
    trace = load_mooncake_trace("conversation")
    start = time.perf_counter()
    requests = poisson_requests(trace, load=2.0, seed=0)
    results = compare_rejection_rules(requests)
    seconds = time.perf_counter() - start
    wasted = " / ".join(f"{r.wasted_prefills:,}" for r in results)
    print(
        f"overload   {len(requests):,} Poisson requests, 3 rejection rules: {seconds:5.2f} s; "
        f"wasted prefills {wasted}"
    )


if __name__ == "__main__":
    main()
