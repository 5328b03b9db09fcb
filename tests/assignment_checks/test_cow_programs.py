"""The programs a3's hidden tests play where the student's code runs
(kvcourse.assignment_checks.cow_programs): what they record, and that they record without
judging."""

from __future__ import annotations

from kvcourse.assignment_checks.cow_programs import ProgramRecord, Reading, run_programs
from kvcourse.blocks import BlockPool, SharedBlockManager

#: Blocks of 2 on a pool of 5 with block 1 taken: a prompt of 3 tokens, a fork, an append to the
#: child that copies its shared last block, an append too big to fit, then everything freed.
PROGRAM = [
    ("read",),
    ("add", 0),
    ("append", 0, 3),
    ("fork", 0, 1),
    ("read",),
    ("append", 1, 1),
    ("read",),
    ("append", 0, 9),
    ("read",),
    ("free", 0),
    ("free", 1),
    ("read",),
]
CASE = (5, 2, [1], PROGRAM)


def test_a_program_is_read_where_it_asks_as_the_manager_and_pool_are():
    (record,) = run_programs(SharedBlockManager, [CASE])
    pool = BlockPool(5, 2, taken=[1])
    manager = SharedBlockManager(pool)
    manager.add_sequence(0)
    manager.append(0, 3)
    manager.fork(0, 1)
    manager.append(1, 1)
    empty, forked, copied, refused, end = record.readings
    assert empty == Reading((), (), (), (0, 1, 0, 0, 0), (0, 2, 3, 4), 0)
    assert forked.tables == ((0, 2), (0, 2)) and forked.refs == (2, 1, 2, 0, 0)
    assert copied.table(1) == tuple(manager.block_ids(1)) and copied.length(1) == 4
    assert copied.cow_count == manager.cow_count == 1
    assert copied.refs == tuple(pool.ref_counts()) and copied.free == pool.free_block_ids()
    assert refused == copied, "the refused append changed nothing"
    assert record.refused == (7,) and record.error is None
    assert end.seq_ids == () and end.free == (0, 2, 3, 4)


def test_an_error_ends_the_program_and_is_recorded_without_judging():
    class ForgetsToFork(SharedBlockManager):
        def fork(self, parent_id, child_id):
            raise RuntimeError("not written yet")

    class AppendsNothing(SharedBlockManager):
        def append(self, seq_id, num_tokens=1):
            pass

    forgets, lazy = run_programs(ForgetsToFork, [CASE]), run_programs(AppendsNothing, [CASE])
    assert forgets == [ProgramRecord(forgets[0].readings, (), "RuntimeError: not written yet")]
    assert len(forgets[0].readings) == 1
    # Appending nothing is no error here: the readings say what it did, the tests judge it.
    assert lazy[0].error is None and len(lazy[0].readings) == 5
    assert lazy[0].readings[2].tables == ((), ())


def test_an_unknown_operation_ends_the_program_saying_which_are_known():
    (record,) = run_programs(SharedBlockManager, [(4, 2, [], [("add", 0), ("grow", 0)])])
    assert record.error == "ValueError: unknown operation 'grow': add, fork, append, free or read"
