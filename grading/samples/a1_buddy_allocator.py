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

from kvcourse_grader.leak_samples import leak_samples
from kvcourse_grader.samples import (
    AGREEABLE,
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

#: Rounds the caller's list in place and hands it back as the blocks: right numbers, but the list
#: the caller passed in now holds block sizes.
ROUNDS_IN_PLACE = """
def rounding_waste(requests: list[int]) -> tuple[list[int], int, float]:
    if not requests or any(n <= 0 for n in requests):
        raise ValueError(f"requests must be one or more positive slot counts, got {requests}")
    asked = sum(requests)
    for i, n in enumerate(requests):
        requests[i] = round_up_pow2(n)  # the caller's list now holds the blocks
    wasted = sum(requests) - asked
    return requests, wasted, wasted / sum(requests)
"""

#: The merged block keeps the freed block's offset instead of the lower of the two: right when
#: the lower half is freed last, a block out of line when the upper half is.
MERGES_AT_OWN_OFFSET = replaced(
    "        offset = min(offset, buddy)  # the merged block starts at the lower half\n", ""
)

#: binary_roots memoized with functools.cache: every call for a size hands out the same list, so
#: a caller who changes it changes every later answer.
CACHED_ROOTS = """
import functools


@functools.cache
def binary_roots(num_slots: int) -> list[tuple[int, int]]:
    if num_slots <= 0:
        raise ValueError(f"num_slots must be positive, got {num_slots}")
    roots, offset = [], 0
    for bit in reversed(range(num_slots.bit_length())):
        if num_slots >> bit & 1:
            roots.append((offset, 1 << bit))
            offset += 1 << bit
    return roots
"""

# The free lists as Python lists, used as stacks: a freed block goes on top, and alloc takes the
# top block of the smallest size that fits, the one freed last, not the one at the lowest offset.
# The same as long as no two free blocks have the same size, which only frees bring about.
NEWEST_FIRST_ALLOCATOR = """
class MyBuddyAllocator:
    def __init__(self, num_slots: int) -> None:
        if num_slots <= 0 or num_slots & (num_slots - 1):
            raise ValueError(f"num_slots must be a power of two, got {num_slots}")
        self.num_slots = num_slots
        self.free_lists: dict[int, list[int]] = {num_slots: [0]}  # size -> stack of offsets
        self.allocated: dict[int, int] = {}

    def free_slots(self) -> int:
        return sum(size * len(offsets) for size, offsets in self.free_lists.items())

    def free_blocks(self) -> list[tuple[int, int]]:
        return sorted(
            (offset, size) for size, offsets in self.free_lists.items() for offset in offsets
        )

    def alloc(self, num_slots: int) -> int | None:
        size = round_up_pow2(num_slots)
        found = size
        while found <= self.num_slots and not self.free_lists.get(found):
            found *= 2
        if found > self.num_slots:
            return None
        offset = self.free_lists[found].pop()  # the block freed last: ties go to the newest
        while found > size:
            found //= 2
            self.free_lists.setdefault(found, []).append(offset + found)
        self.allocated[offset] = size
        return offset

    def free(self, offset: int) -> None:
        buddy_free(self, offset)
"""

NEWEST_FIRST_FREE = """
def buddy_free(self, offset: int) -> None:
    size = self.allocated.pop(offset, None)
    if size is None:
        raise ValueError(f"offset {offset} is not the start of an allocated block")
    while size < self.num_slots:
        buddy = offset ^ size
        if buddy not in self.free_lists.get(size, ()):
            break
        self.free_lists[size].remove(buddy)
        offset = min(offset, buddy)
        size *= 2
    self.free_lists.setdefault(size, []).append(offset)
"""


# --- right answers written another way: the tests must give them full marks ----------------------
#: One sorted list of free blocks instead of a free list per size, a merge that calls itself
#: (recursion instead of a loop), rounding by doubling, the share as one minus the requests'
#: share, and the roots by recursion.
SORTED_LIST = {
    "round_up_pow2": """
def round_up_pow2(num_slots: int) -> int:
    if num_slots <= 0:
        raise ValueError(f"num_slots must be positive, got {num_slots}")
    size = 1
    while size < num_slots:
        size *= 2
    return size
""",
    "rounding_waste": """
def rounding_waste(requests: list[int]) -> tuple[list[int], int, float]:
    if len(requests) == 0 or min(requests) <= 0:
        raise ValueError("requests must be one or more positive slot counts")
    blocks = [round_up_pow2(n) for n in requests]
    wasted = sum(block - n for block, n in zip(blocks, requests))
    return blocks, wasted, 1 - sum(requests) / sum(blocks)
""",
    "MyBuddyAllocator": """
import bisect


class MyBuddyAllocator:
    def __init__(self, num_slots: int) -> None:
        if num_slots < 1 or bin(num_slots).count("1") != 1:
            raise ValueError(f"num_slots must be a power of two, got {num_slots}")
        self.num_slots = num_slots
        self.free_list = [(0, num_slots)]  # every free block, sorted by offset
        self.used = {}  # offset -> size

    def free_slots(self) -> int:
        return sum(size for _, size in self.free_list)

    def free_blocks(self) -> list[tuple[int, int]]:
        return list(self.free_list)

    def alloc(self, num_slots: int) -> int | None:
        size = round_up_pow2(num_slots)
        fits = [(block, offset) for offset, block in self.free_list if block >= size]
        if not fits:
            return None
        block, offset = min(fits)  # the smallest; the lowest offset among equals
        self.free_list.remove((offset, block))
        while block > size:
            block //= 2
            bisect.insort(self.free_list, (offset + block, block))
        self.used[offset] = size
        return offset

    def free(self, offset: int) -> None:
        buddy_free(self, offset)
""",
    "buddy_free": """
def _merge(arena, offset: int, size: int) -> None:
    buddy = offset ^ size
    if size == arena.num_slots or (buddy, size) not in arena.free_list:
        bisect.insort(arena.free_list, (offset, size))
        return
    arena.free_list.remove((buddy, size))
    _merge(arena, min(offset, buddy), 2 * size)


def buddy_free(self, offset: int) -> None:
    if offset not in self.used:
        raise ValueError(f"offset {offset} is not the start of an allocated block")
    _merge(self, offset, self.used.pop(offset))
""",
    "refusal": """
def refusal(arena, num_slots: int) -> str:
    need = round_up_pow2(num_slots)
    largest = max((size for _, size in arena.free_blocks()), default=0)
    if largest >= need:
        return "fits"
    return "external fragmentation" if arena.free_slots() >= num_slots else "out of memory"
""",
    "binary_roots": """
def binary_roots(num_slots: int) -> list[tuple[int, int]]:
    if num_slots <= 0:
        raise ValueError(f"num_slots must be positive, got {num_slots}")
    size = 1 << (num_slots.bit_length() - 1)  # the largest power of two in num_slots
    rest = binary_roots(num_slots - size) if num_slots > size else []
    return [(0, size)] + [(size + offset, part) for offset, part in rest]
""",
}

#: Every block, free or allocated, in one dict from its offset, merged by looking the buddy up
#: there; rounding from the binary digits, the waste added up in a loop, the roots read off the
#: binary digits left to right.
BLOCK_MAP = {
    "round_up_pow2": """
def round_up_pow2(num_slots: int) -> int:
    if num_slots < 1:
        raise ValueError(f"num_slots must be positive, got {num_slots}")
    return 1 if num_slots == 1 else 2 ** len(bin(num_slots - 1)[2:])
""",
    "rounding_waste": """
def rounding_waste(requests: list[int]) -> tuple[list[int], int, float]:
    blocks, asked, given = [], 0, 0
    for n in requests:
        if n <= 0:
            raise ValueError(f"a request of {n} slots")
        blocks.append(round_up_pow2(n))
        asked += n
        given += blocks[-1]
    if not blocks:
        raise ValueError("no requests")
    return blocks, given - asked, (given - asked) / given
""",
    "MyBuddyAllocator": """
class MyBuddyAllocator:
    def __init__(self, num_slots: int) -> None:
        if num_slots <= 0 or round_up_pow2(num_slots) != num_slots:
            raise ValueError(f"num_slots must be a power of two, got {num_slots}")
        self.num_slots = num_slots
        self.blocks = {0: [num_slots, True]}  # offset -> [size, is free]: they tile the arena

    def free_slots(self) -> int:
        return sum(size for size, is_free in self.blocks.values() if is_free)

    def free_blocks(self) -> list[tuple[int, int]]:
        return sorted((offset, size) for offset, (size, is_free) in self.blocks.items() if is_free)

    def alloc(self, num_slots: int) -> int | None:
        size = round_up_pow2(num_slots)
        best = None
        for offset in sorted(self.blocks):  # a later block wins only when it is smaller
            block, is_free = self.blocks[offset]
            if is_free and block >= size and (best is None or block < self.blocks[best][0]):
                best = offset
        if best is None:
            return None
        block = self.blocks[best][0]
        while block > size:
            block //= 2
            self.blocks[best + block] = [block, True]
        self.blocks[best] = [size, False]
        return best

    def free(self, offset: int) -> None:
        buddy_free(self, offset)
""",
    "buddy_free": """
def buddy_free(self, offset: int) -> None:
    entry = self.blocks.get(offset)
    if entry is None or entry[1]:
        raise ValueError(f"offset {offset} is not the start of an allocated block")
    size = entry[0]
    entry[1] = True
    while size < self.num_slots:
        buddy = self.blocks.get(offset ^ size)
        if buddy is None or not buddy[1] or buddy[0] != size:
            break  # the buddy is allocated, or split
        del self.blocks[max(offset, offset ^ size)]
        offset = min(offset, offset ^ size)
        size *= 2
        self.blocks[offset] = [size, True]
""",
    "refusal": """
def refusal(arena, num_slots: int) -> str:
    need = round_up_pow2(num_slots)
    sizes = sorted(size for _, size in arena.free_blocks())
    if sizes and sizes[-1] >= need:
        return "fits"
    if arena.free_slots() >= num_slots:
        return "external fragmentation"
    return "out of memory"
""",
    "binary_roots": """
def binary_roots(num_slots: int) -> list[tuple[int, int]]:
    if num_slots <= 0:
        raise ValueError(f"num_slots must be positive, got {num_slots}")
    digits = bin(num_slots)[2:]
    roots, offset = [], 0
    for position, digit in enumerate(digits):
        if digit == "1":
            size = 2 ** (len(digits) - 1 - position)
            roots.append((offset, size))
            offset += size
    return roots
""",
}

#: SORTED_LIST's allocator, but free_blocks hands out the list the allocator keeps: a caller who
#: changes it changes the free blocks.
HANDS_OUT_FREE_LIST = replaced(
    "        return list(self.free_list)\n", "        return self.free_list\n"
)(SORTED_LIST["MyBuddyAllocator"])

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


PARTS = (
    "round_up_pow2",
    "rounding_waste",
    "MyBuddyAllocator",
    "buddy_free",
    "refusal",
    "binary_roots",
    "simulator",
)


def all_but(*parts: str) -> tuple[str, ...]:
    """The test cells of every part except those named."""
    return tests_of(*(part for part in PARTS if part not in parts))


#: What a pasted allocator keeps: the parts that never run the allocator.
PASTED_PASSES = tests_of("round_up_pow2", "rounding_waste", "binary_roots")


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
    "rounds_in_place": Sample(
        about="rounding_waste rounds the caller's list in place and returns it as the blocks",
        cells={"rounding_waste": ROUNDS_IN_PLACE},
        passes=(*all_but("rounding_waste"), "test_rounding_waste"),
    ),
    "merges_at_own_offset": Sample(
        about="a merged block starts at the freed block's offset, not at the lower of the two "
        "buddies (right only when the lower half is freed last)",
        cells={"buddy_free": MERGES_AT_OWN_OFFSET},
        passes=(
            *tests_of("round_up_pow2", "rounding_waste", "MyBuddyAllocator", "refusal"),
            *tests_of("binary_roots"),
            "test_buddy_free",
        ),
    ),
    "newest_first": Sample(
        about="free lists kept as stacks: among free blocks of the same size alloc takes the one "
        "freed last, not the one at the lowest offset",
        cells={"MyBuddyAllocator": NEWEST_FIRST_ALLOCATOR, "buddy_free": NEWEST_FIRST_FREE},
        passes=(*all_but("MyBuddyAllocator", "simulator"), "test_MyBuddyAllocator"),
    ),
    "hands_out_free_list": Sample(
        about="free_blocks returns the sorted list the allocator keeps, not a copy of it",
        cells={
            "MyBuddyAllocator": HANDS_OUT_FREE_LIST,
            "buddy_free": SORTED_LIST["buddy_free"],
        },
        passes=(*all_but("MyBuddyAllocator"), "test_MyBuddyAllocator"),
    ),
    "cached_roots": Sample(
        about="binary_roots memoized: every call for a size returns the same list",
        cells={"binary_roots": CACHED_ROOTS},
        passes=(*all_but("binary_roots"), "test_binary_roots"),
    ),
    "sorted_list": Sample(
        about="every part right: one sorted list of free blocks, a recursive merge, rounding by "
        "doubling, the share as one minus the requests' share, recursive roots",
        cells=SORTED_LIST,
    ),
    "block_map": Sample(
        about="every part right: every block in one dict from its offset, rounding from the "
        "binary digits, the waste added up in a loop, the roots read off the binary digits",
        cells=BLOCK_MAP,
    ),
    # The library's BuddyAllocator pasted into the cell, and retyped with other names for every
    # argument and variable: the hidden tests' watch knows both for copies.
    "pasted_reference": Sample(
        about="the library's BuddyAllocator pasted into the cell as MyBuddyAllocator",
        cells={
            "MyBuddyAllocator": pasted_reference(
                "kvcourse.blocks.buddy", {"BuddyAllocator": "MyBuddyAllocator"}
            )
        },
        passes=PASTED_PASSES,
    ),
    "retyped_reference": Sample(
        about="the library's BuddyAllocator retyped with other variable names",
        cells={
            "MyBuddyAllocator": pasted_reference(
                "kvcourse.blocks.buddy", {"BuddyAllocator": "MyBuddyAllocator"}, retyped=True
            )
        },
        passes=PASTED_PASSES,
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

# Students who read the hidden tests while they run; here the tests run in the grader (all but
# the simulator's, whose student code only hands out offsets, in a copy of the kernel).
SAMPLES.update(leak_samples("round_up_pow2", "binary_roots", "round_up_pow2"))

READS_EXPECTED = """
import sys


def refusal(arena, num_slots: int) -> str:
    if num_slots <= 0:
        raise ValueError("a request takes at least one slot")
    frame = sys._getframe(1)
    while frame is not None:  # the test that called: its expected answer is the answer
        if "expected" in frame.f_locals:
            return frame.f_locals["expected"]
        frame = frame.f_back
    return "fits"
"""

# A student who answers with what the calling test expects, read from its frame: the visible
# tests run in the kernel and give it away; the hidden ones run in the grader.
SAMPLES["reads_expected"] = Sample(
    about="refusal's answer read from the calling test's `expected`, nothing computed",
    cells={"refusal": READS_EXPECTED},
    passes=(*all_but("refusal"), "test_refusal"),
)
