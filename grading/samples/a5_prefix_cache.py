"""Sample submissions for a5_prefix_cache (see kvcourse_grader.samples).

Each sample starts from the current student version in notebooks/ and fills the solution cells
named here; the others take the instructor's solution unless ``default=STUB``. ``passes`` lists the
test cells that must score. The tests grade all of them in one ``kvcourse-grade autograde`` run;
``kvcourse-grade samples a5_prefix_cache --out DIR`` writes them out for a dry run.

The runner's own robustness (a loop, a dead kernel, a memory hog, deleted test cells) is shown by
the samples of a0_kv_sizing. These show what this assignment's tests add: a hash whose chain must
cover the whole prefix, one cache class graded in two parts (insert with LRU eviction, then the
lookup, tested on a cache that never evicts so that an eviction mistake costs only its own
part), and traces replayed against a brute-force reference.
"""

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

# --- Part 1: the chain --------------------------------------------------------------------------
#: Every block hashed from ROOT on its own: equal tokens after different prefixes get one name.
NO_PARENT = replaced(
    "        parent = block_hash(parent, list(tokens[start : start + block_size]))\n"
    "        hashes.append(parent)\n",
    "        hashes.append(block_hash(ROOT, list(tokens[start : start + block_size])))\n",
)

#: The partial last block gets a hash too.
HASHES_PARTIAL = replaced(
    "    for start in range(0, len(tokens) - block_size + 1, block_size):\n",
    "    for start in range(0, len(tokens), block_size):\n",
)

#: An off-by-one in the range: the last full block is missed when it ends the prompt.
MISSES_LAST_BLOCK = replaced(
    "    for start in range(0, len(tokens) - block_size + 1, block_size):\n",
    "    for start in range(0, len(tokens) - block_size, block_size):\n",
)

# --- Part 2: the insert --------------------------------------------------------------------------
#: A cached block is not moved to the most recent end: first in, first out.
FIFO = replaced(
    "            if block_id in self._blocks:\n                self._blocks.move_to_end(block_id)\n"
    "            else:\n                self._blocks[block_id] = None\n",
    "            if block_id not in self._blocks:\n                self._blocks[block_id] = None\n",
)

#: The least recently used block is evicted even when it belongs to the request being inserted.
EVICTS_OWN = replaced(
    "                oldest = next(b for b in self._blocks if b not in mine)\n",
    "                oldest = next(iter(self._blocks))\n",
)

#: Evictions happen but are not counted.
UNCOUNTED = replaced(
    "                del self._blocks[oldest]\n                self.evictions += 1\n",
    "                del self._blocks[oldest]\n",
)

# --- Part 3: the lookup --------------------------------------------------------------------------
#: Every cached block of the request counts, not only the leading run.
ANY_PRESENT = replaced(
    "            if block_id not in self._blocks:\n                break\n            hits += 1\n",
    "            if block_id in self._blocks:\n                hits += 1\n",
)

#: The lookup makes its hits recent, so a lookup without an insert changes the eviction order.
LOOKUP_TOUCHES = replaced(
    "                break\n            hits += 1\n",
    "                break\n"
    "            self._blocks.move_to_end(block_id)\n"
    "            hits += 1\n",
)

# --- Part 4: the savings -------------------------------------------------------------------------
#: A fully cached prompt computes nothing: the last token is reused too.
LAST_TOKEN_REUSED = replaced(
    "    reused = min(hit_blocks, (prompt_len - 1) // block_size)\n",
    "    reused = min(hit_blocks, prompt_len // block_size)\n",
)

#: Ex 7 counts the prefix's partial block as cached.
PARTIAL_BLOCK_CACHED = replaced(
    "    hit = prefix_len // block_size  # the prefix's full blocks\n",
    "    hit = -(-prefix_len // block_size)\n",
)

