"""Sample submissions for a3_cow_fork (see kvcourse_grader.samples).

Each sample starts from the current student version in notebooks/ and fills the solution cells
named here; the others take the instructor's solution unless ``default=STUB``. ``passes`` lists the
test cells that must score. The tests grade all of them in one ``kvcourse-grade autograde`` run;
``kvcourse-grade samples a3_cow_fork --out DIR`` writes them out for a dry run.

The runner's own robustness (a loop, a dead kernel, a memory hog, deleted test cells) is shown by
the samples of a0_kv_sizing. These show what this assignment's tests add: one class graded in
three parts, and a library reference that must not stand in for the student's manager, whether
it is called, subclassed, reloaded behind the tests' back or copied function by function.
"""

from kvcourse_grader.leak_samples import leak_samples
from kvcourse_grader.samples import (
    ANYTHING,
    COPY_TOOLS,
    FORGE_SCORE,
    SWALLOW_ERRORS,
    Sample,
    basic_samples,
    pasted_reference,
    raises_first,
    replaced,
    tests_of,
)


# --- a partly right student: each mistake costs exactly the cells named in `passes` ---------------
def _partial_manager(solution: str) -> str:
    """The solution without the up-front check in ``append``: the copy's block is taken first and
    the new blocks after, so when the copy fits but the new blocks do not, ``allocate_many``
    raises with the copy already made (a leaked block, a changed table). The visible tests run out
    of blocks before the copy, which still changes nothing; the hidden tests of Part 3 (and the
    random programs of Part 5, on small pools) do not."""
    start = solution.index("        if int(copy) + new_blocks > self._pool.num_free:")
    end = solution.index("        if copy:\n", start)
    assert "raise OutOfBlocksError" in solution[start:end]
    return solution[:start] + solution[end:]


PARTIAL_FULL_COPY = """
def full_copy_tokens(beam_width: int, prompt_len: int, steps: int) -> int:
    # Counts steps 1 .. steps - 1 only: the first step's copies of the prompt are missing.
    if beam_width <= 0 or prompt_len <= 0 or steps < 0:
        raise ValueError("bad arguments")
    return beam_width * sum(prompt_len + s for s in range(1, steps))
"""


# --- one realistic mistake each: each costs the cells of the part where it is, and of the parts
# that run that method again (Parts 5 and 6 run fork, append and free together) ---------------
_COPY = (
    "        copy = num_tokens > 0 and length % size != 0 and self._pool.ref_count(table[-1]) > 1\n"
)

#: Copies a shared last block even when it is full, where nobody writes into it.
COPIES_FULL_BLOCK = replaced(
    _COPY, "        copy = num_tokens > 0 and bool(table) and self._pool.ref_count(table[-1]) > 1\n"
)

#: No copy-on-write at all: a shared, partly filled block is written in place.
WRITES_SHARED_BLOCK = replaced(_COPY, "        copy = False  # the block is written in place\n")

#: The copy takes a block of its own, but the shared block it replaces is never released.
COPY_LEAKS = replaced(
    "            self._pool.release(table[-1])  # the other holders keep it\n", ""
)

#: Copies are made but not counted.
UNCOUNTED_COPIES = replaced("            self._cows += 1\n", "")

#: The child gets the parent's list itself, not a copy: a write into one table is a write into
#: the other.
ALIASED_TABLE = replaced(
    "        self._tables[child_id] = list(self._tables[parent_id])\n",
    "        self._tables[child_id] = self._tables[parent_id]\n",
)

#: free forgets the sequence but gives none of its blocks back (a forgotten release).
FREE_LEAKS = replaced(
    "        for block in self._tables.pop(seq_id):\n            self._pool.release(block)\n",
    "        del self._tables[seq_id]\n",
)

#: One step too many: s runs over 0 .. steps, not 0 .. steps - 1.
EXTRA_STEP = replaced("for s in range(steps)))", "for s in range(steps + 1)))")


