"""Sample submissions for a7_radix_cache (see kvcourse_grader.samples).

Each sample starts from the current student version in notebooks/ and fills the solution cells
named here; the others take the instructor's solution unless ``default=STUB``. ``passes`` lists the
test cells that must score. The tests grade all of them in one ``kvcourse-grade autograde`` run;
``kvcourse-grade samples a7_radix_cache --out DIR`` writes them out for a dry run.

The whole tree is one class, ``MyRadixCache``, graded in five parts. The tests keep a mistake in
its own part where they can: Part 1 looks up trees planted by hand (no insert needed), Parts 2 and
3 use a pool that never runs out (no eviction), and Parts 1 to 4 look up only prompts whose last
token is new (the last-token rule never binds there); Part 5 is where it binds. What a mistake
breaks beyond its part (a split that loses children breaks every later part) is written here, in
``passes``.
"""

from kvcourse_grader.samples import (
    FORGE_SCORE,
    SWALLOW_ERRORS,
    WHATEVER,
    Sample,
    basic_samples,
    pasted_reference,
    raises_first,
    replaced,
    tests_of,
)

PARTS = ("match", "insert", "acquire", "evict", "last_token")


def all_but(*parts: str) -> tuple[str, ...]:
    """The test cells of every part except those named."""
    return tests_of(*(part for part in PARTS if part not in parts))


def both(*changes):
    """Several replacements in one cell, applied in order."""

    def change(code: str) -> str:
        for one in changes:
            code = one(code)
        return code

    return change


# --- Part 1: the walk ---------------------------------------------------------------------------
#: The hit counted in whole edges: the last edge counts even where only its first tokens match.
WHOLE_EDGES = replaced(
    "        return self._walk(tokens, max(len(tokens) - 1, 0))[1]\n",
    "        path = self._walk(tokens, max(len(tokens) - 1, 0))[0]\n"
    "        return sum(len(node.tokens) for node in path)\n",
)

# --- Part 2: the split --------------------------------------------------------------------------
#: The split keeps the upper half on the old node and hangs the rest below it as a new node, but
#: leaves the old node's children where they were: they now follow the upper half directly.
SPLIT_KEEPS_CHILDREN = replaced(
    "        head = Node(node.tokens[:k], node.slots[:k], node.parent, node.created)\n"
    "        head.refs, head.last_used = node.refs, node.last_used\n"
    "        node.parent.children[node.tokens[0]] = head\n"
    "        node.tokens, node.slots, node.parent = node.tokens[k:], node.slots[k:], head\n"
    "        head.children[node.tokens[0]] = node\n"
    "        return head\n",
    "        tail = Node(node.tokens[k:], node.slots[k:], node, node.created)\n"
    "        tail.refs, tail.last_used = node.refs, node.last_used\n"
    "        node.tokens, node.slots = node.tokens[:k], node.slots[:k]\n"
    "        node.children[tail.tokens[0]] = tail\n"
    "        return node\n",
)

#: insert trims the caller's list to the tokens it stores, then stores what is left.
TRIMS_CALLERS_LIST = replaced(
    "        leaf = Node(tuple(tokens[matched : matched + take]), slots, parent, self.made)\n",
    "        del tokens[:matched]  # what is cached already\n"
    "        del tokens[take:]  # what does not fit\n"
    "        leaf = Node(tuple(tokens), slots, parent, self.made)\n",
)

# --- Part 3: references -------------------------------------------------------------------------
#: release stores the sequence but never takes the request's references back.
KEEPS_REFERENCES = replaced(
    "        while last is not self.root:\n"
    "            last.refs -= 1\n"
    "            last = last.parent\n",
    "",
)

#: acquire does not split where the match ends inside an edge: the request holds (and gets the
#: slots of) the whole edge.
ACQUIRE_NO_SPLIT = replaced(
    "        if path and inside < len(path[-1].tokens):\n"
    "            path[-1] = self._split(path[-1], inside)\n"
    "        for node in path:\n"
    "            node.refs += 1\n",
    "        for node in path:\n            node.refs += 1\n",
)

# --- Part 4: eviction ---------------------------------------------------------------------------
#: Eviction ignores references: a running request's path may go.
EVICTS_HELD = replaced(
    "            if not node.children and node.refs == 0\n",
    "            if not node.children\n",
)

