"""Time the serving simulator (§6, §7) against its budget and print what it computed.

The budget (issue 11): one 1,500-request ShareGPT-like simulation of OPT-13B on an A100-40GB,
overloaded, in ≤ 10 s on a 2-core CPU. This script times that run under each scheme and
recovery, both as the §3 memory accounting (``simulate``, stopped at the last arrival) and as the
§7 latency measurement (``measure_latency``, served until the queue drains), then the §7
latency-rate sweep (``--no-sweep`` skips it).

Run from the repository root: ``.venv/bin/python bench/serving_speed.py``. Timings depend on the
machine; nothing is written.
"""

from __future__ import annotations

import argparse
import time

from kvcourse.serving import (
    OracleScheme,
    PagedScheme,
    ReserveMaxScheme,
    latency_rate_sweep,
    measure_latency,
    simulate,
)
from kvcourse.workloads import sharegpt_like

BUDGET_S = 10.0


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=3.0, help="request rate (default 3 req/s)")
    parser.add_argument("--requests", type=int, default=1500, help="requests (default 1500)")
    parser.add_argument("--no-sweep", action="store_true", help="skip the latency-rate sweep")
    args = parser.parse_args()
    requests = sharegpt_like(args.requests, rate=args.rate, seed=0)
    schemes = [
        ReserveMaxScheme(),
        OracleScheme(),
        PagedScheme(),
        PagedScheme(recovery="swap"),
        PagedScheme(32, recovery="cheaper"),
    ]
    print(
        f"{args.requests} ShareGPT-like requests at {args.rate:g} req/s, OPT-13B on an "
        f"A100-40GB (12,596 slots); budget {BUDGET_S:g} s per simulation"
    )
    header = (
        f"{'scheme':36s} {'simulate':>9s} {'latency':>8s}  {'verdict':8s} {'ms/token':>9s} "
        f"{'p90':>8s} {'batch':>6s} {'preempt':>8s} {'recomputed':>11s} {'swapped GB':>11s}"
    )
    print(header)
    worst = 0.0
    for scheme in schemes:
        _, t_sim = timed(simulate, requests, scheme)
        result, t_lat = timed(measure_latency, requests, scheme)
        worst = max(worst, t_sim, t_lat)
        verdict = "ok" if max(t_sim, t_lat) <= BUDGET_S else "OVER"
        print(
            f"{scheme.label:36s} {t_sim:8.2f}s {t_lat:7.2f}s  {verdict:8s} "
            f"{1e3 * result.normalized_latency_s:9.1f} "
            f"{1e3 * result.normalized_latency_p90_s:8.1f} "
            f"{result.mean_batch_size:6.1f} {result.preemptions:8,d} "
            f"{result.recomputed_tokens:11,d} {result.swapped_out_bytes / 1e9:11.1f}"
        )
    print(f"slowest single simulation: {worst:.2f} s (budget {BUDGET_S:g} s)")
    if args.no_sweep:
        return
    sweep, t_sweep = timed(latency_rate_sweep, progress=None)
    runs = len(sweep.rates) * len(sweep.results)
    print(
        f"\nlatency-rate sweep: {sweep.num_requests} requests x {len(sweep.rates)} rates x "
        f"{len(sweep.results)} schemes = {runs} runs in {t_sweep:.1f} s"
    )
    print("rate (req/s) " + " ".join(f"{r:6.2f}" for r in sweep.rates))
    for name in sweep.results:
        print(f"{name:12s} " + " ".join(f"{1e3 * x:6.0f}" for x in sweep.latencies(name)))
    rates = ", ".join(f"{name} {rate:.2f}" for name, rate in sweep.max_rates.items())
    ratios = ", ".join(f"{key} {value:.2f}x" for key, value in sweep.ratios().items())
    print(f"highest rate at <= 50 ms/token (interpolated): {rates} req/s; {ratios}")


if __name__ == "__main__":
    main()