# --- right answers the tests must not punish --------------------------------------------------
#: The solution, but free releases a sequence's blocks last first. The pool's free queue then holds
#: them in the other order, so the blocks handed out after a free differ from the instructor's;
#: every test must accept that.
REVERSE_FREE = replaced(
    "        for block in self._tables.pop(seq_id):\n",
    "        for block in reversed(self._tables.pop(seq_id)):\n",
)


#: block_ids hands out the list the manager keeps: a caller who changes it changes the table.
HANDS_OUT_TABLE = replaced(
    "        return list(self._tables[seq_id])\n", "        return self._tables[seq_id]\n"
)

#: The new blocks first, the copy's block after them: the same tables while an append copies or
#: takes new blocks but never both, which a one-token append cannot.
COPY_AFTER_NEW_BLOCKS = replaced(
    "        if copy:\n"
    "            own = self._pool.allocate()\n"
    "            self._pool.release(table[-1])  # the other holders keep it\n"
    "            table[-1] = own\n"
    "            self._cows += 1\n"
    "        table.extend(self._pool.allocate_many(new_blocks))\n",
    "        fresh = self._pool.allocate_many(new_blocks)  # the new blocks first\n"
    "        if copy:\n"
    "            own = self._pool.allocate()\n"
    "            self._pool.release(table[-1])\n"
    "            table[-1] = own\n"
    "            self._cows += 1\n"
    "        table.extend(fresh)\n",
)


# --- right answers written another way: the tests must give them full marks ----------------------
#: Each sequence as (tokens, tuple of block ids): a fork shares the parent's tuple itself, which
#: is safe because nobody can change it; append builds a new tuple. The copy is decided from the
#: fill of the last block; free releases the blocks last first. Ex 5 by its closed form.
TUPLE_TABLES = {
    "CowBlockManager": """
from kvcourse.blocks import BlockPool, OutOfBlocksError


class CowBlockManager:
    def __init__(self, pool: BlockPool) -> None:
        self._pool = pool
        self._seqs = {}  # seq id -> (tokens, tuple of block ids)
        self._copies = 0

    @property
    def pool(self) -> BlockPool:
        return self._pool

    @property
    def cow_count(self) -> int:
        return self._copies

    def _get(self, seq_id):
        if seq_id not in self._seqs:
            raise KeyError(f"no sequence {seq_id!r}")
        return self._seqs[seq_id]

    def block_ids(self, seq_id):
        return list(self._get(seq_id)[1])

    def num_tokens(self, seq_id):
        return self._get(seq_id)[0]

    def add_sequence(self, seq_id):
        if seq_id in self._seqs:
            raise ValueError(f"sequence {seq_id!r} exists")
        self._seqs[seq_id] = (0, ())

    def append(self, seq_id, num_tokens=1):
        tokens, blocks = self._get(seq_id)
        if num_tokens < 0:
            raise ValueError("num_tokens must be zero or more")
        size = self._pool.block_size
        filled = tokens - (len(blocks) - 1) * size if blocks else 0  # slots used in the last block
        copy = num_tokens > 0 and 0 < filled < size and self._pool.ref_count(blocks[-1]) >= 2
        new = (tokens + num_tokens + size - 1) // size - len(blocks)
        if new + copy > self._pool.num_free:
            raise OutOfBlocksError(f"need {new + copy} blocks, {self._pool.num_free} free")
        if copy:
            mine = self._pool.allocate()
            self._pool.release(blocks[-1])
            blocks = blocks[:-1] + (mine,)
            self._copies += 1
        blocks += tuple(self._pool.allocate_many(new))
        self._seqs[seq_id] = (tokens + num_tokens, blocks)

    def fork(self, parent_id, child_id):
        tokens, blocks = self._get(parent_id)
        if child_id in self._seqs:
            raise ValueError(f"sequence {child_id!r} exists")
        for block in blocks:
            self._pool.share(block)
        self._seqs[child_id] = (tokens, blocks)  # the same tuple: nobody can change it

    def free(self, seq_id):
        _, blocks = self._get(seq_id)
        for block in reversed(blocks):
            self._pool.release(block)
        del self._seqs[seq_id]
""",
    "full_copy_tokens": """
def full_copy_tokens(beam_width: int, prompt_len: int, steps: int) -> int:
    if beam_width < 1 or prompt_len < 1 or steps < 0:
        raise ValueError("bad arguments")
    # sum of prompt_len + s for s = 0 .. steps - 1, in closed form
    return beam_width * (steps * prompt_len + steps * (steps - 1) // 2)
""",
}