#: Any unreferenced node may go, leaves or not (its subtree is cut off, its slots lost).
EVICTS_INNER_NODES = replaced(
    "            if not node.children and node.refs == 0\n",
    "            if node.refs == 0\n",
)

#: Ties broken the wrong way: of leaves last used at the same time, the newest goes first.
TIES_TO_NEWEST = both(
    replaced(
        "            (node.last_used, node.created, id(node), node)\n",
        "            (node.last_used, -node.created, id(node), node)\n",
    ),
    replaced(
        "(parent.last_used, parent.created, id(parent), parent)",
        "(parent.last_used, -parent.created, id(parent), parent)",
    ),
)

#: insert counts the free slots before it makes room, so it stores no more than were free.
FREE_COUNTED_BEFORE_EVICTION = replaced(
    "        self.evict(new - self.num_free)\n"
    "        for node in path:\n"
    "            node.refs -= 1\n"
    "        take = min(new, self.num_free)\n",
    "        take = min(new, self.num_free)\n"
    "        self.evict(new - take)\n"
    "        for node in path:\n"
    "            node.refs -= 1\n",
)

#: insert never stamps the path it walks with the clock: a sequence stored again (or released)
#: does not count as a use, so its nodes keep the time they were last acquired or made.
INSERT_NO_STAMP = replaced(
    "        for node in path:\n"
    "            node.last_used = self.clock\n"
    "        new = len(tokens) - matched\n",
    "        new = len(tokens) - matched\n",
)

#: acquire advances the clock before it checks the request id: a refused acquire (the id holds
#: an acquisition already) changes no node, but the uses after it count as a later arrival.
REFUSED_ACQUIRE_TICKS = replaced(
    "        if request_id in self.requests:\n"
    '            raise ValueError(f"request {request_id!r} already holds an acquisition")\n'
    "        self.clock += 1\n",
    "        self.clock += 1\n"
    "        if request_id in self.requests:\n"
    '            raise ValueError(f"request {request_id!r} already holds an acquisition")\n',
)

# --- Part 5: the last token ---------------------------------------------------------------------
#: match and acquire may reuse the whole prompt: no token is left to compute the logits of.
REUSES_LAST_TOKEN = replaced("max(len(tokens) - 1, 0)", "len(tokens)")

# --- right answers written differently ----------------------------------------------------------
#: A recursive walk, eviction by a scan for the oldest evictable leaf each time (no heap), the
#: references taken back by walking the prompt again, the slots taken by heapq.nsmallest.
SCAN_TREE = """
import heapq
from collections.abc import Hashable, Sequence


class MyRadixCache:
    def __init__(self, num_slots: int) -> None:
        if isinstance(num_slots, bool) or not isinstance(num_slots, int) or num_slots < 1:
            raise ValueError(f"num_slots must be a positive int, got {num_slots!r}")
        self.num_slots = num_slots
        self.root = Node((), [], None, 0)
        self.free = list(range(num_slots))
        self.clock = 0
        self.made = 0
        self.requests = {}

    @property
    def num_free(self) -> int:
        return len(self.free)

    @property
    def num_cached(self) -> int:
        return self.num_slots - len(self.free)

    def _nodes(self):
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def _walk(self, tokens, limit, node=None, done=0):
        node = self.root if node is None else node
        child = node.children.get(tokens[done]) if done < limit else None
        if child is None:
            return [], done, 0
        same = 0
        for mine, theirs in zip(child.tokens, tokens[done:limit]):
            if mine != theirs:
                break
            same += 1
        if same < len(child.tokens):
            return [child], done + same, same
        below, matched, inside = self._walk(tokens, limit, child, done + same)
        return [child, *below], matched, inside if below else same

    def match(self, tokens):
        return self._walk(tokens, max(0, len(tokens) - 1))[1]

    def _split(self, node, k):
        upper = Node(node.tokens[:k], node.slots[:k], node.parent, node.created)
        upper.refs = node.refs
        upper.last_used = node.last_used
        upper.parent.children[upper.tokens[0]] = upper
        node.tokens = node.tokens[k:]
        node.slots = node.slots[k:]
        node.parent = upper
        upper.children = {node.tokens[0]: node}
        return upper

    def insert(self, tokens):
        path, matched, inside = self._walk(tokens, len(tokens))
        rest = len(tokens) - matched
        if rest and path and inside != len(path[-1].tokens):
            path[-1] = self._split(path[-1], inside)
        for node in path:
            node.last_used = self.clock
            node.refs += 1
        if rest > len(self.free):
            self.evict(rest - len(self.free))
        for node in path:
            node.refs -= 1
        take = min(rest, len(self.free))
        if not take:
            return 0
        slots = heapq.nsmallest(take, self.free)
        self.free = sorted(set(self.free) - set(slots))
        self.made += 1
        parent = path[-1] if path else self.root
        leaf = Node(tuple(tokens[matched:][:take]), slots, parent, self.made)
        leaf.last_used = self.clock
        parent.children[leaf.tokens[0]] = leaf
        return take

    def acquire(self, request_id, tokens):
        if request_id in self.requests:
            raise ValueError("this request already holds an acquisition")
        self.clock += 1
        path, matched, inside = self._walk(tokens, max(0, len(tokens) - 1))
        if path and inside != len(path[-1].tokens):
            path[-1] = self._split(path[-1], inside)
        slots = []
        for node in path:
            node.refs += 1
            node.last_used = self.clock
            slots += node.slots
        self.requests[request_id] = (tuple(tokens), matched)
        return slots

    def release(self, request_id, tokens):
        if request_id not in self.requests:
            raise ValueError("no such request")
        prompt, matched = self.requests[request_id]
        if len(tokens) < len(prompt) or any(a != b for a, b in zip(prompt, tokens)):
            raise ValueError("the sequence does not start with the prompt")
        stored = self.insert(tokens)
        self.requests.pop(request_id)
        for node in self._walk(prompt, matched)[0]:  # the same nodes, split or not
            node.refs -= 1
        return stored

    def evict(self, num_tokens):
        freed = 0
        while freed < num_tokens:
            leaves = [n for n in self._nodes() if not n.children and n.refs == 0]
            if not leaves:
                break
            oldest = min(leaves, key=lambda n: (n.last_used, n.created))
            oldest.parent.children.pop(oldest.tokens[0])
            for slot in oldest.slots:
                heapq.heappush(self.free, slot)
            freed += len(oldest.slots)
        return freed
"""

