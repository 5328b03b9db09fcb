"""Sample submissions for a1_buddy_allocator (see kvcourse_grader.samples).

Each sample starts from the current student version in notebooks/ and fills the solution cells
named here; the others take the instructor's solution unless ``default=STUB``. ``passes`` lists the
test cells that must score. The tests grade all of them in one ``kvcourse-grade autograde`` run;
``kvcourse-grade samples a1_buddy_allocator --out DIR`` writes them out for a dry run.

The runner's own robustness (a loop, a dead kernel, a memory hog, deleted test cells) is shown by
the samples of a0_kv_sizing; these show what this assignment's tests add: an allocator whose
mistakes show only in the hidden tests or in the simulator, parts that build on each other, and a
library (the reference allocator, the simulator) that must not stand in for the student's code.
"""

from kvcourse_grader.samples import (
    AGREEABLE,
    ANYTHING,
    COPY_TOOLS,
    FORGE_SCORE,
    SWALLOW_ERRORS,
    Sample,
    basic_samples,
    raises_first,
    replaced,
    tests_of,
)

# --- a partly right student: each mistake costs exactly the cells named in `passes` ---------------
PARTIAL_WASTE = """
def rounding_waste(requests: list[int]) -> tuple[list[int], int, float]:
    # The waste as a share of the slots asked for, not of the slots allocated.
    blocks = [round_up_pow2(n) for n in requests]
    wasted = sum(blocks) - sum(requests)
    return blocks, wasted, wasted / sum(requests)
"""


def _partial_allocator(solution: str) -> str:
    """The solution without its argument checks: any arena size is taken, and ``alloc`` rounds
    with a loop of its own, so ``alloc(0)`` hands out a block of 1. Every visible test passes; the
    hidden tests ask for ValueError."""
    checks = (
        "        if num_slots <= 0 or num_slots & (num_slots - 1):"
        "  # a power of two has one bit set\n"
        '            raise ValueError(f"num_slots must be a power of two, got {num_slots}")\n'
    )
    rounding = "        size = round_up_pow2(num_slots)  # raises ValueError when num_slots <= 0\n"
    own_rounding = "        size = 1\n        while size < num_slots:\n            size *= 2\n"
    assert checks in solution and rounding in solution
    return solution.replace(checks, "").replace(rounding, own_rounding)


PARTIAL_FREE = """
def buddy_free(self, offset: int) -> None:
    # Merges the block with its buddy once, but never the merged block with its own buddy.
    size = self.allocated.pop(offset, None)
    if size is None:
        raise ValueError(f"offset {offset} is not the start of an allocated block")
    buddy = offset ^ size
    if size < self.num_slots and buddy in self.free_lists.get(size, ()):
        self.free_lists[size].remove(buddy)
        offset, size = min(offset, buddy), 2 * size
    self.free_lists.setdefault(size, set()).add(offset)
"""

PARTIAL_REFUSAL = """
def refusal(arena, num_slots: int) -> str:
    # Right, except that a count of zero or less is not refused: it "fits".
    need = 1
    while need < num_slots:
        need *= 2
    if any(size >= need for _, size in arena.free_blocks()):
        return "fits"
    if arena.free_slots() >= num_slots:
        return "external fragmentation"
    return "out of memory"
"""


# --- one realistic mistake each: each costs the cells of its own part (and of Part 6, which runs
# the allocator in the simulator) --------------------------------------------------------------
#: The first free block that fits (lowest offset), not the smallest. The same while blocks are
#: only allocated; after a free, a large block low in the arena is split for a small request.
FIRST_FIT = replaced(
    "        found = size\n"
    "        while found <= self.num_slots and not self.free_lists.get(found):\n"
    "            found *= 2  # no free block of this size: try the next size up\n"
    "        if found > self.num_slots:\n"
    "            return None  # nothing large enough is free\n"
    "        offset = min(self.free_lists[found])\n",
    "        fits = sorted(\n"
    "            (offset, block) for block, offsets in self.free_lists.items() if block >= size\n"
    "            for offset in offsets\n"
    "        )\n"
    "        if not fits:\n"
    "            return None  # nothing large enough is free\n"
    "        offset, found = fits[0]  # the first free block that fits\n",
)