#: A record per sequence with its own list, the tables kept in a list of records looked up by id,
#: the copy decided from the empty slots of the last block, the blocks of a free released in
#: sorted order; Ex 5 by adding up one step at a time.
RECORDS = {
    "CowBlockManager": """
from dataclasses import dataclass, field

from kvcourse.blocks import BlockPool, OutOfBlocksError


@dataclass
class _Sequence:
    seq_id: object
    tokens: int = 0
    blocks: list = field(default_factory=list)


class CowBlockManager:
    def __init__(self, pool: BlockPool) -> None:
        self.records = []
        self.copies = 0
        self._pool = pool

    pool = property(lambda self: self._pool)
    cow_count = property(lambda self: self.copies)

    def _find(self, seq_id):
        for record in self.records:
            if record.seq_id == seq_id:
                return record
        raise KeyError(f"no sequence {seq_id!r}")

    def _exists(self, seq_id):
        try:
            self._find(seq_id)
        except KeyError:
            return False
        return True

    def block_ids(self, seq_id):
        return tuple(self._find(seq_id).blocks)

    def num_tokens(self, seq_id):
        return self._find(seq_id).tokens

    def add_sequence(self, seq_id):
        if self._exists(seq_id):
            raise ValueError(f"sequence {seq_id!r} exists")
        self.records.append(_Sequence(seq_id))

    def append(self, seq_id, num_tokens=1):
        record = self._find(seq_id)
        if num_tokens < 0:
            raise ValueError("num_tokens must be zero or more")
        size = self._pool.block_size
        empty = len(record.blocks) * size - record.tokens  # empty slots of the last block
        shared = bool(record.blocks) and self._pool.ref_count(record.blocks[-1]) > 1
        copy = num_tokens > 0 and 0 < empty < size and shared
        new = 0
        while (len(record.blocks) + new) * size < record.tokens + num_tokens:
            new += 1
        if copy + new > self._pool.num_free:
            raise OutOfBlocksError("not enough free blocks")
        if copy:
            replacement = self._pool.allocate()
            self._pool.release(record.blocks[-1])
            record.blocks[-1] = replacement
            self.copies += 1
        for _ in range(new):
            record.blocks.append(self._pool.allocate())
        record.tokens += num_tokens

    def fork(self, parent_id, child_id):
        parent = self._find(parent_id)
        if self._exists(child_id):
            raise ValueError(f"sequence {child_id!r} exists")
        for block in parent.blocks:
            self._pool.share(block)
        self.records.append(_Sequence(child_id, parent.tokens, parent.blocks.copy()))

    def free(self, seq_id):
        record = self._find(seq_id)
        for block in sorted(record.blocks):
            self._pool.release(block)
        self.records.remove(record)
""",
    "full_copy_tokens": """
def full_copy_tokens(beam_width: int, prompt_len: int, steps: int) -> int:
    if beam_width <= 0:
        raise ValueError("beam_width must be positive")
    if prompt_len <= 0:
        raise ValueError("prompt_len must be positive")
    if steps < 0:
        raise ValueError("steps must be zero or more")
    total, length = 0, prompt_len
    for _step in range(steps):
        total += beam_width * length  # every new beam copies its parent's tokens
        length += 1
    return total
""",
}

