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

# --- the caller's lists, left as they were --------------------------------------------------------
#: The partial last block dropped from the caller's list before hashing.
DROPS_PARTIAL_TAIL = replaced(
    "    hashes = []\n",
    "    del tokens[len(tokens) - len(tokens) % block_size :]  # the partial block: no hash\n"
    "    hashes = []\n",
)

#: The request trimmed in place to what the cache keeps, once the blocks beyond it are gone.
TRIMS_REQUEST = replaced(
    "            if self._blocks.pop(block_id, 0) is None:\n                self.evictions += 1\n",
    "            if self._blocks.pop(block_id, 0) is None:\n                self.evictions += 1\n"
    "        del block_ids[self.capacity :]  # what is left is what the cache keeps\n",
)

#: The lookup takes the hit blocks off the front of the caller's list as it counts them.
LOOKUP_CONSUMES = replaced(
    "        hits = 0\n"
    "        for block_id in block_ids:\n"
    "            if block_id not in self._blocks:\n"
    "                break\n"
    "            hits += 1\n",
    "        hits = 0\n"
    "        while block_ids and block_ids[0] in self._blocks:\n"
    "            block_ids.pop(0)\n"
    "            hits += 1\n",
)

# --- a tie broken the wrong way: the blocks of one request ----------------------------------------
#: Recency kept per request (one stamp for all its blocks), ties broken by the smallest block id:
#: right when a request's ids rise, as in Mooncake's traces, wrong otherwise.
TIES_BY_BLOCK_ID = """
import heapq
from collections.abc import Hashable, Sequence


class MyPrefixCache:
    def __init__(self, capacity: int) -> None:
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        self.capacity = capacity
        self.evictions = 0
        self._used = {}  # block id -> the number of the request that used it last
        self._requests = 0

    def __len__(self) -> int:
        return len(self._used)

    def __contains__(self, block_id: Hashable) -> bool:
        return block_id in self._used

    def lookup(self, block_ids: Sequence[Hashable]) -> int:
        hits = 0
        while hits < len(block_ids) and block_ids[hits] in self._used:
            hits += 1
        return hits

    def insert(self, block_ids: Sequence[Hashable]) -> None:
        self._requests += 1
        for block_id in block_ids[: self.capacity]:
            self._used[block_id] = self._requests
        excess = len(self._used) - self.capacity
        if excess > 0:
            oldest = heapq.nsmallest(excess, self._used, key=lambda b: (self._used[b], b))
            for block_id in oldest:
                del self._used[block_id]
            self.evictions += excess
        for block_id in block_ids[self.capacity :]:
            if self._used.pop(block_id, None) is not None:
                self.evictions += 1

    def serve(self, block_ids: Sequence[Hashable]) -> int:
        hits = self.lookup(block_ids)
        self.insert(block_ids)
        return hits
"""

# --- right answers written differently ----------------------------------------------------------
#: A heap of last uses with stale entries skipped, the request's blocks all made recent before
#: anything is evicted, the lookup by itertools.takewhile; Part 4 with other arithmetic (the
#: tokens reused capped first; the share as saved over total).
HEAP_HASHES = """
def chained_hashes(tokens: list[int], block_size: int) -> list[str]:
    if not block_size > 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    hashes = []
    for i in range(len(tokens) // block_size):
        parent = hashes[-1] if hashes else ROOT
        hashes.append(block_hash(parent, tokens[i * block_size : (i + 1) * block_size]))
    return hashes
"""

HEAP_CACHE = """
import heapq
import itertools
from collections.abc import Hashable, Sequence


class MyPrefixCache:
    def __init__(self, capacity: int) -> None:
        if type(capacity) is not int or capacity <= 0:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        self.capacity = capacity
        self.evictions = 0
        self._last_use = {}  # block id -> the tick of its last use
        self._heap = []  # (tick, block id), oldest first; entries of later uses are stale
        self._clock = itertools.count()

    def __len__(self) -> int:
        return len(self._last_use)

    def __contains__(self, block_id: Hashable) -> bool:
        return block_id in self._last_use

    def lookup(self, block_ids: Sequence[Hashable]) -> int:
        return sum(1 for _ in itertools.takewhile(self.__contains__, block_ids))

    def insert(self, block_ids: Sequence[Hashable]) -> None:
        for block_id in block_ids[: self.capacity]:  # the request's blocks, now the newest
            tick = next(self._clock)
            self._last_use[block_id] = tick
            heapq.heappush(self._heap, (tick, block_id))
        while len(self._last_use) > self.capacity:  # the oldest are never the request's
            tick, block_id = heapq.heappop(self._heap)
            if self._last_use.get(block_id) == tick:
                del self._last_use[block_id]
                self.evictions += 1
        for block_id in block_ids[self.capacity :]:
            if self._last_use.pop(block_id, None) is not None:
                self.evictions += 1

    def serve(self, block_ids: Sequence[Hashable]) -> int:
        hits = self.lookup(block_ids)
        self.insert(block_ids)
        return hits
"""

