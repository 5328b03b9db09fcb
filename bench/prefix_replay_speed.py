"""Time the prefix-cache replay (§8.4) against its budget and print the hit rates it computed.

The budget: Mooncake's conversation trace (12,031 requests, about 290,000 block references) at
8 capacities × 2 evictions (LRU, LFU) in ≤ 10 s in all on a 2-core CPU. Without that trace at
hand, this script builds a synthetic one of the same size with heavy prefix sharing (multi-turn
sessions that extend their previous prompt, on a few shared system prompts) and replays it; if
``kvcourse.traces`` is installed it also replays the real trace.

Run from the repository root: ``.venv/bin/python bench/prefix_replay_speed.py``. Timings depend
on the machine; nothing is written.
"""

from __future__ import annotations

import argparse
import random
import time

from kvcourse.cluster import replay_prefix_cache

BUDGET_S = 10.0
CAPACITIES = (1_000, 2_000, 5_000, 10_000, 20_000, 30_000, 50_000, None)


def synthetic_trace(num_requests: int = 12_000, seed: int = 0) -> list[list[int]]:
    """Block-id lists like a chat service's: a session starts from one of 40 shared system
    prompts (a few very popular) plus its own blocks, and every later turn is the previous
    prompt plus a few new blocks (the answer and the next question). Hundreds of sessions
    interleave, so a session's next turn comes thousands of blocks later. About 24 blocks a
    request (about 295,000 references), a fifth of the distinct blocks used once."""
    rng = random.Random(seed)
    next_id = 0

    def new_blocks(n: int) -> list[int]:
        nonlocal next_id
        next_id += n
        return list(range(next_id - n, next_id))

    system_prompts = [new_blocks(rng.randint(1, 8)) for _ in range(40)]
    weights = [1 / (rank + 1) for rank in range(len(system_prompts))]  # Zipf-like popularity
    active: list[list[int]] = []
    requests: list[list[int]] = []
    while len(requests) < num_requests:
        if len(active) < 400 or rng.random() < 0.25:
            prompt = rng.choices(system_prompts, weights)[0] + new_blocks(rng.randint(4, 24))
            active.append(prompt)
        else:
            index = rng.randrange(len(active))
            prompt = active[index] + new_blocks(rng.randint(1, 4))
            if len(prompt) > 60 or rng.random() < 0.15:  # the session ends
                active[index] = active[-1]
                active.pop()
            else:
                active[index] = prompt
        requests.append(prompt)
    return requests


def replay_table(name: str, requests: list[list[int]]) -> float:
    """Replay ``requests`` at every capacity under LRU and LFU, print one row per capacity and
    return the total time."""
    references = sum(map(len, requests))
    distinct = len({block for blocks in requests for block in blocks})
    print(
        f"\n{name}: {len(requests):,} requests, {references:,} block references, "
        f"{distinct:,} distinct blocks"
    )
    print(f"{'capacity':>10s} {'LRU hit':>8s} {'time':>7s} {'LFU hit':>8s} {'time':>7s}")
    total = 0.0
    for capacity in CAPACITIES:
        row = f"{'infinite' if capacity is None else f'{capacity:,}':>10s}"
        for eviction in ("lru", "lfu"):
            start = time.perf_counter()
            result = replay_prefix_cache(requests, capacity, eviction)
            elapsed = time.perf_counter() - start
            total += elapsed
            row += f" {result.hit_rate:8.3f} {elapsed:6.2f}s"
        print(row)
    verdict = "ok" if total <= BUDGET_S else "OVER"
    cells = f"{len(CAPACITIES)} capacities x 2 evictions"
    print(f"{cells}: {total:.2f} s (budget {BUDGET_S:g} s) {verdict}")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=12_000, help="synthetic requests")
    parser.add_argument("--seed", type=int, default=0, help="synthetic trace seed")
    args = parser.parse_args()
    replay_table("synthetic trace", synthetic_trace(args.requests, args.seed))
    try:
        from kvcourse.traces import load_mooncake_trace
    except ImportError:
        print("\nkvcourse.traces is not installed: the real Mooncake trace was not replayed")
        return
    try:
        trace = load_mooncake_trace("conversation")
    except (OSError, ValueError, LookupError) as error:
        print(f"\nthe Mooncake conversation trace could not be loaded: {error}")
        return
    replay_table("Mooncake conversation trace", list(trace.block_id_lists()))


if __name__ == "__main__":
    main()