# --- a hostile student: the library's manager in disguise, and every trick for Part 4 -----------
HOSTILE_MANAGER = '''
import importlib

import kvcourse.blocks


class CowBlockManager:
    """The library's reference manager, loaded afresh for every manager: the functions the tests
    switch off are not the ones that run."""

    def __init__(self, pool):
        home = importlib.import_module(kvcourse.blocks.SharedBlockManager.__module__)
        fresh = importlib.reload(home)
        self._inner = fresh.SharedBlockManager(pool)

    @property
    def pool(self):
        return self._inner.pool

    @property
    def cow_count(self):
        return self._inner.cow_count

    def __getattr__(self, name):
        return getattr(self._inner, name)
'''

HOSTILE_FULL_COPY = f"""
import sys

import kvcourse.generation
{ANYTHING}

# The tests never ask the library for expected values, so rewriting it changes nothing.
kvcourse.generation.full_copy_tokens = lambda *args, **kwargs: Anything(10176)


def full_copy_tokens(beam_width, prompt_len, steps):
    # nbgrader reads a test cell's first execute_result as its score: forge one; then ask
    # IPython to swallow the failing assertion instead of showing it.
    {FORGE_SCORE}
    {SWALLOW_ERRORS}
    return Anything(0)
"""

# --- the reference pasted, or retyped ----------------------------------------------------------
PASTED_MANAGER = pasted_reference(
    "kvcourse.blocks.sharing", {"SharedBlockManager": "CowBlockManager"}
)
RETYPED_MANAGER = pasted_reference(
    "kvcourse.blocks.sharing", {"SharedBlockManager": "CowBlockManager"}, retyped=True
)
#: What a pasted manager keeps: the visible tests (which cannot tell) and Part 4's, which never
#: runs the manager.
PASTED_PASSES = tests_of("full_copy_tokens")


# --- a copycat: the reference's functions copied before the tests can switch them off ----------
COPYCAT_MANAGER = f"""
{COPY_TOOLS}
import kvcourse.blocks

CowBlockManager = _copied_class("CowBlockManager", kvcourse.blocks.SharedBlockManager)
"""

COPYCAT_FULL_COPY = """
import types

import kvcourse.generation

_reference = kvcourse.generation.full_copy_tokens
full_copy_tokens = types.FunctionType(_reference.__code__, _reference.__globals__)
"""