OTHER_PREFILL = """
def tokens_to_prefill(prompt_len: int, hit_blocks: int, block_size: int) -> int:
    if prompt_len < 1 or block_size < 1 or hit_blocks < 0:
        raise ValueError("prompt_len and block_size must be positive, hit_blocks >= 0")
    reusable = min(hit_blocks * block_size, prompt_len - 1)
    return prompt_len - reusable // block_size * block_size


def ex7_saved_share(
    prefix_len: int, num_requests: int, question_len: int, block_size: int
) -> float:
    prompt = prefix_len + question_len
    rest = tokens_to_prefill(prompt, prefix_len // block_size, block_size)
    saved = (num_requests - 1) * (prompt - rest)
    return saved / (num_requests * prompt)
"""

#: The chain by itertools.accumulate, a plain dict in recency order (a used block popped and set
#: again), the evictions of one insert taken at once from its front; Part 4 as a max and a
#: division chain.
ACCUMULATE_HASHES = """
from itertools import accumulate


def chained_hashes(tokens: list[int], block_size: int) -> list[str]:
    if block_size < 1:
        raise ValueError("block_size must be at least 1")
    full = len(tokens) - len(tokens) % block_size
    blocks = [tokens[i : i + block_size] for i in range(0, full, block_size)]
    return list(accumulate(blocks, block_hash, initial=ROOT))[1:]
"""

DICT_CACHE = """
from itertools import islice


class MyPrefixCache:
    def __init__(self, capacity):
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
            raise ValueError("capacity must be a positive int")
        self.capacity, self.evictions, self._recent = capacity, 0, {}

    def __len__(self):
        return len(self._recent)

    def __contains__(self, block_id):
        return block_id in self._recent

    def lookup(self, block_ids):
        for position, block_id in enumerate(block_ids):
            if block_id not in self._recent:
                return position
        return len(block_ids)

    def insert(self, block_ids):
        kept, beyond = block_ids[: self.capacity], block_ids[self.capacity :]
        for block_id in kept:
            self._recent.pop(block_id, None)
            self._recent[block_id] = True  # a dict keeps insertion order: the newest last
        excess = len(self._recent) - self.capacity
        for block_id in list(islice(self._recent, max(excess, 0))):
            del self._recent[block_id]
        self.evictions += max(excess, 0)
        for block_id in beyond:
            if self._recent.pop(block_id, None):
                self.evictions += 1

    def serve(self, block_ids):
        hits = self.lookup(block_ids)
        self.insert(block_ids)
        return hits
"""

MAX_PREFILL = """
def tokens_to_prefill(prompt_len, hit_blocks, block_size):
    if prompt_len <= 0 or block_size <= 0 or hit_blocks < 0:
        raise ValueError("bad prompt_len, hit_blocks or block_size")
    return max(prompt_len - hit_blocks * block_size, (prompt_len - 1) % block_size + 1)


def ex7_saved_share(prefix_len, num_requests, question_len, block_size):
    prompt = prefix_len + question_len
    others = tokens_to_prefill(prompt, prefix_len // block_size, block_size)
    return 1.0 - (prompt + (num_requests - 1) * others) / num_requests / prompt
"""


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

