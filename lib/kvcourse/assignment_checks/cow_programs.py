"""Runs of a student's a3 block manager for the hidden tests, reported as plain values.

:func:`run_programs` plays programs of ``add``, ``fork``, ``append`` and ``free`` on the student's
``CowBlockManager`` over a pool of the library's, and reads the manager and the pool where the
program asks (:class:`Reading`). It checks nothing and knows no expected value. At autograde it
runs where the student's code runs (a snapshot of the kernel) and only its records cross to the
tests, which run in the grader (:mod:`kvcourse_grader.hidden_runs`): a program of hundreds of
operations, each read after, is one exchange rather than hundreds, and the student's code never
shares a process with a test's expected values or checks.

A program is plain data, one tuple per operation:

* ``("add", seq_id)``, ``("fork", parent_id, child_id)``, ``("append", seq_id, num_tokens)``,
  ``("free", seq_id)``: the manager's method of that name (``add`` is ``add_sequence``);
* ``("read",)``: a :class:`Reading` of every sequence added or forked and not yet freed.

An ``append`` refused with ``OutOfBlocksError`` is recorded (``refused``) and the program goes on,
as a serving loop would; any other error raised by the student's code ends the program and is
recorded (``error``), as ``"{name}: {message}"``.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ProgramRecord", "Reading", "run_programs"]

#: One operation of a program (see the module's docstring).
Operation = tuple[Any, ...]


@dataclass(frozen=True)
class Reading:
    """The manager and its pool at one ``("read",)``: the live sequences (in the order they were
    added or forked), each one's block ids and token count, the pool's reference counts by block
    id and its free block ids (ascending), and the manager's ``cow_count``."""

    seq_ids: tuple[int, ...]
    tables: tuple[tuple[int, ...], ...]
    lengths: tuple[int, ...]
    refs: tuple[int, ...]
    free: tuple[int, ...]
    cow_count: int

    def table(self, seq_id: int) -> tuple[int, ...]:
        """The block ids of sequence ``seq_id``."""
        return self.tables[self.seq_ids.index(seq_id)]

    def length(self, seq_id: int) -> int:
        """The token count of sequence ``seq_id``."""
        return self.lengths[self.seq_ids.index(seq_id)]


@dataclass(frozen=True)
class ProgramRecord:
    """One program's run: its readings in order, the indices of its appends that were refused
    with ``OutOfBlocksError``, and the error that ended it early (None when it ran to the end)."""

    readings: tuple[Reading, ...]
    refused: tuple[int, ...]
    error: str | None


def _read(manager: Any, pool: Any, live: list[int], num_blocks: int) -> Reading:
    return Reading(
        tuple(live),
        tuple(tuple(int(b) for b in manager.block_ids(s)) for s in live),
        tuple(int(manager.num_tokens(s)) for s in live),
        tuple(int(pool.ref_count(b)) for b in range(num_blocks)),
        tuple(int(b) for b in pool.free_block_ids()),
        int(manager.cow_count),
    )


def _run(manager_class: type, blocks: Any, case: Sequence[Any]) -> ProgramRecord:
    num_blocks, block_size, taken, program = case
    num_blocks = int(num_blocks)
    readings: list[Reading] = []
    refused: list[int] = []
    live: list[int] = []
    try:
        pool = blocks.BlockPool(num_blocks, int(block_size), taken=[int(b) for b in taken])
        manager = manager_class(pool)
        for index, (op, *args) in enumerate(program):
            if op == "read":
                readings.append(_read(manager, pool, live, num_blocks))
            elif op == "add":
                manager.add_sequence(args[0])
                live.append(args[0])
            elif op == "fork":
                manager.fork(args[0], args[1])
                live.append(args[1])
            elif op == "free":
                manager.free(args[0])
                live.remove(args[0])
            elif op == "append":
                try:
                    manager.append(args[0], args[1])
                except blocks.OutOfBlocksError:
                    refused.append(index)
            else:
                raise ValueError(f"unknown operation {op!r}: add, fork, append, free or read")
    except Exception as err:  # the student's code failed: the tests say which property broke
        return ProgramRecord(tuple(readings), tuple(refused), f"{type(err).__name__}: {err}"[:500])
    return ProgramRecord(tuple(readings), tuple(refused), None)


def run_programs(
    manager_class: type, cases: Sequence[tuple[int, int, Sequence[int], Sequence[Operation]]]
) -> list[ProgramRecord]:
    """Run each case with ``manager_class`` (the student's ``CowBlockManager``) and record it.

    A case is ``(num_blocks, block_size, taken, program)``: a new ``BlockPool`` of the kernel's
    ``kvcourse.blocks`` with the ``taken`` blocks held by someone else, a manager made on it, and
    the program played on that manager (see the module's docstring).
    """
    blocks = importlib.import_module("kvcourse.blocks")
    return [_run(manager_class, blocks, case) for case in cases]
