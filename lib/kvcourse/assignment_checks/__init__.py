"""What the assignments' test cells call: the course's checks, so that each cell reads as the
checks it makes.

* :mod:`kvcourse.assignment_checks.harness`: the library's reference switched off while student
  code runs, fresh copies of library modules, the test's own step inside a student's loop (the one
  harness of visible and hidden cells);
* :mod:`kvcourse.assignment_checks.copy_watch`: how the harness knows a copy of the reference
  (pasted, retyped, rebuilt from its code) and switches it off too;
* :mod:`kvcourse.assignment_checks.stand_ins`: the harness's own online-softmax step inside a
  student's blockwise attention, and many calls under it (a2's Part 3b);
* :mod:`kvcourse.assignment_checks.values`: plain values and failure messages (expected, got,
  hint);
* :mod:`kvcourse.assignment_checks.readers`: a student's allocator, block table or block manager
  as plain ints;
* :mod:`kvcourse.assignment_checks.buddy`: a1's checks of a buddy allocator (an alloc, a free,
  a refused free and the free blocks each must leave) and of Part 6's simulator run, and an arena
  of any size as one student allocator per root;
* :mod:`kvcourse.assignment_checks.paging`: a2's checks of a block table (its state, append,
  slot_of), random paged K/V with the gathered-attention reference, and the tiny transformer
  decoding on a fresh copy of the paged cache beside a contiguous one;
* :mod:`kvcourse.assignment_checks.cow`: a3's checks of a block manager with copy-on-write (the
  sequences it holds, shared state, refused calls), Ex 4's parallel sampling and beam search
  with given parents, on a fresh copy of the sharing cache;
* :mod:`kvcourse.assignment_checks.cow_programs`: a3's hidden tests' programs of add, fork,
  append and free played on a student's block manager, read as plain values where the student's
  code runs, for tests that judge them in the grader;
* :mod:`kvcourse.assignment_checks.schedulers`: a4's scheduler runs as letters and counters, and
  a student's scheduler with one of its hooks beside the library's others;
* :mod:`kvcourse.assignment_checks.preemption_runs`: a4's hidden tests' runs of a student's
  scheduler (the tests' own hooks beside the one tested), recorded as plain values where the
  student's code runs, for tests that judge them in the grader;
* :mod:`kvcourse.assignment_checks.prefix_cache`: a5's prefix cache read as plain values (the
  blocks it holds, its len and evictions) against the worked answers;
* :mod:`kvcourse.assignment_checks.conductor`: a6's Conductor decisions as plain values;
* :mod:`kvcourse.assignment_checks.radix_cache`: a7's radix tree read edge by edge as plain values
  (tokens, slots, references), and a tree planted by hand for the lookup's tests.

The per-assignment modules take the expected values from the cell that calls them, so a visible
cell keeps the worked answers and hints in sight and leaves the repeated wrapping here.

This is the top layer of the library, and the only part of it that knows about assignments. The
instructor's grader (release, autograde, feedback, sandbox, samples) is a separate package,
``kvcourse_grader`` under ``grading/``, that students never get.
"""

from __future__ import annotations

from kvcourse.assignment_checks.conductor import decision_summary
from kvcourse.assignment_checks.harness import (
    FreshCopy,
    fresh_copy,
    module_of,
    stand_in,
    switched_off,
)
from kvcourse.assignment_checks.readers import (
    arena_state,
    block_tables,
    cow_count,
    manager_state,
    table_state,
)
from kvcourse.assignment_checks.schedulers import (
    Progress,
    Served,
    Step,
    letters,
    name_of,
    progress,
    serve,
)
from kvcourse.assignment_checks.values import (
    as_float,
    as_int,
    as_int_list,
    as_int_or_none,
    as_int_pairs,
    expect_equal,
    expect_error,
)

__all__ = [
    "FreshCopy",
    "Progress",
    "Served",
    "Step",
    "arena_state",
    "as_float",
    "as_int",
    "as_int_list",
    "as_int_or_none",
    "as_int_pairs",
    "block_tables",
    "cow_count",
    "decision_summary",
    "expect_equal",
    "expect_error",
    "fresh_copy",
    "letters",
    "manager_state",
    "module_of",
    "name_of",
    "progress",
    "serve",
    "stand_in",
    "switched_off",
    "table_state",
]
