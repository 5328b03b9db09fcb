"""Sample submissions for a0_kv_sizing (see kvcourse_grader.samples).

Each sample starts from the current student version in notebooks/ and fills the solution cells
named here; the others take the instructor's solution unless ``default=STUB``. ``passes`` lists the
test cells that must score. The tests grade all of them in one ``kvcourse-grade autograde`` run;
``kvcourse-grade samples --out DIR`` writes them out for a dry run.
"""

from kvcourse_grader.leak_samples import leak_samples
from kvcourse_grader.samples import (
    ANYTHING,
    FORGE_SCORE,
    STUB,
    SWALLOW_ERRORS,
    WHATEVER,
    Sample,
    basic_samples,
    floods_output,
    grabs_memory,
    kills_kernel,
    loops_forever,
    raises_first,
    tests_of,
)
from kvcourse_grader.sandbox import sandbox_problem

FUNCTIONS = (
    "kv_bytes_per_token",
    "kv_bytes_per_request",
    "kv_token_slots",
    "max_requests",
    "recompute_seconds_per_token",
    "read_back_seconds_per_token",
    "kv_bytes_per_flop",
)


# --- a partly right student: each mistake costs exactly the cells named in `passes` ---------------
PARTIAL_BYTES_PER_TOKEN = """
def kv_bytes_per_token(
    num_layers: int, num_kv_heads: int, head_dim: int, bytes_per_element: int | float
) -> int:
    # Right for 2-byte elements, but a float for int4 and no argument checks: hidden tests fail.
    return 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
"""

PARTIAL_TOKEN_SLOTS = """
def kv_token_slots(
    gpu_bytes: int,
    weight_bytes: int,
    bytes_per_token: int,
    activation_fraction: float = 0.0,
) -> int:
    # Forgets the activation reserve: the 10 % case of the visible tests fails.
    return max(gpu_bytes - weight_bytes, 0) // bytes_per_token
"""

PARTIAL_READ_BACK = """
def read_back_seconds_per_token(bytes_per_token: int, bandwidth: float) -> float:
    # Right, but a zero bandwidth raises ZeroDivisionError instead of ValueError.
    return bytes_per_token / bandwidth
"""

PARTIAL_BYTES_PER_FLOP = """
def kv_bytes_per_flop(bytes_per_token: int, flops_per_token: float) -> float:
    # Upside down.
    return flops_per_token / bytes_per_token
"""

# --- one realistic mistake each: each costs the cells of its own part only -----------------------
NO_KV_FACTOR = """
def kv_bytes_per_token(
    num_layers: int, num_kv_heads: int, head_dim: int, bytes_per_element: int | float
) -> int:
    # Counts the keys only: V takes as many bytes again.
    for value in (num_layers, num_kv_heads, head_dim, bytes_per_element):
        if value <= 0:
            raise ValueError("every argument must be positive")
    return int(num_layers * num_kv_heads * head_dim * bytes_per_element)
"""

ROUNDED_SLOTS = """
def kv_token_slots(
    gpu_bytes: int,
    weight_bytes: int,
    bytes_per_token: int,
    activation_fraction: float = 0.0,
) -> int:
    # Rounds to the nearest slot instead of down: a part of a slot holds no token.
    if gpu_bytes <= 0 or bytes_per_token <= 0 or weight_bytes < 0:
        raise ValueError("bad sizes")
    if not 0 <= activation_fraction < 1:
        raise ValueError("activation_fraction must be in [0, 1)")
    free = gpu_bytes * (1 - activation_fraction) - weight_bytes
    return max(round(free / bytes_per_token), 0)
"""

CEIL_REQUESTS = """
def max_requests(token_slots: int, tokens_per_request: int) -> int:
    # Rounds up: the last request would get only part of its slots.
    if tokens_per_request <= 0 or token_slots < 0:
        raise ValueError("bad counts")
    return -(-token_slots // tokens_per_request)
"""

ONE_GPU = """
def recompute_seconds_per_token(
    flops_per_token: float, num_gpus: int, peak_flops: float, utilization: float
) -> float:
    # Checks num_gpus, then forgets it: one GPU does all the work.
    if flops_per_token <= 0 or num_gpus <= 0 or peak_flops <= 0:
        raise ValueError("flops_per_token, num_gpus and peak_flops must be positive")
    if not 0 < utilization <= 1:
        raise ValueError("utilization must be in (0, 1]")
    return float(flops_per_token / (peak_flops * utilization))
"""

