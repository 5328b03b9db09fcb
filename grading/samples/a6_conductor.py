"""Sample submissions for a6_conductor (see kvcourse_grader.samples).

Each sample starts from the current student version in notebooks/ and fills the solution cells
named here; the others take the instructor's solution unless ``default=STUB``. ``passes`` lists the
test cells that must score. The tests grade all of them in one ``kvcourse-grade autograde`` run;
``kvcourse-grade samples a6_conductor --out DIR`` writes them out for a dry run.

The runner's own robustness (a loop, a dead kernel, a memory hog, deleted test cells) is shown by
the samples of a0_kv_sizing. These show what this assignment's tests add: Ex 8 and 9 against the
lecture's numbers, one TTFT estimate that every later part builds on, and two Conductors tested on
hand-made cluster states, on random states against a brute-force search, and on real traces.
"""

from kvcourse_grader.leak_samples import leak_samples
from kvcourse_grader.samples import (
    FORGE_SCORE,
    SWALLOW_ERRORS,
    WHATEVER,
    Sample,
    basic_samples,
    raises_first,
    replaced,
    tests_of,
)

# --- Part 1: storage for compute ----------------------------------------------------------------
#: K or V only: the factor 2 of K and V is forgotten.
ONE_OF_K_AND_V = replaced(
    "    return 2 * num_layers * num_kv_heads * head_dim * bytes_per_value\n",
    "    return num_layers * num_kv_heads * head_dim * bytes_per_value\n",
)

#: Recompute at the data sheet's peak: the utilization is checked but never used.
AT_PEAK = replaced(
    "    return flops / (num_gpus * peak_flops * utilization)\n",
    "    return flops / (num_gpus * peak_flops)\n",
)

# --- Part 2: the estimate -----------------------------------------------------------------------
#: The queue is left out of the estimate: every instance looks idle.
NO_QUEUE = replaced(
    "        return view.queue_s[instance] + costs.prefill_s(view.prompt_len, own)\n",
    "        return costs.prefill_s(view.prompt_len, own)\n",
)

#: A pull copies the whole longer prefix, also the blocks the instance already holds.
PULLS_WHOLE_PREFIX = replaced(
    "        costs.transfer_s(longer - own)\n",
    "        costs.transfer_s(longer)\n",
)

#: A pull costs nothing: the RDMA transfer is left out.
FREE_PULL = replaced(
    "        costs.transfer_s(longer - own)\n        + view.queue_s[instance]\n",
    "        view.queue_s[instance]\n",
)

# --- Part 3: cache-aware placement --------------------------------------------------------------
#: A TTFT exactly at the SLO is rejected.
REJECTS_AT_SLO = replaced(
    "    if slo is not None and best_ttft > slo:\n",
    "    if slo is not None and best_ttft >= slo:\n",
)

#: No rejection: a request that cannot meet the SLO is placed anyway.
NEVER_REJECTS = replaced(
    "    if slo is not None and best_ttft > slo:\n"
    "        return Decision(None, 0, None, best_ttft)\n",
    "",
)

#: On a tie the later instance wins (<= instead of <).
LAST_ON_TIE = replaced("        if ttft < best_ttft:\n", "        if ttft <= best_ttft:\n")

#: The longest cached prefix wins, whatever the queue: "cache-aware" read as "cache-only".
LONGEST_PREFIX = replaced(
    "    best, best_ttft = 0, ttft_estimate(view, config, 0)\n"
    "    for i in range(1, len(view.queue_s)):\n"
    "        ttft = ttft_estimate(view, config, i)\n"
    "        if ttft < best_ttft:\n"
    "            best, best_ttft = i, ttft\n",
    "    best = view.prefix_blocks.index(max(view.prefix_blocks))\n"
    "    best_ttft = ttft_estimate(view, config, best)\n",
)

# --- Part 4: replication ------------------------------------------------------------------------
#: Any longer prefix may be pulled: the threshold is ignored.
NO_THRESHOLD = replaced(
    "        if longest > own and longest >= config.replication_threshold * own:\n",
    "        if longest > own:\n",
)

#: Where a pull is allowed, only the pull is considered (the paper's rule read as "always pull").
ALWAYS_PULLS = replaced(
    "        sources = [None]\n"
    "        if longest > own and longest >= config.replication_threshold * own:\n"
    "            sources.append(holder)\n",
    "        sources = [None]\n"
    "        if longest > own and longest >= config.replication_threshold * own:\n"
    "            sources = [holder]\n",
)

