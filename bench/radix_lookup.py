"""Time a prefix lookup in the radix tree and in the block-aligned cache (the page *Beyond block
prefixes*), on the four token workloads of ``kvcourse.token_workloads``.

For each workload, each cache first replays the whole workload with room for all of it (so
everything is cached), then every prompt is looked up again, read-only, and timed:
``RadixCache.match`` (walk the tree, compare tokens) against ``PrefixCache.match`` for block
sizes 1, 16 and 64 (hash every full block of the prompt, then probe the hash table until the
first miss). It also times a whole replay at half the workload's distinct tokens, acquire and
release included. The operation counts the page shows are machine-independent; these wall
times are not, and belong to the machine that printed them (Python, one core).

Run from the repository root: ``.venv/bin/python bench/radix_lookup.py [--out PATH]``; about a
minute on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time

from kvcourse.blocks import BlockPrefixAdapter, RadixCache, replay_tokens
from kvcourse.token_workloads import (
    agent_branching_workload,
    few_shot_workload,
    multi_turn_workload,
    system_prompt_workload,
)

WORKLOADS = {
    "system prompt": system_prompt_workload,
    "few-shot": few_shot_workload,
    "multi-turn": multi_turn_workload,
    "agent branching": agent_branching_workload,
}
BLOCK_SIZES = (1, 16, 64)
REPEATS = 5


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def best_of(fn, repeats: int = REPEATS) -> float:
    """The shortest of ``repeats`` runs of ``fn()``, in seconds (the least disturbed one)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def lookup_rows(name: str, work) -> list[str]:
    prompts = [r.prompt for r in work]
    tokens = sum(len(p) for p in prompts)
    room = sum(len(r.prompt) + len(r.answer) for r in work)
    rows = []
    radix = RadixCache(room)
    replay_tokens(radix, work)
    secs = best_of(lambda: [radix.match(p) for p in prompts])
    rows.append((name, "radix tree", secs, tokens, len(prompts)))
    for bs in BLOCK_SIZES:
        blocks = BlockPrefixAdapter(bs, room)
        replay_tokens(blocks, work)
        secs = best_of(lambda c=blocks.cache: [c.match(p) for p in prompts])
        rows.append((name, f"blocks of {bs}", secs, tokens, len(prompts)))
    return [
        f"{w:<16} {design:<13} {1e6 * s / n:>10.1f} {1e6 * s / t * 1000:>12.1f}"
        for w, design, s, t, n in rows
    ]


def replay_rows(name: str, work) -> list[str]:
    distinct = RadixCache(sum(len(r.prompt) + len(r.answer) for r in work))
    for r in work:
        distinct.insert(r.prompt + r.answer)
    cap = max(64, distinct.num_cached // 2 // 64 * 64)
    out = []
    for design, make in [("radix tree", lambda: RadixCache(cap))] + [
        (f"blocks of {bs}", lambda bs=bs: BlockPrefixAdapter(bs, cap)) for bs in BLOCK_SIZES
    ]:
        secs = best_of(lambda make=make: replay_tokens(make(), work), repeats=2)
        rate = replay_tokens(make(), work).hit_rate
        out.append(f"{name:<16} {design:<13} {cap:>8,} {rate:>8.3f} {secs:>9.2f}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="also write the report to this file")
    args = parser.parse_args()
    lines = [
        f"radix_lookup.py  {datetime.date.today().isoformat()}  {platform.node()}",
        f"CPU: {cpu_model()} ({os.cpu_count()} cores seen), Python {platform.python_version()}",
        "",
        "Read-only lookup of every prompt in a warm cache (best of 5 passes)",
        f"{'workload':<16} {'design':<13} {'µs/lookup':>10} {'µs/1k tokens':>12}",
    ]
    works = {name: make() for name, make in WORKLOADS.items()}
    for name, work in works.items():
        lines += lookup_rows(name, work)
    lines += [
        "",
        "Whole replay at half the distinct tokens (acquire + release, best of 2)",
        f"{'workload':<16} {'design':<13} {'slots':>8} {'hit rate':>8} {'seconds':>9}",
    ]
    for name, work in works.items():
        lines += replay_rows(name, work)
    report = "\n".join(lines)
    print(report)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(report + "\n")


if __name__ == "__main__":
    main()