# --- a hostile student: the library's hashing behind the tests' back, and tricks for Part 4 ------
HOSTILE_HASHES = """
import kvcourse.blocks


def chained_hashes(tokens, block_size):
    return [h.hex() for h in kvcourse.blocks.chained_block_hashes(tokens, block_size)]
"""

HOSTILE_PREFILL = f"""
import sys
{WHATEVER}


def tokens_to_prefill(prompt_len, hit_blocks, block_size):
    {FORGE_SCORE}
    {SWALLOW_ERRORS}
    return Whatever()


def ex7_saved_share(prefix_len, num_requests, question_len, block_size):
    return Whatever()
"""

SAMPLES = {
    **basic_samples(),
    "partial": Sample(
        about="every block hashed on its own, and a first-in-first-out cache",
        cells={"chained_hashes": NO_PARENT, "MyPrefixCache": FIFO},
        passes=tests_of("lookup", "prefill"),
    ),
    "no_parent": Sample(
        about="each block hashed from ROOT on its own, not chained",
        cells={"chained_hashes": NO_PARENT},
        passes=tests_of("insert", "lookup", "prefill", "replay"),
    ),
    "hashes_partial": Sample(
        about="the partial last block gets a hash too",
        cells={"chained_hashes": HASHES_PARTIAL},
        passes=tests_of("insert", "lookup", "prefill", "replay"),
    ),
    "misses_last_block": Sample(
        about="an off-by-one that misses the last full block",
        cells={"chained_hashes": MISSES_LAST_BLOCK},
        passes=tests_of("insert", "lookup", "prefill", "replay"),
    ),
    "fifo": Sample(
        about="a cached block is not made recent again: first in, first out",
        cells={"MyPrefixCache": FIFO},
        passes=tests_of("chained_hashes", "lookup", "prefill"),
    ),
    "evicts_own": Sample(
        about="eviction may take a block of the request being inserted",
        cells={"MyPrefixCache": EVICTS_OWN},
        passes=tests_of("chained_hashes", "lookup", "prefill"),
    ),
    "uncounted": Sample(
        about="evictions are not counted",
        cells={"MyPrefixCache": UNCOUNTED},
        passes=tests_of("chained_hashes", "lookup", "prefill"),
    ),
    "any_present": Sample(
        about="the lookup counts every cached block, not the leading run",
        cells={"MyPrefixCache": ANY_PRESENT},
        passes=tests_of("chained_hashes", "insert", "prefill"),
    ),
    "lookup_touches": Sample(
        about="the lookup makes its hits recent",
        cells={"MyPrefixCache": LOOKUP_TOUCHES},
        passes=(*tests_of("chained_hashes", "insert", "prefill", "replay"), "hidden_lookup"),
    ),
    "last_token_reused": Sample(
        about="a fully cached prompt computes no token",
        cells={"prefill": LAST_TOKEN_REUSED},
        passes=tests_of("chained_hashes", "insert", "lookup", "replay"),
    ),
    "partial_block_cached": Sample(
        about="Ex 7 counts the prefix's partial block as cached",
        cells={"prefill": PARTIAL_BLOCK_CACHED},
        passes=tests_of("chained_hashes", "insert", "lookup", "replay"),
    ),
    "raises": Sample(
        about="the cache cell raises at top level, so MyPrefixCache is never defined",
        cells={"MyPrefixCache": raises_first},
        passes=tests_of("chained_hashes", "prefill"),
    ),
    "syntax_error": Sample(
        about="Part 4 does not parse; every other part is right",
        cells={"prefill": lambda code: code.replace(") -> int:", ") -> int", 1)},
        passes=tests_of("chained_hashes", "insert", "lookup", "replay"),
    ),
    "hostile": Sample(
        about="the library's hashing behind the tests' back; always-equal results, a forged "
        "score and swallowed errors for Part 4",
        cells={"chained_hashes": HOSTILE_HASHES, "prefill": HOSTILE_PREFILL},
        passes=tests_of("insert", "lookup", "replay"),
    ),
}
