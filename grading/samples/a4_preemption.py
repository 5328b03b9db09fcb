"""Sample submissions for a4_preemption (see kvcourse_grader.samples).

Each sample starts from the current student version in notebooks/ and fills the solution cells
named here; the others take the instructor's solution unless ``default=STUB``. ``passes`` lists the
test cells that must score. The tests grade all of them in one ``kvcourse-grade autograde`` run;
``kvcourse-grade samples a4_preemption --out DIR`` writes them out for a dry run.

The runner's own robustness (a loop, a dead kernel, a memory hog, deleted test cells) is shown by
the samples of a0_kv_sizing. These show what this assignment's tests add: one scheduler class
whose three methods are graded in three parts, each with the library's version of the other two,
then together (Part 5); and a library reference (vLLM's hooks) that must not stand in for the
student's, whether it is inherited, called or copied function by function.
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

# --- Part 1 (Ex 6): one mistake each, in the cost model -------------------------------------------
#: One copy per layer and block: K and V moved together, as if they were one tensor.
ONE_KV_COPY = replaced(
    "    copies = OPT13B_LAYERS * 2 * blocks  #", "    copies = OPT13B_LAYERS * blocks  #"
)

#: Bytes over bandwidth only: the fixed 10 µs of each copy forgotten.
NO_PER_COPY_COST = replaced(
    "(PCIE_PER_COPY_S + copy_bytes / PCIE_BANDWIDTH)", "(copy_bytes / PCIE_BANDWIDTH)"
)

#: Swapping out compared with recomputing: the copy back in forgotten.
ONE_WAY_EX6 = replaced(
    "    round_trip = 2 * swap_out_seconds(tokens, block_size)",
    "    round_trip = swap_out_seconds(tokens, block_size)",
)

_VICTIM = "        return max(self.running, key=lambda live: live.order)\n"
_REQUEUE = "        self.waiting.appendleft(victim)  # ahead of everyone who arrived after it\n"
_ROUND_TRIP = "            round_trip_s = 2 * self.swap_cost.seconds(blocks)\n"

# --- Part 2: the wrong victim -------------------------------------------------------------------
#: The request that needs the block gives up its own memory, whoever arrived last.
PREEMPTS_NEEDY = replaced(_VICTIM, "        return needy\n")

#: The earliest-arrived running request ("it has had its share").
PREEMPTS_EARLIEST = replaced(_VICTIM, "        return self.running[0]\n")

#: The request holding the most tokens ("it frees the most memory").
PREEMPTS_LONGEST = replaced(
    _VICTIM, "        return max(self.running, key=lambda live: live.prompt + live.done)\n"
)

# --- Part 3: the preempt step -------------------------------------------------------------------
#: The victim goes to the back of the queue, behind requests that arrived after it.
REQUEUES_AT_BACK = replaced(_REQUEUE, "        self.waiting.append(victim)\n")

#: The victim leaves the batch but keeps its blocks (a forgotten release).
KEEPS_BLOCKS = replaced("        self.memory.release(victim)  # every block at once\n", "")

#: The run's count of preemptions is never raised.
UNCOUNTED = replaced("        self.preemptions += 1\n", "")

# --- Part 4: the recovery -----------------------------------------------------------------------
#: "cheaper" compares one way out with recomputing (Part 1's one-way mistake, in the scheduler).
ONE_WAY_CHEAPER = replaced(
    _ROUND_TRIP, "            round_trip_s = self.swap_cost.seconds(blocks)\n"
)

#: A swap that finds no room in the CPU pool is not followed by a recompute.
NO_FALLBACK = replaced(
    "                if self.swap_out(victim):\n                    return\n",
    "                self.swap_out(victim)\n                return\n",
)

# --- right answers the tests must not punish ----------------------------------------------------
#: The batch is in arrival order, so its last request is the latest; the victim is put back by
#: insertion in arrival order rather than at the front. Both are right.
OTHER_RIGHT_WAY = replaced(_VICTIM, "        return self.running[-1]\n")


def _insort(solution: str) -> str:
    code = OTHER_RIGHT_WAY(solution)
    code = code.replace(
        _REQUEUE,
        "        bisect.insort(self.waiting, victim, key=lambda live: live.order)\n",
    )
    return "import bisect\n\n" + code


# --- ties: exact in binary, so every order of the arithmetic meets them -------------------------
#: A tie between the round trip and recomputing goes to swapping (<= for <).
SWAPS_ON_EX6_TIE = replaced(
    '    return "swap" if round_trip < recompute_s else "recompute"',
    '    return "swap" if round_trip <= recompute_s else "recompute"',
)

#: The same in the scheduler: recover swaps when swapping costs exactly as much as recomputing.
SWAPS_ON_TIE = replaced(
    '            if self.recovery == "swap" or round_trip_s < recompute_s:\n',
    '            if self.recovery == "swap" or round_trip_s <= recompute_s:\n',
)

#: The latest arrival read from the arrival times: among requests that arrived at the same
#: moment, max() keeps the first, the earliest in arrival order.
VICTIM_BY_ARRIVAL_TIME = replaced(
    _VICTIM, "        return max(self.running, key=lambda live: live.request.arrival_s)\n"
)

# --- more right answers: other arithmetic, other loops ------------------------------------------
#: Ex 6 adds the copies one by one, as the GPU makes them, and compares out + in with
#: recomputing; recover adds up the blocks' swap times one block at a time. The sums differ
#: from the products in the last bits, which the tests allow for.
COPIES_ONE_BY_ONE_EX6 = """
import math