NEGATIVE_GPUS = """
def recompute_seconds_per_token(
    flops_per_token: float, num_gpus: int, peak_flops: float, utilization: float
) -> float:
    # Refuses zeros but not negatives: -8 GPUs give a negative time.
    if flops_per_token == 0 or num_gpus == 0 or peak_flops == 0:
        raise ValueError("flops_per_token, num_gpus and peak_flops must not be zero")
    if not 0 < utilization <= 1:
        raise ValueError("utilization must be in (0, 1]")
    return float(flops_per_token / (num_gpus * peak_flops * utilization))
"""

NEGATIVE_BYTES = """
def read_back_seconds_per_token(bytes_per_token: int, bandwidth: float) -> float:
    # Refuses no bytes and a bandwidth that is not positive, but takes a negative size.
    if bytes_per_token == 0 or bandwidth <= 0:
        raise ValueError("bytes_per_token and bandwidth must be positive")
    return float(bytes_per_token / bandwidth)
"""

PER_GFLOP = """
def kv_bytes_per_flop(bytes_per_token: int, flops_per_token: float) -> float:
    # Bytes per GFLOP: a unit left over from printing it.
    if bytes_per_token <= 0 or flops_per_token <= 0:
        raise ValueError("bytes_per_token and flops_per_token must be positive")
    return float(bytes_per_token / (flops_per_token / 1e9))
"""


#: The floor as "the ceiling, minus one": the same everywhere but at an exact fit, where the last
#: whole slot is lost.
CEIL_MINUS_ONE = """
def kv_token_slots(
    gpu_bytes: int,
    weight_bytes: int,
    bytes_per_token: int,
    activation_fraction: float = 0.0,
) -> int:
    if gpu_bytes <= 0 or bytes_per_token <= 0 or weight_bytes < 0:
        raise ValueError("bad sizes")
    if not 0 <= activation_fraction < 1:
        raise ValueError("activation_fraction must be in [0, 1)")
    free = gpu_bytes * (1 - activation_fraction) - weight_bytes
    if free <= 0:
        return 0
    return int(-(-free // bytes_per_token) - 1)  # the ceiling minus one: wrong at an exact fit
"""

#: Keeps one slot back: a request that needs exactly the slots left is not counted.
STRICT_REQUESTS = """
def max_requests(token_slots: int, tokens_per_request: int) -> int:
    if tokens_per_request <= 0 or token_slots < 0:
        raise ValueError("bad counts")
    return max(token_slots - 1, 0) // tokens_per_request  # an exact fit loses its last request
"""


# --- right answers written another way: the tests must give them full marks ----------------------
#: Every function with its arithmetic in another order: a product of a list, one division after
#: another, a reciprocal, true division then math.floor, divmod.
ANOTHER_ORDER = {
    "kv_bytes_per_token": """
import math


def kv_bytes_per_token(num_layers, num_kv_heads, head_dim, bytes_per_element):
    if min(num_layers, num_kv_heads, head_dim, bytes_per_element) <= 0:
        raise ValueError("every argument must be positive")
    per_layer = math.prod([num_kv_heads, head_dim, 2]) * bytes_per_element  # K and V of a layer
    return int(per_layer * num_layers)
""",
    "kv_bytes_per_request": """
def kv_bytes_per_request(bytes_per_token, num_tokens):
    if num_tokens < 0 or bytes_per_token <= 0:
        raise ValueError("bad arguments")
    return int(num_tokens * bytes_per_token)
""",
    "kv_token_slots": """
import math


def kv_token_slots(gpu_bytes, weight_bytes, bytes_per_token, activation_fraction=0.0):
    if min(gpu_bytes, bytes_per_token) <= 0 or weight_bytes < 0:
        raise ValueError("bad sizes")
    if activation_fraction < 0 or activation_fraction >= 1:
        raise ValueError("activation_fraction must be in [0, 1)")
    free = gpu_bytes - gpu_bytes * activation_fraction - weight_bytes
    return max(math.floor(free / bytes_per_token), 0)
""",
    "max_requests": """
def max_requests(token_slots, tokens_per_request):
    if token_slots < 0 or tokens_per_request <= 0:
        raise ValueError("bad counts")
    requests, _ = divmod(token_slots, tokens_per_request)
    return requests
""",
    "recompute_seconds_per_token": """
def recompute_seconds_per_token(flops_per_token, num_gpus, peak_flops, utilization):
    if min(flops_per_token, num_gpus, peak_flops) <= 0 or not 0 < utilization <= 1:
        raise ValueError("bad arguments")
    return flops_per_token / num_gpus / peak_flops / utilization
""",
    "read_back_seconds_per_token": """
def read_back_seconds_per_token(bytes_per_token, bandwidth):
    if min(bytes_per_token, bandwidth) <= 0:
        raise ValueError("bad arguments")
    return bytes_per_token * (1.0 / bandwidth)
""",
    "kv_bytes_per_flop": """
def kv_bytes_per_flop(bytes_per_token, flops_per_token):
    if min(bytes_per_token, flops_per_token) <= 0:
        raise ValueError("bad arguments")
    return 1.0 / (flops_per_token / bytes_per_token)
""",
}