# --- a copycat: the lookup done by the library's hash index ---------------------------------------
#: The LRU order kept by hand, but the lookup asks kvcourse.blocks.HashIndex (the library's map of
#: block hashes, vLLM v1's BlockHashToBlockMap) which blocks are cached: the insert logs what it
#: adds and evicts, and the lookup brings the index up to date before walking the request. Without
#: the hash index switched off it scores full marks; with it, Parts 3 and 5 (which serves every
#: request through the lookup) score nothing, and the insert, its own code, keeps its points.
COPYCAT_CACHE = """
from collections import OrderedDict
from collections.abc import Hashable, Sequence

import kvcourse.blocks


class MyPrefixCache:
    def __init__(self, capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        self.capacity = capacity
        self.evictions = 0
        self._recent = OrderedDict()  # least recent first
        self._index = None  # the library's hash index, made by the first lookup
        self._log = []  # (block id, added) since the index was last brought up to date

    def __len__(self) -> int:
        return len(self._recent)

    def __contains__(self, block_id: Hashable) -> bool:
        return block_id in self._recent

    def lookup(self, block_ids: Sequence[Hashable]) -> int:
        if self._index is None:
            self._index = kvcourse.blocks.HashIndex()
        for block_id, added in self._log:
            if added:
                self._index.add(block_id, 0)
            else:
                self._index.remove(block_id, 0)
        self._log.clear()
        hits = 0
        while hits < len(block_ids) and self._index.lookup(block_ids[hits]) is not None:
            hits += 1
        return hits

    def _drop(self, block_id: Hashable) -> None:
        del self._recent[block_id]
        self._log.append((block_id, False))
        self.evictions += 1

    def insert(self, block_ids: Sequence[Hashable]) -> None:
        keep = list(block_ids[: self.capacity])
        for block_id in keep:
            if block_id in self._recent:
                self._recent.move_to_end(block_id)
            else:
                self._recent[block_id] = None
                self._log.append((block_id, True))
        mine = set(keep)
        while len(self._recent) > self.capacity:
            self._drop(next(b for b in self._recent if b not in mine))
        for block_id in block_ids[self.capacity :]:
            if block_id in self._recent:
                self._drop(block_id)

    def serve(self, block_ids: Sequence[Hashable]) -> int:
        hits = self.lookup(block_ids)
        self.insert(block_ids)
        return hits
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
    "drops_partial_tail": Sample(
        about="chained_hashes drops the partial last block from the caller's list",
        cells={"chained_hashes": DROPS_PARTIAL_TAIL},
        passes=(*tests_of("insert", "lookup", "prefill", "replay"), "test_chained_hashes"),
    ),
    "trims_request": Sample(
        about="insert trims the caller's request to the blocks the cache keeps",
        cells={"MyPrefixCache": TRIMS_REQUEST},
        passes=(*tests_of("chained_hashes", "lookup", "prefill", "replay"), "test_insert"),
    ),
    "lookup_consumes": Sample(
        about="lookup takes the hit blocks off the front of the caller's list",
        cells={"MyPrefixCache": LOOKUP_CONSUMES},
        passes=(*tests_of("chained_hashes", "insert", "prefill"), "test_lookup"),
    ),
    "ties_by_block_id": Sample(
        about="one recency stamp per request, its blocks evicted smallest id first",
        cells={"MyPrefixCache": TIES_BY_BLOCK_ID},
        passes=(*tests_of("chained_hashes", "lookup", "prefill"), "test_insert", "test_replay"),
    ),
    "heap_lru": Sample(
        about="every part right: a heap of last uses, the lookup by takewhile, other arithmetic "
        "in Part 4",
        cells={
            "chained_hashes": HEAP_HASHES,
            "MyPrefixCache": HEAP_CACHE,
            "prefill": OTHER_PREFILL,
        },
    ),
    "dict_order_lru": Sample(
        about="every part right: the chain by accumulate, a plain dict in recency order, each "
        "insert's evictions taken at once",
        cells={
            "chained_hashes": ACCUMULATE_HASHES,
            "MyPrefixCache": DICT_CACHE,
            "prefill": MAX_PREFILL,
        },
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
    "copycat": Sample(
        about="the cache's lookup done by the library's hash index (kvcourse.blocks.HashIndex), "
        "its insert written by hand",
        cells={"MyPrefixCache": COPYCAT_CACHE},
        passes=tests_of("chained_hashes", "insert", "prefill"),
    ),
    "hostile": Sample(
        about="the library's hashing behind the tests' back; always-equal results, a forged "
        "score and swallowed errors for Part 4",
        cells={"chained_hashes": HOSTILE_HASHES, "prefill": HOSTILE_PREFILL},
        passes=tests_of("insert", "lookup", "replay"),
    ),
}

# Students who read the hidden tests while they run; here the tests run in the grader.
SAMPLES.update(leak_samples("chained_hashes", "prefill", "chained_hashes"))