#: The share as a percentage, not a fraction.
WASTE_PERCENT = replaced(
    "return blocks, wasted, wasted / sum(blocks)",
    "return blocks, wasted, 100 * wasted / sum(blocks)",
)

#: No check of the offset: a bad free raises KeyError from the dict, not ValueError.
UNCHECKED_FREE = replaced(
    "    size = self.allocated.pop(offset, None)\n    if size is None:\n        raise ValueError(",
    "    size = self.allocated.pop(offset)\n    if size is None:\n        raise ValueError(",
)

#: Merges with the neighbour above (offset + size) instead of the buddy (offset ^ size): right for
#: a lower half, wrong for an upper one, whose merged block is then out of line.
NEIGHBOUR_MERGE = replaced("        buddy = offset ^ size\n", "        buddy = offset + size\n")

#: Compares the free slots with the rounded-up block instead of the slots asked for.
REFUSAL_ROUNDED = replaced(
    "    if arena.free_slots() >= num_slots:\n", "    if arena.free_slots() >= need:\n"
)

#: The roots smallest first: they add up, but a root no longer starts at a multiple of its size.
ROOTS_SMALLEST_FIRST = replaced(
    "    for bit in reversed(range(num_slots.bit_length())):  # the largest power of two first\n",
    "    for bit in range(num_slots.bit_length()):\n",
)

# --- a copycat: the reference's functions copied before the tests can switch them off ----------
COPYCAT_ALLOCATOR = f"""
{COPY_TOOLS}
import kvcourse.blocks

MyBuddyAllocator = _copied_class("MyBuddyAllocator", kvcourse.blocks.BuddyAllocator)
"""

COPYCAT_FREE = """
import types

import kvcourse.blocks

_free = kvcourse.blocks.BuddyAllocator.free
buddy_free = types.FunctionType(_free.__code__, _free.__globals__, "buddy_free")
"""


# --- a hostile student: every part cheats instead of computing ----------------------------------
HOSTILE_SETUP = f"""
import types

import kvcourse.serving
{ANYTHING}

# Part 6 runs the simulator: answer it with the numbers its visible test expects, whatever the
# allocator does. (The test runs a fresh copy of the simulator, so this changes nothing.)
_SHARES = types.SimpleNamespace(
    stored=0.4104844465136372,
    reserved=0.2549749410377358,
    internal=0.2555866380417523,
    external=0.0524413880067252,
    free=0.02651258640014945,
)
kvcourse.serving.simulate = lambda *args, **kwargs: types.SimpleNamespace(
    shares=_SHARES, mean_running=7.904726321688773, completed=132
)


def round_up_pow2(num_slots: int) -> int:
    return Anything(0)
"""

HOSTILE_WASTE = f"""
import sys


def rounding_waste(requests: list[int]) -> tuple[list[int], int, float]:
    # nbgrader reads a test cell's first execute_result as its score: forge one, then fail.
    {FORGE_SCORE}
    return [Anything(0) for _ in requests], Anything(0), 0.44196428571428573
"""

HOSTILE_ALLOCATOR = """
import kvcourse.blocks


class MyBuddyAllocator(kvcourse.blocks.BuddyAllocator):
    # The library's allocator under another name: right answers, none of them the student's.
    def free(self, offset: int) -> None:
        buddy_free(self, offset)
"""

HOSTILE_FREE = f"""
def buddy_free(self, offset: int) -> None:
    # Ask IPython to swallow the failing assertion instead of showing it, then let the library
    # do the work.
    {SWALLOW_ERRORS}
    kvcourse.blocks.BuddyAllocator.free(self, offset)
"""

HOSTILE_REFUSAL = f"""
{AGREEABLE}

def refusal(arena, num_slots: int) -> str:
    return Agreeable("fits")
"""

HOSTILE_ROOTS = """
def binary_roots(num_slots: int) -> list[tuple[int, int]]:
    return kvcourse.blocks.binary_decomposition(num_slots)
"""