#: Every leaf kept in one dict with its LRU key (no scan of the tree), sorted when room is needed;
#: the walk as a for loop over the tokens, the split by rebuilding the parent's entry.
LEAF_INDEX = """
import heapq
from collections.abc import Hashable, Sequence


class MyRadixCache:
    def __init__(self, num_slots: int) -> None:
        if isinstance(num_slots, bool) or not isinstance(num_slots, int) or num_slots < 1:
            raise ValueError(f"num_slots must be a positive int, got {num_slots!r}")
        self.num_slots = num_slots
        self.root = Node((), [], None, 0)
        self.free = list(range(num_slots))
        self.clock = 0
        self.made = 0
        self.requests = {}

    @property
    def num_free(self) -> int:
        return len(self.free)

    @property
    def num_cached(self) -> int:
        return self.num_slots - len(self.free)

    def _nodes(self):
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def _walk(self, tokens, limit):
        path, node, inside = [], self.root, 0
        for matched, token in enumerate(tokens[:limit]):
            if path and inside < len(node.tokens):
                if node.tokens[inside] != token:
                    return path, matched, inside
                inside += 1
                continue
            if token not in node.children:
                return path, matched, inside
            node = node.children[token]
            path.append(node)
            inside = 1
        return path, min(limit, len(tokens)), inside

    def match(self, tokens):
        return self._walk(tokens, len(tokens) - 1)[1] if tokens else 0

    def _split(self, node, k):
        parent = node.parent
        new = Node(node.tokens[:k], node.slots[:k], parent, node.created)
        new.refs, new.last_used = node.refs, node.last_used
        del parent.children[node.tokens[0]]
        parent.children[new.tokens[0]] = new
        node.tokens, node.slots, node.parent = node.tokens[k:], node.slots[k:], new
        new.children[node.tokens[0]] = node
        return new

    def insert(self, tokens):
        path, matched, inside = self._walk(tokens, len(tokens))
        if matched == len(tokens):
            for node in path:
                node.last_used = self.clock
            return 0
        if path and inside < len(path[-1].tokens):
            path[-1] = self._split(path[-1], inside)
        for node in path:
            node.last_used = self.clock
            node.refs += 1
        lacking = len(tokens) - matched - len(self.free)
        if lacking > 0:
            self.evict(lacking)
        for node in path:
            node.refs -= 1
        take = min(len(tokens) - matched, len(self.free))
        if take > 0:
            parent = path[-1] if path else self.root
            self.made += 1
            slots = [heapq.heappop(self.free) for _ in range(take)]
            leaf = Node(tuple(tokens[matched : matched + take]), slots, parent, self.made)
            leaf.last_used = self.clock
            parent.children[tokens[matched]] = leaf
        return max(take, 0)

    def acquire(self, request_id, tokens):
        if request_id in self.requests:
            raise ValueError("one acquisition per request at a time")
        self.clock += 1
        path, matched, inside = self._walk(tokens, len(tokens) - 1) if tokens else ([], 0, 0)
        if path and inside < len(path[-1].tokens):
            path[-1] = self._split(path[-1], inside)
        for node in path:
            node.refs += 1
            node.last_used = self.clock
        self.requests[request_id] = (list(tokens), path[-1] if path else None)
        return [slot for node in path for slot in node.slots]

    def release(self, request_id, tokens):
        prompt, last = self.requests.get(request_id, (None, None))
        if prompt is None or list(tokens[: len(prompt)]) != prompt:
            raise ValueError("release: no such request, or not its prompt")
        stored = self.insert(tokens)
        del self.requests[request_id]
        while last is not None and last is not self.root:
            last.refs -= 1
            last = last.parent
        return stored

    def evict(self, num_tokens):
        leaves = {id(n): n for n in self._nodes() if not n.children and n.refs == 0}
        freed = 0
        while freed < num_tokens and leaves:
            victim = min(leaves.values(), key=lambda n: (n.last_used, n.created))
            del leaves[id(victim)]
            parent = victim.parent
            parent.children.pop(victim.tokens[0])
            for slot in victim.slots:
                heapq.heappush(self.free, slot)
            freed += len(victim.tokens)
            if parent is not self.root and not parent.children and parent.refs == 0:
                leaves[id(parent)] = parent
        return freed
"""

