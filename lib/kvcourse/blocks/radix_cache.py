"""A token-granular prefix cache: the radix tree of SGLang's RadixAttention, over a pool of KV
slots (the course's page *Beyond block prefixes*).

The block-aligned cache of :mod:`kvcourse.blocks.prefix_cache` names whole blocks, so a prompt can
reuse only the full blocks it shares with an earlier request: a prefix that ends inside a block
is lost from that block on. A radix tree keeps one KV slot per *token* and matches token by
token, so a hit can end anywhere.

**The tree.** Every node but the root holds an *edge*: a run of tokens and the slot ids that hold
their KV, one slot per token. The tokens from the root down to a node spell a cached prefix; the
children of a node start with different tokens, so a lookup follows at most one child per node.
A node whose edge is only partly matched is *split* in two when a request needs a boundary
there: the upper part keeps the shared tokens, the lower part the rest (no KV moves; the slot ids
are divided between them).

**The rules.**

1. :meth:`RadixCache.match` (read-only) returns the longest cached prefix of a prompt, at most
   ``len(tokens) - 1`` tokens: the last prompt token is always computed, since its logits choose
   the first output token (the same rule as the block-aligned cache);
2. :meth:`RadixCache.acquire` does that lookup for an arriving request, splits the node where the
   match ends inside an edge, takes one *reference* on every node of the matched path (a node
   someone references is never evicted) and stamps the path as used now;
3. :meth:`RadixCache.release` (the request finished) inserts its whole sequence, prompt and
   answer, which must start with the prompt it acquired with: existing nodes are reused, a node
   is split where the sequence diverges, and the new tokens take free slots; then the request's
   references are dropped. :meth:`RadixCache.insert` is the same insert without a request;
4. when free slots run out, :meth:`RadixCache.evict` removes whole *leaves* that no running
   request references, the least recently used first; a parent left childless and unreferenced
   becomes a leaf and may go next. If even that leaves too little room, an insert keeps the
   longest prefix of the new tokens that fits.

**The clock.** "Recently used" is counted in lookups: :meth:`~RadixCache.acquire` advances the
clock by one and stamps the matched path with it; an insert (:meth:`~RadixCache.insert`,
:meth:`~RadixCache.release`) stamps its path with the current value, without advancing it. Two
leaves stamped with the same time are a *tie*, and the tie goes to the leaf created earlier
(whose tokens were stored first); a split's upper part counts as created when the node it came
from was.

**Invariants.** Every cached token holds exactly one slot and no slot is held twice, so
``num_cached + num_free == num_slots`` always; reference counts never go below zero; a node on a
running request's path is never evicted. Every call checks its arguments before it changes
anything, so a refused call leaves the tree as it was.

**Counters.** ``lookups`` (acquisitions), ``looked_up_tokens`` (their prompt tokens),
``hit_tokens`` (the tokens their matches reused), ``evicted_tokens``, and the lookup's cost:
``nodes_visited`` (children entered) and ``tokens_compared`` (token comparisons, the mismatch
included), which a hash-per-block lookup does not need.

>>> cache = RadixCache(num_slots=8)
>>> cache.insert([1, 2, 3, 4])
4
>>> cache.match([1, 2, 9]), cache.match([1, 2, 3, 4, 5]), cache.match([1, 2, 3, 4])
(2, 4, 3)
>>> cache.acquire("r", [1, 2, 9])  # splits [1 2 3 4] into [1 2] and [3 4]
[0, 1]
>>> cache.release("r", [1, 2, 9, 7])  # stores 9 and 7 under [1 2]
2
>>> cache.num_cached, cache.num_free, cache.num_nodes
(6, 2, 3)
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from kvcourse._checks import as_index, check_count, check_positive_int

__all__ = ["RadixCache", "RadixNodeView"]


@dataclass(frozen=True)
class RadixNodeView:
    """A read-only picture of one node, for tests and drawings: its edge's ``tokens`` and
    ``slots``, its ``ref_count`` (running requests whose matched path passes through it), its
    ``last_use`` on the lookup clock, and its ``children`` ordered by their first token."""

    tokens: tuple[int, ...]
    slots: tuple[int, ...]
    ref_count: int
    last_use: int
    children: tuple[RadixNodeView, ...]


class _Node:
    """One node of the tree: an edge of tokens with their slots, and its children by first token."""

    __slots__ = ("children", "created", "key", "last_use", "parent", "ref", "slots")

    def __init__(self, key, slots, parent, created, last_use):
        self.key: tuple[int, ...] = key
        self.slots: list[int] = slots
        self.parent: _Node | None = parent
        self.children: dict[int, _Node] = {}
        self.ref = 0
        self.created = created
        self.last_use = last_use


class RadixCache:
    """A token-granular prefix cache (the radix tree of SGLang's RadixAttention) over a pool of
    ``num_slots`` KV slots: every cached token holds one slot id.

    The module docstring states the rules, the clock and its tie rule. ``acquire`` and
    ``release`` are what a serving loop calls per request; ``match``, ``insert`` and ``evict``
    are the pieces, usable alone.
    """

    def __init__(self, num_slots: int) -> None:
        self.num_slots = check_positive_int("num_slots", num_slots, "e.g. 4096")
        self._serial = 0  # creation order of nodes, for the LRU tie rule
        self._root = _Node((), [], None, self._next_serial(), 0)
        self._free: list[int] = list(range(self.num_slots - 1, -1, -1))  # pop() gives 0 first
        self._held: dict[Hashable, tuple[tuple[int, ...], _Node]] = {}
        self.clock = 0
        self.lookups = 0
        self.looked_up_tokens = 0
        self.hit_tokens = 0
        self.evicted_tokens = 0
        self.nodes_visited = 0
        self.tokens_compared = 0

    # ------------------------------------------------------------------ state

    @property
    def num_cached(self) -> int:
        """Tokens (= slots) the tree holds."""
        return self.num_slots - len(self._free)

    @property
    def num_free(self) -> int:
        """Slots holding nothing: ``num_slots - num_cached``."""
        return len(self._free)

    @property
    def num_nodes(self) -> int:
        """Nodes in the tree, the root not counted."""
        return sum(1 for _ in self._nodes()) - 1

    @property
    def hit_rate(self) -> float:
        """``hit_tokens / looked_up_tokens`` over the acquisitions so far (0.0 before any)."""
        return self.hit_tokens / self.looked_up_tokens if self.looked_up_tokens else 0.0

    @property
    def running(self) -> tuple[Hashable, ...]:
        """The request ids that hold an acquisition (acquired, not yet released)."""
        return tuple(self._held)

    def tree(self) -> RadixNodeView:
        """The whole tree as nested :class:`RadixNodeView`, from the root (whose edge is empty)."""

        def view(node: _Node) -> RadixNodeView:
            kids = tuple(view(node.children[t]) for t in sorted(node.children))
            return RadixNodeView(node.key, tuple(node.slots), node.ref, node.last_use, kids)

        return view(self._root)

    # ------------------------------------------------------------------ lookups

    def match(self, tokens: Sequence[int]) -> int:
        """The length of the longest cached prefix of ``tokens``, at most ``len(tokens) - 1``
        (the last prompt token is always computed); 0 for zero or one token. Changes nothing,
        counts nothing."""
        ids = _check_tokens(tokens)
        _, matched, _, _ = self._walk(ids, max(len(ids) - 1, 0))
        return matched

    def acquire(self, request_id: Hashable, tokens: Sequence[int]) -> list[int]:
        """A request arrives with prompt ``tokens``: match it (as :meth:`match`), split the node
        where the match ends inside an edge, take one reference on every node of the matched path
        and stamp it used now. Returns the reused prefix's slot ids, one per hit token. A request
        id holds at most one acquisition at a time (``ValueError``); release it first."""
        _check_request_id(request_id)
        ids = _check_tokens(tokens)
        if request_id in self._held:
            raise ValueError(
                f"request {request_id!r} already holds an acquisition; release it before "
                f"acquiring again (or use another request id)"
            )
        self.clock += 1
        node, matched, inside, cost = self._walk(ids, max(len(ids) - 1, 0))
        if inside:
            node = self._split(node, inside)
        path = self._path(node)
        for n in path:
            n.ref += 1
            n.last_use = self.clock
        self._held[request_id] = (ids, node)
        self.lookups += 1
        self.looked_up_tokens += len(ids)
        self.hit_tokens += matched
        self.nodes_visited += cost[0]
        self.tokens_compared += cost[1]
        return [s for n in path for s in n.slots]

    def release(self, request_id: Hashable, tokens: Sequence[int]) -> int:
        """A request finishes: insert its whole sequence ``tokens`` (prompt and generated
        tokens, which must start with the prompt it acquired with), evicting as :meth:`insert`
        does, then drop its references. Returns the tokens newly stored. ``KeyError`` for a
        request id that holds no acquisition, ``ValueError`` for a sequence that does not start
        with the acquired prompt; either leaves the cache unchanged."""
        _check_request_id(request_id)
        ids = _check_tokens(tokens)
        if request_id not in self._held:
            raise KeyError(
                f"request {request_id!r} holds no acquisition (never acquired, or already "
                f"released); call acquire(request_id, prompt) first"
            )
        prompt, last = self._held[request_id]
        if ids[: len(prompt)] != prompt:
            raise ValueError(
                f"request {request_id!r} acquired with a {len(prompt)}-token prompt, but the "
                f"sequence released does not start with it; pass the prompt followed by the "
                f"generated tokens"
            )
        stored = self._insert(ids)
        del self._held[request_id]
        for n in self._path(last):
            n.ref -= 1
        return stored

    def insert(self, tokens: Sequence[int]) -> int:
        """Store ``tokens`` without a request (release's insert): reuse the nodes it shares,
        split where it diverges, take free slots for the new tokens, evicting unreferenced
        least-recently-used leaves for room; if there is still too little, keep the longest
        prefix that fits. Stamps the path used now; returns the tokens newly stored."""
        return self._insert(_check_tokens(tokens))

    def evict(self, num_tokens: int) -> int:
        """Free at least ``num_tokens`` slots by removing whole leaves that no running request
        references, least recently used first (ties: the leaf created earlier); a parent left
        childless and unreferenced may go next. Returns the slots freed, fewer than asked when
        nothing more can go."""
        return self._evict(check_count("num_tokens", num_tokens))

    # ------------------------------------------------------------------ the work

    def _next_serial(self) -> int:
        self._serial += 1
        return self._serial

    def _nodes(self):
        stack = [self._root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def _path(self, node: _Node) -> list[_Node]:
        """The nodes from just below the root down to ``node``, in that order."""
        path = []
        while node is not self._root:
            path.append(node)
            node = node.parent
        return path[::-1]

    def _walk(self, ids: tuple[int, ...], limit: int) -> tuple[_Node, int, int, tuple[int, int]]:
        """Follow ``ids[:limit]`` down the tree. Returns the last node reached, the tokens
        matched, how many tokens of that node's edge matched if the match ends inside it (else
        0: the match ends at its end), and the cost (children entered, tokens compared)."""
        node, pos, visited, compared = self._root, 0, 0, 0
        while pos < limit:
            child = node.children.get(ids[pos])
            if child is None:
                break
            visited += 1
            key, k = child.key, 0
            while k < len(key) and pos + k < limit:
                compared += 1
                if key[k] != ids[pos + k]:
                    break
                k += 1
            pos += k
            if k < len(key):
                return child, pos, k, (visited, compared)
            node = child
        return node, pos, 0, (visited, compared)

    def _split(self, node: _Node, at: int) -> _Node:
        """Split ``node``'s edge after ``at`` tokens; returns the new upper node (which takes the
        node's references, last use and creation time; ``node`` keeps the lower part)."""
        parent = node.parent
        upper = _Node(node.key[:at], node.slots[:at], parent, node.created, node.last_use)
        upper.ref = node.ref
        parent.children[node.key[0]] = upper
        node.key, node.slots, node.parent = node.key[at:], node.slots[at:], upper
        upper.children[node.key[0]] = node
        return upper

    def _insert(self, ids: tuple[int, ...]) -> int:
        node, matched, inside, _ = self._walk(ids, len(ids))
        path = self._path(node)
        wanted = len(ids) - matched
        if wanted == 0:
            for n in path:
                n.last_use = self.clock
            return 0
        for n in path:  # shield the path from the eviction below
            n.ref += 1
        if wanted > len(self._free):
            self._evict(wanted - len(self._free))
        for n in path:
            n.ref -= 1
        take = min(wanted, len(self._free))
        if take and inside:  # no split when nothing will hang below it
            node = self._split(node, inside)
            path = self._path(node)
        for n in path:
            n.last_use = self.clock
        if take == 0:
            return 0
        slots = [self._free.pop() for _ in range(take)]
        leaf = _Node(ids[matched : matched + take], slots, node, self._next_serial(), self.clock)
        node.children[leaf.key[0]] = leaf
        return take

    def _evict(self, num_tokens: int) -> int:
        def evictable(n: _Node) -> bool:
            return n is not self._root and not n.children and n.ref == 0

        heap = [(n.last_use, n.created, id(n), n) for n in self._nodes() if evictable(n)]
        heapq.heapify(heap)
        freed = 0
        while freed < num_tokens and heap:
            *_, leaf = heapq.heappop(heap)
            parent = leaf.parent
            del parent.children[leaf.key[0]]
            self._free.extend(reversed(leaf.slots))
            freed += len(leaf.slots)
            if evictable(parent):
                heapq.heappush(heap, (parent.last_use, parent.created, id(parent), parent))
        self.evicted_tokens += freed
        return freed


def _check_request_id(request_id: object) -> None:
    try:
        hash(request_id)
    except TypeError:
        raise TypeError(
            f"request_id must be hashable (an int or a str), got {request_id!r}"
        ) from None


def _check_tokens(tokens: object) -> tuple[int, ...]:
    """``tokens`` as a tuple of token ids (ints >= 0), or ``TypeError``/``ValueError``."""
    if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Sequence):
        raise TypeError(f"tokens must be a sequence of token ids (ints), got {tokens!r}")
    ids = tuple(as_index(t, "a token id") for t in tokens)
    if any(t < 0 for t in ids):
        raise ValueError(f"token ids are zero or more, got {min(ids)}")
    return ids