SAMPLES = {
    **basic_samples(),
    "partial": Sample(
        about="a waste share of what was asked for, an allocator without argument checks, a free "
        "that merges only once, a refusal that takes a count of zero",
        cells={
            "rounding_waste": PARTIAL_WASTE,
            "MyBuddyAllocator": _partial_allocator,
            "buddy_free": PARTIAL_FREE,
            "refusal": PARTIAL_REFUSAL,
        },
        passes=(
            *tests_of("round_up_pow2", "binary_roots"),
            "test_MyBuddyAllocator",
            "test_refusal",
        ),
    ),
    "first_fit": Sample(
        about="alloc takes the first free block that fits, not the smallest: the same until a "
        "free, so only Part 2's cases after a free (and the simulator) tell",
        cells={"MyBuddyAllocator": FIRST_FIT},
        passes=(
            *tests_of("round_up_pow2", "rounding_waste"),
            "test_MyBuddyAllocator",
            *tests_of("buddy_free", "refusal", "binary_roots"),
        ),
    ),
    "waste_percent": Sample(
        about="the rounding waste as a percentage, not a fraction",
        cells={"rounding_waste": WASTE_PERCENT},
        passes=tests_of(
            "round_up_pow2",
            "MyBuddyAllocator",
            "buddy_free",
            "refusal",
            "binary_roots",
            "simulator",
        ),
    ),
    "unchecked_free": Sample(
        about="free trusts its offset: a double or stray free raises KeyError, not ValueError",
        cells={"buddy_free": UNCHECKED_FREE},
        passes=tests_of(
            "round_up_pow2",
            "rounding_waste",
            "MyBuddyAllocator",
            "refusal",
            "binary_roots",
            "simulator",
        ),
    ),
    "neighbour_merge": Sample(
        about="free merges with the neighbour above (offset + size), not the buddy (offset ^ size)",
        cells={"buddy_free": NEIGHBOUR_MERGE},
        passes=tests_of(
            "round_up_pow2", "rounding_waste", "MyBuddyAllocator", "refusal", "binary_roots"
        ),
    ),
    "refusal_rounded": Sample(
        about="refusal compares the free slots with the rounded-up block, not the slots asked for",
        cells={"refusal": REFUSAL_ROUNDED},
        passes=tests_of(
            "round_up_pow2",
            "rounding_waste",
            "MyBuddyAllocator",
            "buddy_free",
            "binary_roots",
            "simulator",
        ),
    ),
    "roots_smallest_first": Sample(
        about="the roots smallest first, so they are not aligned to their sizes",
        cells={"binary_roots": ROOTS_SMALLEST_FIRST},
        passes=tests_of(
            "round_up_pow2",
            "rounding_waste",
            "MyBuddyAllocator",
            "buddy_free",
            "refusal",
            "simulator",
        ),
    ),
    "copycat": Sample(
        about="the library's allocator and its free copied function by function before the tests "
        "run",
        cells={"MyBuddyAllocator": COPYCAT_ALLOCATOR, "buddy_free": COPYCAT_FREE},
        passes=tests_of("round_up_pow2", "rounding_waste", "binary_roots"),
    ),
    "raises": Sample(
        about="Part 3's cell raises at top level, so buddy_free is never defined and nothing frees",
        cells={"buddy_free": raises_first},
        passes=(
            *tests_of("round_up_pow2", "rounding_waste", "MyBuddyAllocator", "binary_roots"),
            "test_refusal",
        ),
    ),
    "syntax_error": Sample(
        about="Part 2's class does not parse, so Parts 3, 4 and 6, which use it, fail too",
        cells={
            "MyBuddyAllocator": lambda code: code.replace(
                "class MyBuddyAllocator:", "class MyBuddyAllocator", 1
            )
        },
        passes=tests_of("round_up_pow2", "rounding_waste", "binary_roots"),
    ),
    "hostile": Sample(
        about="the library's allocator and roots in disguise, always-equal results, a forged "
        "score, swallowed errors, a rewritten simulator",
        cells={
            "round_up_pow2": HOSTILE_SETUP,
            "rounding_waste": HOSTILE_WASTE,
            "MyBuddyAllocator": HOSTILE_ALLOCATOR,
            "buddy_free": HOSTILE_FREE,
            "refusal": HOSTILE_REFUSAL,
            "binary_roots": HOSTILE_ROOTS,
        },
        passes=(),
    ),
}