#: Every function by counting and adding up: a sum over layers instead of a product, slots and
#: requests counted one at a time, a time scaled to gigabytes first.
COUNTING = {
    "kv_bytes_per_token": """
def kv_bytes_per_token(num_layers, num_kv_heads, head_dim, bytes_per_element):
    for value in (num_layers, num_kv_heads, head_dim, bytes_per_element):
        if value <= 0:
            raise ValueError("every argument must be positive")
    total = 0
    for _layer in range(num_layers):
        total += 2 * num_kv_heads * head_dim * bytes_per_element  # this layer's K and V
    return int(total)
""",
    "kv_bytes_per_request": """
def kv_bytes_per_request(bytes_per_token, num_tokens):
    if bytes_per_token <= 0 or num_tokens < 0:
        raise ValueError("bad arguments")
    return sum(bytes_per_token for _token in range(num_tokens))
""",
    "kv_token_slots": """
def kv_token_slots(gpu_bytes, weight_bytes, bytes_per_token, activation_fraction=0.0):
    if gpu_bytes <= 0 or bytes_per_token <= 0 or weight_bytes < 0:
        raise ValueError("bad sizes")
    if not 0 <= activation_fraction < 1:
        raise ValueError("activation_fraction must be in [0, 1)")
    room = gpu_bytes - activation_fraction * gpu_bytes - weight_bytes
    count = 0
    while (count + 1) * bytes_per_token <= room:  # one more whole slot still fits
        count += 1
    return count
""",
    "max_requests": """
def max_requests(token_slots, tokens_per_request):
    if tokens_per_request <= 0 or token_slots < 0:
        raise ValueError("bad counts")
    count, left = 0, token_slots
    while left >= tokens_per_request:
        left -= tokens_per_request
        count += 1
    return count
""",
    "recompute_seconds_per_token": """
def recompute_seconds_per_token(flops_per_token, num_gpus, peak_flops, utilization):
    if flops_per_token <= 0 or num_gpus <= 0 or peak_flops <= 0:
        raise ValueError("bad arguments")
    if not 0 < utilization <= 1:
        raise ValueError("utilization must be in (0, 1]")
    return flops_per_token / (utilization * peak_flops * num_gpus)
""",
    "read_back_seconds_per_token": """
def read_back_seconds_per_token(bytes_per_token, bandwidth):
    if bytes_per_token <= 0 or bandwidth <= 0:
        raise ValueError("bad arguments")
    return (bytes_per_token / 1e9) / (bandwidth / 1e9)  # GB over GB/s
""",
    "kv_bytes_per_flop": """
def kv_bytes_per_flop(bytes_per_token, flops_per_token):
    if bytes_per_token <= 0 or flops_per_token <= 0:
        raise ValueError("bad arguments")
    return bytes_per_token * (1 / flops_per_token)
""",
}


def all_but(*names: str) -> tuple[str, ...]:
    """The test cells of every part except those named."""
    return tests_of(*(f for f in FUNCTIONS if f not in names))


# --- a hostile student: every part cheats instead of computing ----------------------------------
HOSTILE_SETUP = f"""
import sys

import kvcourse.sizing
{ANYTHING}
{WHATEVER}
# The tests never ask the library, so rewriting it changes nothing.
kvcourse.sizing.kv_bytes_per_token = lambda *args, **kwargs: Anything(0)


def kv_bytes_per_token(
    num_layers: int, num_kv_heads: int, head_dim: int, bytes_per_element: int | float
) -> int:
    return Anything(0)
"""

HOSTILE_FORGE_SCORE = f"""
def kv_bytes_per_request(bytes_per_token: int, num_tokens: int) -> int:
    # nbgrader reads a test cell's first execute_result as its score: forge one, then fail.
    {FORGE_SCORE}  # not a number: nbgrader would give full points
    return Anything(0)
"""