# --- a copycat: the library's tree under the assignment's name ----------------------------------
COPYCAT = """
import kvcourse.blocks


class MyRadixCache(kvcourse.blocks.RadixCache):
    # The library's radix tree, given the names the tests read.
    @property
    def root(self):
        return self._root

    @property
    def free(self):
        return self._free
"""

# --- the library's tree pasted into the cell (other file, other lines), and retyped with other
# names for every argument and variable, given the two attributes the tests read: the watch knows
# both for copies, in the visible tests as in the hidden ones ------------------------------------
READ_AS_TESTS_DO = """

MyRadixCache.root = property(lambda self: self._root)
MyRadixCache.free = property(lambda self: self._free)
"""
PASTED = (
    pasted_reference("kvcourse.blocks.radix_cache", {"RadixCache": "MyRadixCache"})
    + READ_AS_TESTS_DO
)
RETYPED = (
    pasted_reference("kvcourse.blocks.radix_cache", {"RadixCache": "MyRadixCache"}, retyped=True)
    + READ_AS_TESTS_DO
)

# --- a hostile student: always-equal lookups, a forged score and swallowed errors ---------------
HOSTILE_MATCH = replaced(
    "        return self._walk(tokens, max(len(tokens) - 1, 0))[1]\n",
    f"        {FORGE_SCORE}\n        {SWALLOW_ERRORS}\n        return Whatever()\n",
)


def hostile(solution: str) -> str:
    return f"import sys\n{WHATEVER}\n\n" + HOSTILE_MATCH(solution)


