"""Readers of the course's interfaces: the state of a student's allocator, block table or block
manager as plain ints, for the test cells of a1 to a3."""

from __future__ import annotations

from collections.abc import Iterable

from kvcourse.assignment_checks.values import as_int, as_int_list, as_int_pairs


def arena_state(arena: object, what: str) -> tuple[int, list[tuple[int, int]]]:
    """``(free_slots(), free_blocks())`` of a contiguous allocator, in plain ints."""
    blocks = as_int_pairs(arena.free_blocks(), f"{what}: free_blocks()")
    return as_int(arena.free_slots(), f"{what}: free_slots()"), blocks


def table_state(table: object, what: str) -> tuple[int, list[int], int]:
    """``(num_tokens, block_ids, wasted_slots)`` of a block table, in plain ints."""
    return (
        as_int(table.num_tokens, f"{what}: num_tokens"),
        as_int_list(table.block_ids, f"{what}: block_ids", "a list of int block ids"),
        as_int(table.wasted_slots, f"{what}: wasted_slots"),
    )


def manager_state(manager: object, seq_id: object, what: str) -> tuple[int, list[int]]:
    """``(num_tokens(seq_id), block_ids(seq_id))`` of a block manager, in plain ints."""
    ids = as_int_list(
        manager.block_ids(seq_id), f"{what}: block_ids({seq_id!r})", "a list of int block ids"
    )
    return as_int(manager.num_tokens(seq_id), f"{what}: num_tokens({seq_id!r})"), ids


def block_tables(manager: object, seq_ids: Iterable[object], what: str) -> list[list[int]]:
    """Each sequence's ``block_ids``, as lists of plain ints."""
    return [
        as_int_list(
            manager.block_ids(seq_id), f"{what}: block_ids({seq_id!r})", "a list of int block ids"
        )
        for seq_id in seq_ids
    ]


def cow_count(manager: object, what: str) -> int:
    """A block manager's ``cow_count``, as a plain int."""
    return as_int(manager.cow_count, f"{what}: cow_count")