#: The decision names the source but keeps the instance's own, shorter prefix.
KEEPS_OWN_PREFIX = replaced(
    "    cached = longest if source is not None else view.prefix_blocks[instance]\n",
    "    cached = view.prefix_blocks[instance]\n",
)

# --- ties broken the wrong way ------------------------------------------------------------------
#: Of instances with equal estimates, the one with the longer prefix ("more reuse").
LONGER_PREFIX_ON_TIE = replaced(
    "        if ttft < best_ttft:\n",
    "        longer = view.prefix_blocks[i] > view.prefix_blocks[best]\n"
    "        if ttft < best_ttft or (ttft == best_ttft and longer):\n",
)

#: Estimates compared to the millisecond, as the tests print them: within a millisecond, the
#: lower instance wins even when the other is sooner.
MILLISECOND_TIES = replaced(
    "        if ttft < best_ttft:\n",
    "        if round(ttft, 3) < round(best_ttft, 3):  # to the millisecond\n",
)

#: The longest prefix pulled from its highest-numbered holder.
HIGHEST_HOLDER = replaced(
    "    holder = view.prefix_blocks.index(longest)\n",
    "    holder = len(view.prefix_blocks) - 1 - view.prefix_blocks[::-1].index(longest)\n",
)

#: The pull weighed before the instance's own prefix, so a tie goes to pulling.
PULLS_ON_TIE = replaced(
    "            sources.append(holder)\n",
    "            sources.insert(0, holder)  # the pull first\n",
)

#: The replicating Conductor rejects an estimate exactly at the SLO.
REPLICATING_REJECTS_AT_SLO = replaced(
    "    if slo is not None and ttft > slo:\n",
    "    if slo is not None and ttft >= slo:\n",
)

# --- right answers written differently ----------------------------------------------------------
#: Products and quotients in another order, the pulled estimate added up the other way round,
#: both Conductors as a min over every option with the instance (and the pull) as tie-breakers.
MIN_STORAGE = """
import math


def kv_bytes_per_token(num_layers, num_kv_heads, head_dim, bytes_per_value):
    return math.prod([bytes_per_value, head_dim, num_kv_heads, num_layers, 2])


def recompute_seconds(flops, num_gpus, peak_flops, utilization):
    if utilization <= 0 or utilization > 1:
        raise ValueError("utilization is a fraction in (0, 1]")
    return flops / num_gpus / peak_flops / utilization


def read_seconds(num_bytes, bandwidth):
    return num_bytes * (1.0 / bandwidth)


def bytes_per_flop(kv_bytes, flops):
    return kv_bytes / flops
"""

MIN_ESTIMATE = """
def ttft_estimate(view, config, instance, pull_from=None):
    n = len(view.prefix_blocks)
    if instance not in range(n) or (pull_from is not None and pull_from not in range(n)):
        raise ValueError(f"instances are 0..{n - 1}")
    own = view.prefix_blocks[instance]
    longer = own if pull_from is None else max(own, view.prefix_blocks[pull_from])
    prefill = config.costs.prefill_s(view.prompt_len, longer)
    if longer == own:
        return prefill + view.queue_s[instance]
    return prefill + (view.queue_s[instance] + config.costs.transfer_s(longer - own))
"""

MIN_CACHE_AWARE = """
def choose_cache_aware(view, config):
    ttfts = [ttft_estimate(view, config, i) for i in range(len(view.queue_s))]
    best = min(range(len(ttfts)), key=lambda i: (ttfts[i], i))
    if config.ttft_slo_s is not None and ttfts[best] > config.ttft_slo_s:
        return Decision(None, 0, None, ttfts[best])
    return Decision(best, view.prefix_blocks[best], None, ttfts[best])
"""

MIN_REPLICATING = """
def choose_replicating(view, config):
    prefixes = view.prefix_blocks
    longest = max(prefixes)
    holder = prefixes.index(longest)
    options = []  # (ttft, instance, pulled, cached blocks, source)
    for i, own in enumerate(prefixes):
        options.append((ttft_estimate(view, config, i), i, False, own, None))
        if own < longest and own * config.replication_threshold <= longest:
            pulled = ttft_estimate(view, config, i, pull_from=holder)
            options.append((pulled, i, True, longest, holder))
    ttft, instance, _, cached, source = min(options, key=lambda option: option[:3])
    if config.ttft_slo_s is not None and ttft > config.ttft_slo_s:
        return Decision(None, 0, None, ttft)
    return Decision(instance, cached, source, ttft)
"""

