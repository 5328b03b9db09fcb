"""kvcourse.assignment_checks.radix_cache, the helpers of a7's visible test cells: a radix tree
read edge by edge as plain values, a tree planted by hand, and the course's message when the tree
is not the expected one."""

from __future__ import annotations

import heapq

import pytest

from kvcourse.assignment_checks.radix_cache import edge_tokens, expect_tree, plant, tree_state


class Node:
    """The node a7 gives its students."""

    def __init__(self, tokens, slots, parent, created):
        self.tokens, self.slots, self.parent, self.created = tokens, slots, parent, created
        self.children, self.refs, self.last_used = {}, 0, 0


class Tree:
    """As much of a7's MyRadixCache as the helpers touch."""

    def __init__(self, num_slots):
        self.root = Node((), [], None, 0)
        self.free = list(range(num_slots))
        self.made = 0


class Sneaky(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def test_a_planted_tree_reads_back_parents_first_children_by_token():
    tree = plant(Tree(10), {(5, 6): {(9,): {}, (7, 8): {}}, (1,): {}})
    # slots in the order written; edges read parents first, children by their first token
    assert tree_state(tree) == [
        ((1,), (5,), 0),
        ((5, 6), (0, 1), 0),
        ((7, 8), (3, 4), 0),
        ((9,), (2,), 0),
    ]
    assert tree.made == 4 and tree.free == [6, 7, 8, 9]
    heapq.heappush(tree.free, 0)  # still a heap
    assert tree.root.children[5].children[9].parent is tree.root.children[5]


def test_the_state_is_plain_ints():
    tree = plant(Tree(4), {(2, 3): {}})
    tree.root.children[2].refs = Sneaky(1)
    ((tokens, slots, refs),) = tree_state(tree)
    assert (tokens, slots, refs) == ((2, 3), (0, 1), 1) and type(refs) is int


def test_a_child_filed_under_another_token_is_named():
    tree = plant(Tree(4), {(2, 3): {}})
    tree.root.children[7] = tree.root.children.pop(2)
    with pytest.raises(
        AssertionError, match=r"the child filed under token 7 holds the edge \[2, 3\]"
    ):
        tree_state(tree)
    tree.root.children = [1, 2]
    with pytest.raises(AssertionError, match="a node's children: expected a dict"):
        tree_state(tree)


def test_a_tree_that_is_not_the_worked_answer_fails_with_the_message():
    tree = plant(Tree(4), {(2, 3): {}})
    expect_tree(tree, [((2, 3), (0, 1), 0)], "after insert([2, 3])", "one leaf.")
    with pytest.raises(AssertionError) as caught:
        expect_tree(tree, [((2,), (0,), 0)], "after insert([2])", "split.")
    assert str(caught.value) == (
        "after insert([2]): expected the edges (tokens, slots, refs) = [((2,), (0,), 0)], got "
        "[((2, 3), (0, 1), 0)]. Hint: split."
    )


def test_edge_tokens_are_lists_in_tree_order():
    tree = plant(Tree(6), {(5, 6): {(9,): {}}, (1, 2): {}})
    assert edge_tokens(tree) == [[1, 2], [5, 6], [9]]
