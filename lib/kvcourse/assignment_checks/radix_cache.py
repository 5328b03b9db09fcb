"""What a7's visible tests need to read and build a student's radix tree (the page *Beyond block
prefixes*): the tree as plain values, edge by edge, a tree planted by hand so that the lookup is
tested before the student's insert exists, and the course's failure message when the tree is not
the worked answer's.

The student's class keeps the given ``Node`` objects under ``cache.root`` (fields ``tokens``,
``slots``, ``parent``, ``children``, ``refs``, ``last_used``, ``created``) and its free slot ids
in the heap ``cache.free``; these helpers read and write nothing else.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from kvcourse.assignment_checks.values import as_int, as_int_list, expect_equal

__all__ = ["edge_tokens", "expect_tree", "plant", "tree_state"]

#: An edge as :func:`tree_state` gives it: (its tokens, its slot ids, its references).
Edge = tuple[tuple[int, ...], tuple[int, ...], int]


def tree_state(cache: object) -> list[Edge]:
    """Every edge of ``cache``'s tree, parents before children and children by their first token:
    ``(tokens, slots, refs)`` as plain ints (fails, saying what it found, when a node's fields are
    not ints or a child is filed under a token its edge does not start with)."""
    edges: list[Edge] = []

    def visit(node: object, depth: int) -> None:
        children = getattr(node, "children", None)
        if not isinstance(children, Mapping):
            raise AssertionError(f"a node's children: expected a dict, got {children!r:.80}")
        for first in sorted(children):
            child = children[first]
            tokens = tuple(as_int_list(child.tokens, "a node's tokens", "a tuple of int"))
            slots = tuple(as_int_list(child.slots, "a node's slots", "a list of int"))
            if not tokens or tokens[0] != first:
                raise AssertionError(
                    f"the child filed under token {first} holds the edge {list(tokens)}. Hint: "
                    "file each child under the first token of its edge, and give it one token "
                    "at least."
                )
            edges.append((tokens, slots, as_int(child.refs, "a node's refs")))
            visit(child, depth + 1)

    visit(cache.root, 0)  # type: ignore[attr-defined]
    return edges


def edge_tokens(cache: object) -> list[list[int]]:
    """The tokens of every edge of ``cache``'s tree, as :func:`tree_state` orders them."""
    return [list(tokens) for tokens, _, _ in tree_state(cache)]


def expect_tree(cache: object, expected: list[Edge], what: str, hint: str) -> None:
    """Fail unless :func:`tree_state` of ``cache`` is ``expected``: "{what}: expected the edges
    (tokens, slots, refs) = {expected}, got {got}. Hint: {hint}"."""
    label = "the edges (tokens, slots, refs) = "
    expect_equal(tree_state(cache), expected, what, hint, label=label)


def plant(cache: object, edges: Mapping) -> object:
    """Grow ``edges`` (nested dicts: an edge's tokens -> the edges below it) under ``cache``'s
    root with the given ``Node`` class, the slots taken from ``cache.free`` lowest first in the
    order written, every node stamped 0 and unreferenced; returns ``cache``. A tree built by
    hand, so that the lookup can be tested before the insert exists."""
    node_class = type(cache.root)  # type: ignore[attr-defined]

    def grow(parent: object, below: Mapping) -> None:
        for tokens, further in below.items():
            slots = [heapq.heappop(cache.free) for _ in tokens]  # type: ignore[attr-defined]
            cache.made += 1  # type: ignore[attr-defined]
            node = node_class(tuple(tokens), slots, parent, cache.made)  # type: ignore
            parent.children[tokens[0]] = node  # type: ignore[attr-defined]
            grow(node, further)

    grow(cache.root, edges)  # type: ignore[attr-defined]
    return cache