#: Both Conductors scan from the highest instance down, keeping the last of equals (<=), so ties
#: still go to the lowest; within an instance the pull is weighed first, the own prefix last.
REVERSE_CACHE_AWARE = """
def choose_cache_aware(view: ClusterView, config: ConductorConfig) -> Decision:
    best = None
    for i in reversed(range(len(view.queue_s))):
        ttft = ttft_estimate(view, config, i)
        if best is None or ttft <= best[0]:
            best = (ttft, i)
    ttft, i = best
    if config.ttft_slo_s is None or ttft <= config.ttft_slo_s:
        return Decision(i, view.prefix_blocks[i], None, ttft)
    return Decision(None, 0, None, ttft)
"""

REVERSE_REPLICATING = """
def choose_replicating(view: ClusterView, config: ConductorConfig) -> Decision:
    prefixes = view.prefix_blocks
    holder = max(range(len(prefixes)), key=lambda i: (prefixes[i], -i))
    longest = prefixes[holder]
    best = None  # (ttft, instance, cached blocks, source)
    for i in reversed(range(len(prefixes))):
        own = prefixes[i]
        if own < longest and longest / config.replication_threshold >= own:
            ttft = ttft_estimate(view, config, i, holder)
            if best is None or ttft <= best[0]:
                best = (ttft, i, longest, holder)
        ttft = ttft_estimate(view, config, i)
        if best is None or ttft <= best[0]:
            best = (ttft, i, own, None)
    ttft, instance, cached, source = best
    if config.ttft_slo_s is not None and ttft > config.ttft_slo_s:
        return Decision(None, 0, None, ttft)
    return Decision(instance, cached, source, ttft)
"""


# --- a hostile student: the library's Conductor behind the tests' back, and tricks for Part 1 ---
HOSTILE_CONDUCTOR = """
import kvcourse.cluster


def choose_cache_aware(view, config):
    return kvcourse.cluster.cache_aware(view, config)
"""

HOSTILE_STORAGE = f"""
import sys
{WHATEVER}


def kv_bytes_per_token(num_layers, num_kv_heads, head_dim, bytes_per_value):
    {FORGE_SCORE}
    {SWALLOW_ERRORS}
    return Whatever()


def recompute_seconds(flops, num_gpus, peak_flops, utilization):
    return Whatever()


def read_seconds(num_bytes, bandwidth):
    return Whatever()


def bytes_per_flop(kv_bytes, flops):
    return Whatever()
"""