def swap_out_seconds(tokens: int, block_size: int) -> float:
    if tokens < 1 or block_size < 1:
        raise ValueError("tokens and block_size must be positive")
    one_copy = PCIE_PER_COPY_S + block_size * OPT13B_HIDDEN * FP16_BYTES / PCIE_BANDWIDTH
    seconds = 0.0
    for _block in range(math.ceil(tokens / block_size)):
        for _layer in range(OPT13B_LAYERS):
            for _tensor in ("K", "V"):
                seconds += one_copy  # one copy after another
    return seconds


def faster_recovery(tokens: int, block_size: int, recompute_s: float) -> str:
    if recompute_s <= 0:
        raise ValueError("recompute_s must be positive")
    out = swap_out_seconds(tokens, block_size)
    back_in = swap_out_seconds(tokens, block_size)
    if out + back_in < recompute_s:
        return "swap"
    return "recompute"
"""

BLOCK_BY_BLOCK = replaced(
    "            round_trip_s = 2 * self.swap_cost.seconds(blocks)\n",
    "            out_s = 0.0\n"
    "            for _ in range(blocks):  # one block after another\n"
    "                out_s += self.swap_cost.seconds(1)\n"
    "            round_trip_s = out_s + out_s\n",
)

#: Ex 6 as bytes and fixed costs apart, compared as one way against half the recompute time;
#: the victim found by a scan, taken out by its index, put back with deque.insert; recover
#: written as "recompute unless swapping is strictly faster".
APART_EX6 = """
def swap_out_seconds(tokens: int, block_size: int) -> float:
    if min(tokens, block_size) <= 0:
        raise ValueError(f"need positive tokens and block_size, got {tokens}, {block_size}")
    blocks = (tokens + block_size - 1) // block_size
    copies = blocks * OPT13B_LAYERS * 2
    moved = copies * block_size * OPT13B_HIDDEN * FP16_BYTES
    return copies * PCIE_PER_COPY_S + moved / PCIE_BANDWIDTH


def faster_recovery(tokens: int, block_size: int, recompute_s: float) -> str:
    if not recompute_s > 0:
        raise ValueError(f"recompute_s must be positive, got {recompute_s}")
    one_way = swap_out_seconds(tokens, block_size)
    return "swap" if one_way < recompute_s / 2 else "recompute"
"""

SCAN_SCHEDULER = """
from kvcourse.serving import IterationScheduler, LiveRequest