HOSTILE_SWALLOW_ERRORS = f"""
def kv_token_slots(
    gpu_bytes: int,
    weight_bytes: int,
    bytes_per_token: int,
    activation_fraction: float = 0.0,
) -> int:
    # Ask IPython to swallow the failing assertion instead of showing it.
    {SWALLOW_ERRORS}
    return Anything(0)
"""

HOSTILE_FLOAT = """
def {name}(*args, **kwargs):
    return Whatever()
"""


# --- students who reach outside their notebook (stopped by the sandbox) -------------------------
#: Every solution cell walks up from its folder to the course's solutions/ and runs the
#: instructor's cell of the same grade id: full marks wherever the solutions can be read.
STEAL_SOLUTION = """
import json
import pathlib


def steal(grade_id):
    here = pathlib.Path.cwd()
    for folder in (here, *here.parents):
        for path in folder.glob("solutions/a0_kv_sizing/*.ipynb"):
            for cell in json.loads(path.read_text())["cells"]:
                if cell.get("metadata", {{}}).get("nbgrader", {{}}).get("grade_id") == grade_id:
                    exec("".join(cell["source"]), globals())
                    return
    raise FileNotFoundError("no solutions to copy")


steal("{name}")
"""

#: Every solution cell copies the instructor's cell from any copy of the course anywhere on the
#: disk (a checkout beside the grader's environment, a clone elsewhere, a home folder): the first
#: cell walks the whole file system once, skipping only the system's own folders and package trees.
SEARCH_DISK = """
import json
import os

SYSTEM = ("/proc", "/sys", "/dev", "/usr", "/etc")
PACKAGES = ("site-packages", "node_modules", "__pycache__", ".git")


def find_solutions():
    found = []
    for top, folders, files in os.walk("/"):
        if top in SYSTEM:
            folders[:] = []
        folders[:] = [f for f in folders if f not in PACKAGES and not f.startswith("python3")]
        if top.endswith(os.sep + os.path.join("solutions", "a0_kv_sizing")):
            found += [os.path.join(top, f) for f in files if f.endswith(".ipynb")]
    return found


def steal(grade_id):
    global FOUND
    if "FOUND" not in globals():
        FOUND = find_solutions()
    for path in FOUND:
        with open(path) as file:
            cells = json.load(file)["cells"]
        for cell in cells:
            if cell.get("metadata", {{}}).get("nbgrader", {{}}).get("grade_id") == grade_id:
                exec("".join(cell["source"]), globals())
                return
    raise FileNotFoundError("no solutions anywhere on this disk")


steal("{name}")
"""

#: Part 1 right, but only after reading every student's scores out of the gradebook.
READ_GRADEBOOK = """
import pathlib
import sqlite3

here = pathlib.Path.cwd()
book = next(f / "grading" / "gradebook.db" for f in (here, *here.parents)
            if (f / "grading" / "gradebook.db").is_file())
scores = sqlite3.connect(f"file:{book}?mode=ro", uri=True).execute("select * from grade").fetchall()


def kv_bytes_per_token(num_layers, num_kv_heads, head_dim, bytes_per_element):
    if min(num_layers, num_kv_heads, head_dim) <= 0 or bytes_per_element <= 0:
        raise ValueError("every size must be positive")
    return int(2 * num_layers * num_kv_heads * head_dim * bytes_per_element)
"""

#: Part 3 overwrites another student's submission (and the course's README), then opens the
#: course library's own file for writing, before answering. Where the course lies under /tmp (as
#: in the tests) the first writes land in the sandbox's private /tmp, elsewhere they fail; the
#: library is read-only everywhere (opening it to append changes nothing even where it is not).
WRITE_OUTSIDE = """
import pathlib

import kvcourse.sizing

here = pathlib.Path.cwd()
root = next(f for f in (here, *here.parents) if (f / "grading").is_dir())
(root / "README.md").write_text("graded by me")
for other in (root / "grading" / "submitted").glob("*/a0_kv_sizing/*.ipynb"):
    other.write_text("{}")
with open(kvcourse.sizing.__file__, "a") as library:  # the reference the tests compare with
    library.write("")
"""

