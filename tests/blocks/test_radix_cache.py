"""The token-granular radix cache (kvcourse.blocks.radix_cache): each rule on a small hand-made
case, then the invariants under random programs against brute-force models (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kvcourse.blocks import RadixCache


def paths(cache):
    """Every node as (tokens from the root to its end, its edge's slots, ref count)."""
    out = []

    def walk(view, prefix):
        for child in view.children:
            spelled = prefix + child.tokens
            out.append((spelled, child.slots, child.ref_count))
            walk(child, spelled)

    walk(cache.tree(), ())
    return out


def leaves(cache):
    """The sequences the tree spells root to leaf."""
    seqs = [p for p, _, _ in paths(cache)]
    return {s for s in seqs if not any(len(t) > len(s) and t[: len(s)] == s for t in seqs)}


def slots_of(cache, tokens):
    """The slot ids holding ``tokens`` (a cached prefix), by walking the tree."""
    found = []
    for spelled, slots, _ in sorted(paths(cache), key=lambda p: len(p[0])):
        start = len(spelled) - len(slots)
        if start == len(found) and spelled == tuple(tokens[: len(spelled)]):
            found += slots[: len(tokens) - start]
    return found[: len(tokens)]


def lcp(a, b):
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def snapshot(cache):
    return (cache.tree(), cache.num_free, cache.running, cache.clock, cache.lookups)


# ---------------------------------------------------------------------------- hand-made cases


def test_insert_then_match_token_by_token():
    cache = RadixCache(16)
    assert cache.insert([1, 2, 3, 4, 5]) == 5
    assert [cache.match(t) for t in ([1, 2, 7], [1, 2, 3, 4, 5, 6], [9, 1], [1], [])] == [
        2,
        5,
        0,
        0,
        0,
    ]
    assert (cache.num_cached, cache.num_free, cache.num_nodes) == (5, 11, 1)


def test_acquire_splits_mid_edge_and_shares_the_slots():
    cache = RadixCache(16)
    cache.insert([1, 2, 3, 4, 5])
    assert cache.acquire("a", [1, 2, 3, 8, 8]) == [0, 1, 2]
    assert paths(cache) == [((1, 2, 3), (0, 1, 2), 1), ((1, 2, 3, 4, 5), (3, 4), 0)]
    assert cache.release("a", [1, 2, 3, 8, 8, 6]) == 3  # 8, 8, 6 stored under [1 2 3]
    assert sorted(leaves(cache)) == [(1, 2, 3, 4, 5), (1, 2, 3, 8, 8, 6)]
    assert all(ref == 0 for _, _, ref in paths(cache))
    assert (cache.num_cached, cache.num_nodes, cache.hit_tokens) == (8, 3, 3)


def test_insert_splits_where_the_sequence_diverges():
    cache = RadixCache(16)
    cache.insert([1, 2, 3, 4])
    assert cache.insert([1, 2, 9]) == 1
    assert sorted(p for p, _, _ in paths(cache)) == [(1, 2), (1, 2, 3, 4), (1, 2, 9)]
    assert cache.insert([1, 2]) == 0 and cache.num_cached == 5  # already there: nothing new


def test_the_last_prompt_token_is_always_computed():
    cache = RadixCache(16)
    cache.insert([1, 2, 3, 4])
    assert cache.match([1, 2, 3, 4]) == 3  # the whole prompt is cached, one token recomputed
    assert cache.acquire("a", [1, 2, 3, 4]) == [0, 1, 2]
    assert cache.release("a", [1, 2, 3, 4, 5]) == 1
    assert cache.acquire("b", [7]) == [] and cache.match([1]) == 0


def test_a_locked_path_survives_eviction_and_unlocked_leaves_go():
    cache = RadixCache(8)
    cache.insert([1, 2, 3, 4])
    cache.insert([5, 6, 7, 8])
    assert cache.num_free == 0
    assert cache.acquire("a", [1, 2, 3, 4, 9]) == [0, 1, 2, 3]  # locks [1 2 3 4]
    assert cache.evict(8) == 4  # only [5 6 7 8] may go
    assert leaves(cache) == {(1, 2, 3, 4)} and cache.evicted_tokens == 4
    assert cache.insert([10, 11, 12, 13, 14, 15]) == 4  # room for 4: the longest prefix that fits
    assert leaves(cache) == {(1, 2, 3, 4), (10, 11, 12, 13)}
    cache.release("a", [1, 2, 3, 4, 9])  # full: 9 evicts [10 .. 13], not the path
    assert leaves(cache) == {(1, 2, 3, 4, 9)}


def test_eviction_takes_whole_leaves_least_recently_used_then_childless_parents():
    cache = RadixCache(32)
    cache.insert([1, 2, 3])
    cache.insert([1, 2, 4])  # splits: [1 2] with children [3] and [4]
    cache.acquire("x", [9, 9])  # clock 1 (no hit)
    cache.release("x", [9, 9])
    cache.acquire("y", [1, 2, 4, 0])  # clock 2: [1 2] and [4] used now
    cache.release("y", [1, 2, 4, 0])  # stores 0 under [4]
    # leaves by last use: [3] (0), [9 9] (1), [... 4 0] (2)
    assert cache.evict(1) == 1 and leaves(cache) == {(1, 2, 4, 0), (9, 9)}
    assert cache.evict(2) == 2 and leaves(cache) == {(1, 2, 4, 0)}
    assert cache.evict(3) == 4  # the leaf [4 0], then [1 2] left childless
    assert cache.num_cached == 0 and cache.num_nodes == 0 and cache.num_free == 32


def test_lru_tie_goes_to_the_leaf_created_earlier():
    cache = RadixCache(16)
    cache.insert([1, 1])  # both stamped 0: a tie
    cache.insert([2, 2])
    assert cache.evict(1) == 2 and leaves(cache) == {(2, 2)}


def test_lru_tie_rule_other_side_a_later_use_beats_creation_order():
    cache = RadixCache(16)
    cache.insert([1, 1])
    cache.insert([2, 2])
    cache.acquire("a", [1, 1, 5])  # [1 1] used at clock 1; [2 2] stays at 0
    cache.release("a", [1, 1, 5])
    assert cache.evict(1) == 2 and leaves(cache) == {(1, 1, 5)}


def test_release_with_a_sequence_that_does_not_extend_the_prompt_fails_and_changes_nothing():
    cache = RadixCache(16)
    cache.insert([1, 2, 3, 4])
    cache.acquire("a", [1, 2, 3, 9])
    before = snapshot(cache)
    for wrong in ([1, 2, 3], [1, 2, 4, 9, 5], [7, 1, 2, 3, 9]):
        with pytest.raises(ValueError, match="does not start with"):
            cache.release("a", wrong)
        assert snapshot(cache) == before
    assert cache.release("a", [1, 2, 3, 9, 5]) == 2


def test_bad_calls_are_refused_before_anything_changes():
    cache = RadixCache(8)
    cache.insert([1, 2, 3])
    cache.acquire("a", [1, 2, 5])
    before = snapshot(cache)
    with pytest.raises(ValueError, match="already holds"):
        cache.acquire("a", [1, 2, 3])
    with pytest.raises(KeyError, match="holds no acquisition"):
        cache.release("b", [1, 2])
    with pytest.raises(TypeError, match="hashable"):
        cache.acquire([1], [1, 2])
    with pytest.raises(TypeError, match="sequence of token ids"):
        cache.insert("abc")
    with pytest.raises(TypeError, match="token id"):
        cache.insert([1, 2.5])
    with pytest.raises(ValueError, match="zero or more"):
        cache.match([1, -3])
    with pytest.raises(ValueError, match="zero or more"):
        cache.evict(-1)
    assert snapshot(cache) == before
    with pytest.raises(ValueError, match="positive"):
        RadixCache(0)
    with pytest.raises(TypeError):
        RadixCache(2.0)


def test_counters_count_lookups_hits_and_the_walk():
    cache = RadixCache(16)
    cache.insert([1, 2, 3, 4])
    cache.acquire("a", [1, 2, 3, 7])  # enters 1 node, compares 3 tokens (the limit is 3)
    cache.acquire("b", [1, 2, 9, 9])  # enters [1 2 3], compares 1, 2, 3≠9
    assert (cache.lookups, cache.looked_up_tokens, cache.hit_tokens) == (2, 8, 5)
    assert (cache.nodes_visited, cache.tokens_compared) == (2, 6)
    assert cache.hit_rate == 5 / 8


# ---------------------------------------------------------------------------- properties

tokens = st.lists(st.integers(0, 3), max_size=10)


@settings(max_examples=150, deadline=None)
@given(st.lists(tokens, max_size=12), st.lists(tokens, min_size=1, max_size=6))
def test_match_is_the_longest_common_prefix_with_any_inserted_sequence(stored, queries):
    cache = RadixCache(200)  # room for everything: nothing is evicted
    for seq in stored:
        cache.insert(seq)
    for q in queries:
        best = max((lcp(q, s) for s in stored), default=0)
        assert cache.match(q) == min(best, max(len(q) - 1, 0))
    kept = leaves(cache)  # every inserted sequence is still spelled, from the root
    assert all(any(leaf[: len(s)] == tuple(s) for leaf in kept) for s in stored if s)
    assert cache.num_cached == len({tuple(s[:n]) for s in stored for n in range(1, len(s) + 1)})


class RadixMachine(RuleBasedStateMachine):
    """Random programs of acquire / release / insert / evict on a small pool."""

    def __init__(self):
        super().__init__()
        self.cache = RadixCache(12)
        self.running = {}  # request id -> (prompt, slot ids acquired)
        self.seen = set()  # every sequence ever stored
        self.next_id = 0

    @rule(prompt=tokens)
    def acquire(self, prompt):
        expected = self.cache.match(prompt)
        got = self.cache.acquire(self.next_id, prompt)
        assert len(got) == expected
        assert got == slots_of(self.cache, prompt[:expected])
        self.running[self.next_id] = (tuple(prompt), got)
        self.next_id += 1

    @precondition(lambda self: self.running)
    @rule(data=st.data(), answer=tokens)
    def release(self, data, answer):
        rid = data.draw(st.sampled_from(sorted(self.running)))
        prompt, _ = self.running.pop(rid)
        cached, evicted = self.cache.num_cached, self.cache.evicted_tokens
        stored = self.cache.release(rid, prompt + tuple(answer))
        evicted = self.cache.evicted_tokens - evicted
        assert stored >= 0 and self.cache.num_cached == cached + stored - evicted
        self.seen.add(prompt + tuple(answer))

    @rule(seq=tokens)
    def insert(self, seq):
        self.cache.insert(seq)
        self.seen.add(tuple(seq))

    @rule(n=st.integers(0, 14))
    def evict(self, n):
        free = self.cache.num_free
        freed = self.cache.evict(n)
        assert self.cache.num_free == free + freed

    @invariant()
    def slots_are_unique_and_conserved(self):
        held = [s for _, slots, _ in paths(self.cache) for s in slots]
        assert len(held) == len(set(held)) == self.cache.num_cached <= self.cache.num_slots
        assert self.cache.num_cached + self.cache.num_free == self.cache.num_slots
        assert set(held) <= set(range(self.cache.num_slots))

    @invariant()
    def ref_counts_are_the_running_paths(self):
        for spelled, _slots, ref in paths(self.cache):
            assert ref >= 0
            expected = sum(
                len(got) >= len(spelled) and prompt[: len(spelled)] == spelled
                for prompt, got in self.running.values()
            )
            assert ref == expected

    @invariant()
    def locked_tokens_are_never_evicted(self):
        for prompt, got in self.running.values():
            assert slots_of(self.cache, prompt[: len(got)]) == got

    @invariant()
    def the_tree_holds_only_prefixes_of_what_was_stored_and_match_agrees(self):
        cached = leaves(self.cache)
        for leaf in cached:
            assert any(s[: len(leaf)] == leaf for s in self.seen)
        for q in [(0, 1, 2, 3, 0), (1, 1, 1), *list(self.seen)[:5]]:
            best = max((lcp(q, s) for s in cached), default=0)
            assert self.cache.match(q) == min(best, max(len(q) - 1, 0))


TestRadixMachine = RadixMachine.TestCase
TestRadixMachine.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