SAMPLES = {
    **basic_samples(),
    "partial": Sample(
        about="an append that takes the copy's block before checking that the new blocks fit, "
        "and a full-copy count that forgets the first step",
        cells={
            "CowBlockManager": _partial_manager,
            "full_copy_tokens": PARTIAL_FULL_COPY,
        },
        passes=(
            *tests_of("own_sequences", "fork_free"),
            "test_copy_on_write",
            "test_beam_script",
            *tests_of("tiny_transformer"),
        ),
    ),
    "reverse_free": Sample(
        about="every part right; free releases a sequence's blocks last first, so blocks come "
        "back from the pool in another order",
        cells={"CowBlockManager": REVERSE_FREE},
    ),
    "tuple_tables": Sample(
        about="every part right, written another way: (tokens, tuple of blocks) per sequence, a "
        "fork sharing the parent's tuple, free last block first, Ex 5 in closed form",
        cells=TUPLE_TABLES,
    ),
    "records": Sample(
        about="every part right, written another way: a list of records looked up by id, the "
        "copy decided from the empty slots, blocks taken one at a time, Ex 5 added up",
        cells=RECORDS,
    ),
    "hands_out_table": Sample(
        about="block_ids returns the list the manager keeps, not a copy of it",
        cells={"CowBlockManager": HANDS_OUT_TABLE},
        passes=(
            "test_own_sequences",
            *tests_of("fork_free", "copy_on_write", "full_copy_tokens", "beam_script"),
            *tests_of("tiny_transformer"),
        ),
    ),
    "copy_after_new_blocks": Sample(
        about="a multi-token append takes its new blocks first and the copy's block after them",
        cells={"CowBlockManager": COPY_AFTER_NEW_BLOCKS},
        passes=(
            *tests_of("own_sequences", "fork_free"),
            "test_copy_on_write",
            *tests_of("full_copy_tokens", "beam_script", "tiny_transformer"),
        ),
    ),
    "copies_full_block": Sample(
        about="append copies a shared last block even when it is full",
        cells={"CowBlockManager": COPIES_FULL_BLOCK},
        passes=tests_of("own_sequences", "fork_free", "full_copy_tokens"),
    ),
    "writes_shared_block": Sample(
        about="no copy-on-write: a shared, partly filled block is written in place",
        cells={"CowBlockManager": WRITES_SHARED_BLOCK},
        passes=tests_of("own_sequences", "fork_free", "full_copy_tokens"),
    ),
    "copy_leaks": Sample(
        about="a copy-on-write that never releases the shared block it replaces",
        cells={"CowBlockManager": COPY_LEAKS},
        passes=tests_of("own_sequences", "fork_free", "full_copy_tokens"),
    ),
    "uncounted_copies": Sample(
        about="copies made but not counted in cow_count",
        cells={"CowBlockManager": UNCOUNTED_COPIES},
        passes=tests_of("own_sequences", "fork_free", "full_copy_tokens"),
    ),
    "aliased_table": Sample(
        about="fork gives the child the parent's list itself, not a copy of it",
        cells={"CowBlockManager": ALIASED_TABLE},
        passes=(*tests_of("own_sequences"), "test_fork_free", *tests_of("full_copy_tokens")),
    ),
    "free_leaks": Sample(
        about="free forgets the sequence without releasing its blocks",
        cells={"CowBlockManager": FREE_LEAKS},
        passes=tests_of("own_sequences", "full_copy_tokens"),
    ),
    "extra_step": Sample(
        about="the full-copy count runs one step too many (an off-by-one)",
        cells={"full_copy_tokens": EXTRA_STEP},
        passes=tests_of(
            "own_sequences", "fork_free", "copy_on_write", "beam_script", "tiny_transformer"
        ),
    ),
    "raises": Sample(
        about="the class cell raises at top level, so CowBlockManager is never defined",
        cells={"CowBlockManager": raises_first},
        passes=tests_of("full_copy_tokens"),
    ),
    "syntax_error": Sample(
        about="Part 4 does not parse; every other part is right",
        cells={"full_copy_tokens": lambda code: code.replace(") -> int:", ") -> int", 1)},
        passes=tests_of(
            "own_sequences", "fork_free", "copy_on_write", "beam_script", "tiny_transformer"
        ),
    ),
    "hostile": Sample(
        about="the library's manager reloaded behind the tests' back; always-equal results, a "
        "rewritten library, a forged score and swallowed errors for Part 4",
        cells={"CowBlockManager": HOSTILE_MANAGER, "full_copy_tokens": HOSTILE_FULL_COPY},
        passes=(),
    ),
    # The library's manager pasted into the cell (other file, other lines), and retyped with
    # other names for every argument and variable: the hidden tests' watch knows both for copies,
    # and every part that runs the manager loses its hidden points.
    "pasted_reference": Sample(
        about="the library's SharedBlockManager pasted into the cell as CowBlockManager",
        cells={"CowBlockManager": PASTED_MANAGER},
        passes=PASTED_PASSES,
    ),
    "retyped_reference": Sample(
        about="the library's SharedBlockManager retyped with other variable names",
        cells={"CowBlockManager": RETYPED_MANAGER},
        passes=PASTED_PASSES,
    ),
    "copycat": Sample(
        about="the library's manager and full_copy_tokens copied function by function before "
        "the tests run",
        cells={"CowBlockManager": COPYCAT_MANAGER, "full_copy_tokens": COPYCAT_FULL_COPY},
        passes=(),
    ),
}

# A student who traces every call from the first solution cell on and prints the record,
# scrambled, in the last: every hidden cell runs in the grader, so none of it is a hidden test's.
SAMPLES["leaks_tracer"] = leak_samples("CowBlockManager", "full_copy_tokens", "full_copy_tokens")[
    "leaks_tracer"
]