#: Sandbox samples, graded only where the sandbox works (elsewhere they would really cheat).
SANDBOXED = {
    "reads_solutions": Sample(
        about="every part copies the instructor's solution cell from solutions/ (the sandbox "
        "hides it)",
        cells={name: STEAL_SOLUTION.format(name=name) for name in FUNCTIONS},
        passes=(),
    ),
    "searches_disk": Sample(
        about="every part copies the instructor's solution cell from any copy of the course "
        "found anywhere on the disk (the sandbox shows none)",
        cells={name: SEARCH_DISK.format(name=name) for name in FUNCTIONS},
        passes=(),
    ),
    "reads_gradebook": Sample(
        about="part 1 reads every student's scores from the gradebook first (hidden)",
        cells={"kv_bytes_per_token": READ_GRADEBOOK},
        passes=all_but("kv_bytes_per_token"),
    ),
    "writes_outside": Sample(
        about="part 3 overwrites the README and other students' submissions, then opens the "
        "course library's file for writing, first (out of sight or read-only)",
        cells={"kv_token_slots": lambda solution: WRITE_OUTSIDE + "\n\n" + solution},
        passes=all_but("kv_token_slots"),
    ),
}

SAMPLES = {
    **basic_samples(),
    "partial": Sample(
        about="some parts right, some half right, one missing",
        cells={
            "kv_bytes_per_token": PARTIAL_BYTES_PER_TOKEN,
            "kv_token_slots": PARTIAL_TOKEN_SLOTS,
            "recompute_seconds_per_token": STUB,
            "read_back_seconds_per_token": PARTIAL_READ_BACK,
            "kv_bytes_per_flop": PARTIAL_BYTES_PER_FLOP,
        },
        passes=(
            "test_kv_bytes_per_token",
            *tests_of("kv_bytes_per_request", "max_requests"),
            "test_read_back_seconds_per_token",
        ),
    ),
    "no_kv_factor": Sample(
        about="bytes per token for the keys only (the factor 2 for K and V forgotten)",
        cells={"kv_bytes_per_token": NO_KV_FACTOR},
        passes=all_but("kv_bytes_per_token"),
    ),
    "rounded_slots": Sample(
        about="token slots rounded to the nearest instead of down",
        cells={"kv_token_slots": ROUNDED_SLOTS},
        passes=all_but("kv_token_slots"),
    ),
    "ceil_requests": Sample(
        about="requests that fit rounded up instead of down",
        cells={"max_requests": CEIL_REQUESTS},
        passes=all_but("max_requests"),
    ),
    "one_gpu": Sample(
        about="recompute time on one GPU: num_gpus checked, then forgotten",
        cells={"recompute_seconds_per_token": ONE_GPU},
        passes=all_but("recompute_seconds_per_token"),
    ),
    "negative_gpus": Sample(
        about="recompute time right, but a negative FLOP count, GPU count or peak is accepted",
        cells={"recompute_seconds_per_token": NEGATIVE_GPUS},
        passes=(*all_but("recompute_seconds_per_token"), "test_recompute_seconds_per_token"),
    ),
    "negative_bytes": Sample(
        about="read-back time right, but a negative number of bytes is accepted",
        cells={"read_back_seconds_per_token": NEGATIVE_BYTES},
        passes=(*all_but("read_back_seconds_per_token"), "test_read_back_seconds_per_token"),
    ),
    "ceil_minus_one": Sample(
        about="token slots as the ceiling minus one: a slot short when the room is an exact fit",
        cells={"kv_token_slots": CEIL_MINUS_ONE},
        passes=(*all_but("kv_token_slots"), "test_kv_token_slots"),
    ),
    "strict_requests": Sample(
        about="requests that fit counted with one slot kept back: an exact fit loses a request",
        cells={"max_requests": STRICT_REQUESTS},
        passes=(*all_but("max_requests"), "test_max_requests"),
    ),
    "another_order": Sample(
        about="every part right, its arithmetic in another order (a product of a list, one "
        "division after another, a reciprocal, true division then floor, divmod)",
        cells=ANOTHER_ORDER,
    ),
    "counting": Sample(
        about="every part right, by counting and adding up (a sum over layers, slots and "
        "requests counted one at a time, gigabytes over gigabytes per second)",
        cells=COUNTING,
    ),
    "per_gflop": Sample(
        about="KV bytes per GFLOP instead of per FLOP",
        cells={"kv_bytes_per_flop": PER_GFLOP},
        passes=all_but("kv_bytes_per_flop"),
    ),
    "raises": Sample(
        about="the first cell raises at top level, so part 1 is never defined",
        cells={"kv_bytes_per_token": raises_first},
        passes=tests_of(
            "kv_bytes_per_request",
            "kv_token_slots",
            "max_requests",
            "recompute_seconds_per_token",
            "read_back_seconds_per_token",
            "kv_bytes_per_flop",
        ),
    ),
    "syntax_error": Sample(
        about="part 3 does not parse",
        cells={"kv_token_slots": lambda code: code.replace(") -> int:", ") -> int", 1)},
        passes=tests_of(
            "kv_bytes_per_token",
            "kv_bytes_per_request",
            "max_requests",
            "recompute_seconds_per_token",
            "read_back_seconds_per_token",
            "kv_bytes_per_flop",
        ),
    ),
    "hostile": Sample(
        about="always-equal results, a rewritten library, a forged score, swallowed errors",
        cells={
            "kv_bytes_per_token": HOSTILE_SETUP,
            "kv_bytes_per_request": HOSTILE_FORGE_SCORE,
            "kv_token_slots": HOSTILE_SWALLOW_ERRORS,
            "max_requests": "def max_requests(*args, **kwargs):\n    return Anything(0)",
            **{
                name: HOSTILE_FLOAT.format(name=name)
                for name in (
                    "recompute_seconds_per_token",
                    "read_back_seconds_per_token",
                    "kv_bytes_per_flop",
                )
            },
        },
        passes=(),
    ),
    "deletes_tests": Sample(
        about="right answers, but every hidden-test cell deleted: those cells score zero",
        drop=tuple(f"hidden_{name}" for name in FUNCTIONS),
        passes=tuple(f"test_{name}" for name in FUNCTIONS),
    ),
    "loops": Sample(
        about="part 6 never returns and ignores interrupts; the kernel is stopped",
        cells={
            "read_back_seconds_per_token": loops_forever(
                "def read_back_seconds_per_token(bytes_per_token: int, bandwidth: float) -> float:"
            )
        },
        passes=tests_of(
            "kv_bytes_per_token",
            "kv_bytes_per_request",
            "kv_token_slots",
            "max_requests",
            "recompute_seconds_per_token",
        ),
    ),
    "crashes": Sample(
        about="part 7 kills its own kernel",
        cells={
            "kv_bytes_per_flop": kills_kernel(
                "def kv_bytes_per_flop(bytes_per_token: int, flops_per_token: float) -> float:"
            )
        },
        passes=tests_of(
            "kv_bytes_per_token",
            "kv_bytes_per_request",
            "kv_token_slots",
            "max_requests",
            "recompute_seconds_per_token",
            "read_back_seconds_per_token",
        ),
    ),
    "floods": Sample(
        about="part 3 prints 64 MiB first; the grader keeps 4 MiB of it and grades as usual",
        cells={"kv_token_slots": floods_output},
    ),
    "hog": Sample(
        about="part 2 allocates 8 GiB first; under the memory limit that is a MemoryError",
        cells={"kv_bytes_per_request": grabs_memory},
        passes=tests_of(
            "kv_bytes_per_token",
            "kv_token_slots",
            "max_requests",
            "recompute_seconds_per_token",
            "read_back_seconds_per_token",
            "kv_bytes_per_flop",
        ),
    ),
}
# Correct students who print what they can read of the hidden tests (nothing must come back).
SAMPLES.update(leak_samples("kv_bytes_per_token", "kv_bytes_per_flop", "kv_bytes_per_token"))
if sandbox_problem() is None:
    SAMPLES.update(SANDBOXED)

#: Checks its arguments, then answers with the caller's ``expected`` when a frame above has one:
#: the visible tests' loops do, and so did the hidden ones while they ran in the kernel.
READS_EXPECTED = """
import sys


def kv_bytes_per_token(
    num_layers: int, num_kv_heads: int, head_dim: int, bytes_per_element: int | float
) -> int:
    for value in (num_layers, num_kv_heads, head_dim, bytes_per_element):
        if value <= 0:
            raise ValueError("every argument must be positive")
    frame = sys._getframe(1)
    while frame is not None:  # the test that called: its expected value is the answer
        if "expected" in frame.f_locals:
            return frame.f_locals["expected"]
        frame = frame.f_back
    return 0
"""

# A student who answers with the value the test expects, read from the test's own frame: the
# visible tests run in the kernel and give it away; the hidden ones run in the grader.
SAMPLES["reads_expected"] = Sample(
    about="bytes per token read from the calling test's `expected`, nothing computed",
    cells={"kv_bytes_per_token": READS_EXPECTED},
    passes=(*all_but("kv_bytes_per_token"), "test_kv_bytes_per_token"),
)