SAMPLES = {
    **basic_samples(),
    "partial": Sample(
        about="a split that leaves the old node's children on its upper part, and ties that go "
        "to the newest leaf",
        cells={"MyRadixCache": both(SPLIT_KEEPS_CHILDREN, TIES_TO_NEWEST)},
        passes=(*tests_of("match"), "test_acquire", "test_last_token"),
    ),
    "whole_edges": Sample(
        about="the match counts the last edge whole, even where only its first tokens match",
        cells={"MyRadixCache": WHOLE_EDGES},
        passes=all_but("match", "last_token"),
    ),
    "split_keeps_children": Sample(
        about="the split leaves the old node's children on its upper part",
        # the worked examples of Parts 3 to 5 split only nodes without children
        cells={"MyRadixCache": SPLIT_KEEPS_CHILDREN},
        passes=(*tests_of("match"), "test_acquire", "test_evict", "test_last_token"),
    ),
    "trims_callers_list": Sample(
        about="insert trims the caller's list to the tokens it stores",
        # Parts 4 and 5's worked examples store whole lists and check what comes back, not them
        cells={"MyRadixCache": TRIMS_CALLERS_LIST},
        passes=(*tests_of("match"), "test_evict", "test_last_token"),
    ),
    "keeps_references": Sample(
        about="release never takes the request's references back",
        cells={"MyRadixCache": KEEPS_REFERENCES},
        passes=(*tests_of("match", "insert"), "test_last_token"),
    ),
    "acquire_no_split": Sample(
        about="acquire does not split where the match ends inside an edge",
        # Part 4's random traces acquire too
        cells={"MyRadixCache": ACQUIRE_NO_SPLIT},
        passes=(*all_but("acquire", "evict", "last_token"), "test_evict"),
    ),
    "evicts_held": Sample(
        about="eviction ignores references: a running request's path may go",
        cells={"MyRadixCache": EVICTS_HELD},
        passes=all_but("evict"),
    ),
    "evicts_inner_nodes": Sample(
        about="eviction may take a node that still has children",
        cells={"MyRadixCache": EVICTS_INNER_NODES},
        passes=all_but("evict"),
    ),
    "ties_to_newest": Sample(
        about="of leaves last used at the same time, the newest goes first",
        cells={"MyRadixCache": TIES_TO_NEWEST},
        passes=all_but("evict"),
    ),
    "free_counted_before_eviction": Sample(
        about="insert counts the free slots before it makes room, so it stores only those",
        cells={"MyRadixCache": FREE_COUNTED_BEFORE_EVICTION},
        passes=all_but("evict"),
    ),
    "insert_no_stamp": Sample(
        about="insert does not stamp the path it walks with the clock",
        # the stamps show only in which leaf goes first: Parts 2 and 3 never evict, and Part 4's
        # worked examples store no sequence twice after a clock tick
        cells={"MyRadixCache": INSERT_NO_STAMP},
        passes=(*all_but("evict"), "test_evict"),
    ),
    "refused_acquire_ticks": Sample(
        about="a refused acquire (its id holds one already) still advances the clock",
        # Part 3 checks that a refused call leaves the tree as it was; the clock shows only in
        # which leaf goes first, in Part 4's hidden tests (its worked examples refuse no call)
        cells={"MyRadixCache": REFUSED_ACQUIRE_TICKS},
        passes=(*all_but("evict"), "test_evict"),
    ),
    "reuses_last_token": Sample(
        about="match and acquire may reuse the whole prompt, its last token included",
        cells={"MyRadixCache": REUSES_LAST_TOKEN},
        passes=all_but("last_token"),
    ),
    "scan_tree": Sample(
        about="every part right: a recursive walk, eviction by a scan for the oldest leaf, the "
        "references taken back by walking the prompt again",
        cells={"MyRadixCache": SCAN_TREE},
    ),
    "leaf_index": Sample(
        about="every part right: a walk token by token, the evictable leaves kept in a dict",
        cells={"MyRadixCache": LEAF_INDEX},
    ),
    "copycat": Sample(
        about="the library's radix tree under the assignment's name",
        cells={"MyRadixCache": COPYCAT},
        passes=(),
    ),
    "pasted_reference": Sample(
        about="the library's RadixCache pasted into the cell as MyRadixCache",
        cells={"MyRadixCache": PASTED},
        passes=(),
    ),
    "retyped_reference": Sample(
        about="the library's RadixCache retyped with other variable names",
        cells={"MyRadixCache": RETYPED},
        passes=(),
    ),
    "raises": Sample(
        about="the class cell raises at top level, so MyRadixCache is never defined",
        cells={"MyRadixCache": raises_first},
        passes=(),
    ),
    "syntax_error": Sample(
        about="the class cell does not parse",
        cells={
            "MyRadixCache": lambda code: code.replace(
                "class MyRadixCache:", "class MyRadixCache", 1
            )
        },
        passes=(),
    ),
    "hostile": Sample(
        about="always-equal lookups, with a forged score and swallowed errors",
        cells={"MyRadixCache": hostile},
        passes=tests_of("insert", "acquire", "evict"),
    ),
}