SAMPLES = {
    **basic_samples(),
    "partial": Sample(
        about="Ex 8 without the factor 2 of K and V, and no rejection at the SLO",
        cells={"storage": ONE_OF_K_AND_V, "cache_aware": NEVER_REJECTS},
        passes=tests_of("estimate", "replicating"),
    ),
    "one_of_k_and_v": Sample(
        about="Ex 8's KV bytes without the factor 2 of K and V",
        cells={"storage": ONE_OF_K_AND_V},
        passes=tests_of("estimate", "cache_aware", "replicating", "cluster"),
    ),
    "at_peak": Sample(
        about="recompute at the data sheet's peak, the utilization unused",
        cells={"storage": AT_PEAK},
        passes=tests_of("estimate", "cache_aware", "replicating", "cluster"),
    ),
    "no_queue": Sample(
        about="the TTFT estimate leaves out the queue",
        cells={"estimate": NO_QUEUE},
        passes=tests_of("storage"),
    ),
    "pulls_whole_prefix": Sample(
        about="a pull copies the whole longer prefix, blocks already held included",
        cells={"estimate": PULLS_WHOLE_PREFIX},
        passes=(*tests_of("storage", "cache_aware"), "test_replicating", "hidden_cluster"),
    ),
    "free_pull": Sample(
        about="a pull's RDMA transfer costs nothing",
        cells={"estimate": FREE_PULL},
        passes=tests_of("storage", "cache_aware"),
    ),
    "rejects_at_slo": Sample(
        about="a TTFT exactly at the SLO is rejected",
        cells={"cache_aware": REJECTS_AT_SLO},
        passes=tests_of("storage", "estimate", "replicating", "cluster"),
    ),
    "never_rejects": Sample(
        about="cache-aware placement never rejects",
        cells={"cache_aware": NEVER_REJECTS},
        passes=tests_of("storage", "estimate", "replicating"),
    ),
    "last_on_tie": Sample(
        about="on a tie the later instance wins",
        # the real traces' ties are between idle instances that hold nothing of the prompt
        cells={"cache_aware": LAST_ON_TIE},
        passes=tests_of("storage", "estimate", "replicating", "cluster"),
    ),
    "longest_prefix": Sample(
        about="the longest cached prefix wins, whatever the queue",
        cells={"cache_aware": LONGEST_PREFIX},
        passes=tests_of("storage", "estimate", "replicating"),
    ),
    "no_threshold": Sample(
        about="any longer prefix may be pulled: the threshold is ignored",
        cells={"replicating": NO_THRESHOLD},
        passes=tests_of("storage", "estimate", "cache_aware"),
    ),
    "always_pulls": Sample(
        about="where a pull is allowed it is the only option",
        # RDMA is fast enough on the real trace that a pull always pays at 100 GB/s
        cells={"replicating": ALWAYS_PULLS},
        passes=(*tests_of("storage", "estimate", "cache_aware"), "test_cluster"),
    ),
    "keeps_own_prefix": Sample(
        about="a pull is named but the decision keeps the instance's own prefix",
        cells={"replicating": KEEPS_OWN_PREFIX},
        passes=tests_of("storage", "estimate", "cache_aware"),
    ),
    "longer_prefix_on_tie": Sample(
        about="of instances with equal estimates, the one holding the longer prefix wins",
        cells={"cache_aware": LONGER_PREFIX_ON_TIE},
        passes=(*tests_of("storage", "estimate", "replicating", "cluster"), "test_cache_aware"),
    ),
    "millisecond_ties": Sample(
        about="estimates compared to the millisecond: within one, the lower instance wins",
        cells={"cache_aware": MILLISECOND_TIES},
        passes=(*tests_of("storage", "estimate", "replicating"), "test_cache_aware"),
    ),
    "highest_holder": Sample(
        about="the longest prefix is pulled from its highest-numbered holder",
        cells={"replicating": HIGHEST_HOLDER},
        passes=(
            *tests_of("storage", "estimate", "cache_aware"),
            "test_replicating",
            "test_cluster",
        ),
    ),
    "pulls_on_tie": Sample(
        about="a pull that takes exactly as long as the instance's own prefix is taken",
        cells={"replicating": PULLS_ON_TIE},
        passes=(*tests_of("storage", "estimate", "cache_aware", "cluster"), "test_replicating"),
    ),
    "replicating_rejects_at_slo": Sample(
        about="the replicating Conductor rejects an estimate exactly at the SLO",
        cells={"replicating": REPLICATING_REJECTS_AT_SLO},
        passes=(*tests_of("storage", "estimate", "cache_aware", "cluster"), "test_replicating"),
    ),
    "min_over_options": Sample(
        about="every part right: products in another order, the pulled estimate added the other "
        "way round, both Conductors as a min over options",
        cells={
            "storage": MIN_STORAGE,
            "estimate": MIN_ESTIMATE,
            "cache_aware": MIN_CACHE_AWARE,
            "replicating": MIN_REPLICATING,
        },
    ),
    "reverse_scan": Sample(
        about="every part right: both Conductors scan from the highest instance down and keep the "
        "last of equals, the pull weighed before the own prefix",
        cells={"cache_aware": REVERSE_CACHE_AWARE, "replicating": REVERSE_REPLICATING},
    ),
    "raises": Sample(
        about="the estimate cell raises at top level, so ttft_estimate is never defined",
        cells={"estimate": raises_first},
        passes=tests_of("storage"),
    ),
    "syntax_error": Sample(
        about="Part 4 does not parse; every other part is right",
        cells={"replicating": lambda code: code.replace(") -> Decision:", ") -> Decision", 1)},
        passes=(*tests_of("storage", "estimate", "cache_aware"),),
    ),
    "hostile": Sample(
        about="the library's Conductor behind the tests' back; always-equal results, a forged "
        "score and swallowed errors for Part 1",
        cells={"cache_aware": HOSTILE_CONDUCTOR, "storage": HOSTILE_STORAGE},
        passes=tests_of("estimate", "replicating"),
    ),
}

# Students who read the hidden tests while they run; here the tests run in the grader (the
# simulator runs in a copy of the kernel, on a private copy of the library, and only its counts
# come back).
# (Not the tracer: a trace function on every call of the cluster simulation runs past its cell's
# time limit, so that student would lose points for being slow, which shows nothing.)
LEAKS = leak_samples("storage", "replicating", "kv_bytes_per_token")
SAMPLES.update({name: sample for name, sample in LEAKS.items() if name != "leaks_tracer"})
