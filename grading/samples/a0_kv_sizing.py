"""Sample submissions for a0_kv_sizing (see kvcourse.grading.samples).

Each sample starts from the current student version in notebooks/ and fills the solution cells
named here; the others take the instructor's solution unless ``default=STUB``. ``passes`` lists the
test cells that must score. The tests grade all of them in one ``kvcourse-grade autograde`` run;
``kvcourse-grade samples --out DIR`` writes them out for a dry run.
"""

from kvcourse.grading.samples import (
    ANYTHING,
    FORGE_SCORE,
    STUB,
    SWALLOW_ERRORS,
    WHATEVER,
    Sample,
    basic_samples,
    grabs_memory,
    kills_kernel,
    loops_forever,
    raises_first,
    tests_of,
)

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