class MyScheduler(IterationScheduler):
    def choose_victim(self, needy: LiveRequest) -> LiveRequest:
        victim = needy
        for live in self.running:
            if live.order > victim.order:
                victim = live
        return victim

    def preempt(self, victim: LiveRequest) -> None:
        index = next(i for i, live in enumerate(self.running) if live is victim)
        del self.running[index]
        self.memory.release(victim)
        self.preemptions = self.preemptions + 1
        victim.preemptions = victim.preemptions + 1
        self.waiting.insert(0, victim)
        self.recover(victim)

    def recover(self, victim: LiveRequest) -> None:
        tokens = victim.done + victim.prompt
        size = self.memory.block_size
        swap_s = self.swap_cost.seconds((tokens + size - 1) // size) * 2
        recompute_s = tokens * self.cost.per_new_token_s
        if self.recovery == "recompute" or (self.recovery == "cheaper" and recompute_s <= swap_s):
            self.recompute(victim)
        elif not self.swap_out(victim):
            self.recompute(victim)
"""


# --- a hostile student: vLLM's hooks inherited, and every trick for Part 1 ------------------------
HOSTILE_SCHEDULER = """
import kvcourse.serving


class MyScheduler(kvcourse.serving.VllmPaperScheduler):
    \"\"\"vLLM's hooks, inherited: nothing written.\"\"\"
"""

HOSTILE_EX6 = f"""
import sys

import kvcourse.serving
{ANYTHING}


def swap_out_seconds(tokens, block_size):
    return kvcourse.serving.swap_vs_recompute(tokens, block_size).swap_out_s


def faster_recovery(tokens, block_size, recompute_s):
    {FORGE_SCORE}
    {SWALLOW_ERRORS}
    return Anything(0)
"""

# --- a copycat: vLLM's hooks copied function by function before the tests can switch them off ---
COPYCAT_SCHEDULER = f"""
{COPY_TOOLS}
import kvcourse.serving

MyScheduler = type(
    "MyScheduler",
    (kvcourse.serving.IterationScheduler,),
    {{
        name: _copy(getattr(kvcourse.serving.VllmPaperScheduler, name))
        for name in ("choose_victim", "preempt", "recover")
    }},
)
"""

# --- a student who disarms the harness: the kernel's switched_off a no-op, then the library ---
#: The test cells' harness rebound in the kernel to a block that switches nothing off, and
#: choose_victim asked of vLLM's hooks. The visible tests take the rebound one and pass; the
#: hidden tests run the grader's private copy of the harness, which notices.
DISARMED_SCHEDULER = """
import contextlib

import kvcourse.assignment_checks
import kvcourse.assignment_checks.harness
import kvcourse.serving


@contextlib.contextmanager
def _switched_on(*owners, **how):
    yield


kvcourse.assignment_checks.harness.switched_off = _switched_on
kvcourse.assignment_checks.switched_off = _switched_on
"""


def _disarmed(solution: str) -> str:
    code = replaced(
        _VICTIM, "        return kvcourse.serving.VllmPaperScheduler.choose_victim(self, needy)\n"
    )
    return DISARMED_SCHEDULER + code(solution)


_LATER = ("preempt", "recover", "no_deadlock")

PASTED_SCHEDULER = pasted_reference(
    "kvcourse.serving.preemption", {"VllmPaperScheduler": "MyScheduler"}
)
RETYPED_SCHEDULER = pasted_reference(
    "kvcourse.serving.preemption", {"VllmPaperScheduler": "MyScheduler"}, retyped=True
)
#: What a pasted scheduler keeps: Ex 6 (its own cell), and choose_victim, a one-line method
#: anyone may write alike (the similarity report shows the paste to a person).
PASTED_PASSES = tests_of("ex6", "choose_victim")


SAMPLES = {
    **basic_samples(),
    "partial": Sample(
        about="Ex 6 with one copy per layer and block, and the earliest-arrived as the victim",
        cells={"ex6": ONE_KV_COPY, "MyScheduler": PREEMPTS_EARLIEST},
        passes=tests_of("preempt", "recover"),
    ),
    "other_right_way": Sample(
        about="every part right: the last of the batch as the victim, and the victim put back "
        "by insertion in arrival order",
        cells={"MyScheduler": _insort},
    ),
    "one_kv_copy": Sample(
        about="Ex 6 with one copy per layer and block: K and V not copied apart",
        cells={"ex6": ONE_KV_COPY},
        passes=tests_of("choose_victim", *_LATER),
    ),
    "no_per_copy_cost": Sample(
        about="Ex 6 without the 10 µs fixed cost of each copy",
        cells={"ex6": NO_PER_COPY_COST},
        passes=tests_of("choose_victim", *_LATER),
    ),
    "one_way_ex6": Sample(
        about="faster_recovery compares swapping out, not out and back in, with recomputing",
        cells={"ex6": ONE_WAY_EX6},
        passes=tests_of("choose_victim", *_LATER),
    ),
    "preempts_needy": Sample(
        about="choose_victim returns the request that needs the block",
        cells={"MyScheduler": PREEMPTS_NEEDY},
        passes=tests_of("ex6", "preempt", "recover"),
    ),
    "preempts_earliest": Sample(
        about="choose_victim returns the earliest-arrived running request",
        cells={"MyScheduler": PREEMPTS_EARLIEST},
        passes=tests_of("ex6", "preempt", "recover"),
    ),
    "preempts_longest": Sample(
        about="choose_victim returns the running request holding the most tokens",
        cells={"MyScheduler": PREEMPTS_LONGEST},
        passes=tests_of("ex6", "preempt", "recover"),
    ),
    "requeues_at_back": Sample(
        about="preempt puts the victim at the back of the queue",
        cells={"MyScheduler": REQUEUES_AT_BACK},
        passes=tests_of("ex6", "choose_victim", "recover"),
    ),
    "keeps_blocks": Sample(
        about="preempt takes the victim out of the batch but never releases its blocks",
        cells={"MyScheduler": KEEPS_BLOCKS},
        passes=tests_of("ex6", "choose_victim", "recover"),
    ),
    "uncounted": Sample(
        about="preempt never counts the preemption in self.preemptions",
        cells={"MyScheduler": UNCOUNTED},
        passes=tests_of("ex6", "choose_victim", "recover"),
    ),
    "one_way_cheaper": Sample(
        about="recover's 'cheaper' compares one way out, not the round trip, with recomputing",
        cells={"MyScheduler": ONE_WAY_CHEAPER},
        passes=(*tests_of("ex6", "choose_victim", "preempt"), "test_no_deadlock"),
    ),
    "no_fallback": Sample(
        about="recover does not recompute a victim the full CPU pool could not take",
        cells={"MyScheduler": NO_FALLBACK},
        passes=tests_of("ex6", "choose_victim", "preempt"),
    ),
    "swaps_on_ex6_tie": Sample(
        about="faster_recovery swaps when the round trip takes exactly as long as recomputing",
        cells={"ex6": SWAPS_ON_EX6_TIE},
        passes=(*tests_of("choose_victim", *_LATER), "test_ex6"),
    ),
    "swaps_on_tie": Sample(
        about="recover swaps when swapping costs exactly as much as recomputing",
        cells={"MyScheduler": SWAPS_ON_TIE},
        passes=(*tests_of("ex6", "choose_victim", "preempt", "no_deadlock"), "test_recover"),
    ),
    "victim_by_arrival_time": Sample(
        about="choose_victim takes the latest arrival time, so of requests that arrived at the "
        "same moment the earliest in arrival order",
        # ShareGPT-like arrival times never tie: only Part 5's hidden workloads meet it
        cells={"MyScheduler": VICTIM_BY_ARRIVAL_TIME},
        passes=(*tests_of("ex6", "preempt", "recover"), "test_no_deadlock"),
    ),
    "copies_one_by_one": Sample(
        about="every part right: Ex 6 adds the copies one by one and compares out + in; recover "
        "adds the blocks' swap times one block at a time",
        cells={"ex6": COPIES_ONE_BY_ONE_EX6, "MyScheduler": BLOCK_BY_BLOCK},
    ),
    "scan_and_insert": Sample(
        about="every part right: Ex 6 with bytes and fixed costs apart against half the recompute "
        "time; the victim found by a scan, removed by index, put back by deque.insert",
        cells={"ex6": APART_EX6, "MyScheduler": SCAN_SCHEDULER},
    ),
    "raises": Sample(
        about="the scheduler cell raises at top level, so MyScheduler is never defined",
        cells={"MyScheduler": raises_first},
        passes=tests_of("ex6"),
    ),
    "syntax_error": Sample(
        about="Part 1 does not parse; every other part is right",
        cells={"ex6": lambda code: code.replace(") -> float:", ") -> float", 1)},
        passes=tests_of("choose_victim", *_LATER),
    ),
    "hostile": Sample(
        about="vLLM's hooks inherited; Ex 6 asked of the library, an always-equal choice, a "
        "forged score and swallowed errors",
        cells={"MyScheduler": HOSTILE_SCHEDULER, "ex6": HOSTILE_EX6},
        passes=(),
    ),
    # vLLM's hooks pasted into the cell (the library's whole scheduler module, VllmPaperScheduler
    # renamed MyScheduler), and retyped with other names for every argument and variable.
    "pasted_reference": Sample(
        about="the library's VllmPaperScheduler pasted into the cell as MyScheduler",
        cells={"MyScheduler": PASTED_SCHEDULER},
        passes=PASTED_PASSES,
    ),
    "retyped_reference": Sample(
        about="the library's VllmPaperScheduler retyped with other variable names",
        cells={"MyScheduler": RETYPED_SCHEDULER},
        passes=PASTED_PASSES,
    ),
    "copycat": Sample(
        about="vLLM's three hooks copied function by function before the tests run",
        cells={"MyScheduler": COPYCAT_SCHEDULER},
        passes=tests_of("ex6"),
    ),
    "disarms_harness": Sample(
        about="the kernel's switched_off rebound to a no-op, then choose_victim asked of vLLM's "
        "hooks: the visible tests are fooled, the hidden ones run their private harness",
        cells={"MyScheduler": _disarmed},
        passes=(
            *tests_of("ex6", "preempt", "recover"),
            "test_choose_victim",
            "test_no_deadlock",
        ),
    ),
}
# A correct student who stashes the hidden tests' frames and prints them, base64-encoded.
# And one who traces every call from the first solution cell on, printed scrambled in the last.
LEAKS = leak_samples("ex6", "MyScheduler", "swap_out_seconds")
SAMPLES.update({name: LEAKS[name] for name in ("leaks_callers", "leaks_tracer")})
