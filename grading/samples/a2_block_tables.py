"""Sample submissions for a2_block_tables (see kvcourse.grading.samples).

Each sample starts from the current student version in notebooks/ and fills the solution cells
named here; the others take the instructor's solution unless ``default=STUB``. ``passes`` lists the
test cells that must score. The tests grade all of them in one ``kvcourse-grade autograde`` run;
``kvcourse-grade samples a2_block_tables --out DIR`` writes them out for a dry run.

The runner's own robustness (a loop, a dead kernel, a memory hog, deleted test cells) is shown by
the samples of a0_kv_sizing; these show what this assignment's tests add: parts that build on
each other, and a library that must not stand in for the student's code.
"""

from kvcourse.grading.samples import (
    FORGE_SCORE,
    SWALLOW_ERRORS,
    WHATEVER,
    Sample,
    basic_samples,
    raises_first,
    tests_of,
)


# --- a partly right student: each mistake costs exactly the cells named in `passes` ---------------
def _partial_table(solution: str) -> str:
    """The solution, but ``append`` takes blocks one at a time and keeps each at once: when the
    pool runs dry halfway through a multi-block append, the blocks before are leaked into the
    table. The visible tests run out on a one-block append only, so only the hidden tests notice
    (and that a negative count is no longer refused)."""
    right = (
        "        if num_tokens < 0:\n"
        '            raise ValueError(f"num_tokens must be zero or more, got {num_tokens}")\n'
        "        size = self.pool.block_size\n"
        "        blocks_after = -(-(self._num_tokens + num_tokens) // size)  # ceil division\n"
        "        new_blocks = self.pool.allocate_many(blocks_after - len(self._blocks))"
        "  # or raise\n"
        "        self._blocks.extend(new_blocks)\n"
    )
    wrong = (
        "        new_blocks = []\n"
        "        while len(self._blocks) * self.pool.block_size < self._num_tokens + num_tokens:\n"
        "            block = self.pool.allocate()\n"
        "            self._blocks.append(block)\n"
        "            new_blocks.append(block)\n"
    )
    assert right in solution
    return solution.replace(right, wrong)


PARTIAL_HALF_BLOCK = """
def half_block_waste_estimate(block_size: int, mean_length: float) -> float:
    # A percentage instead of a fraction: every test fails.
    return 100 * block_size / 2 / mean_length
"""

PARTIAL_WASTE = """
def memory_weighted_waste(final_lengths: list[int], block_size: int) -> float:
    # The mean of each request's own share, not memory-weighted: right only where all requests
    # waste the same share (block size 1, exact multiples, a single request).
    shares = [(-(-n // block_size) * block_size - n) / (-(-n // block_size) * block_size)
              for n in final_lengths]
    return sum(shares) / len(shares)
"""

PARTIAL_BLOCKWISE = """
import math

import torch


def blockwise_attention(q, k_blocks, v_blocks, block_ids, seq_len, scale=None):
    # Reads every slot of the last block and gives the empty ones a score of -inf. Right while
    # those slots hold numbers; NaN there (hidden tests) turns 0 * NaN into NaN.
    q_heads, head_dim = q.shape
    block_size, kv_heads = k_blocks.shape[1], k_blocks.shape[2]
    group = q_heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    state = (
        torch.full((q_heads,), -math.inf, dtype=torch.float64),
        torch.zeros(q_heads, dtype=torch.float64),
        torch.zeros(q_heads, head_dim, dtype=torch.float64),
    )
    for logical in range(-(-seq_len // block_size)):
        k = k_blocks[block_ids[logical]].repeat_interleave(group, dim=1)
        v = v_blocks[block_ids[logical]].repeat_interleave(group, dim=1)
        scores = torch.einsum("hd,bhd->hb", q, k) * scale
        positions = torch.arange(logical * block_size, (logical + 1) * block_size)
        scores = torch.where(positions[None, :] < seq_len, scores, -math.inf)
        state = online_softmax_update(*state, scores, v.transpose(0, 1))
    return state[2] / state[1][:, None]
"""

# --- a hostile student: every part cheats instead of computing ----------------------------------
HOSTILE_TABLE = """
import kvcourse.blocks


class MyBlockTable(kvcourse.blocks.BlockTable):
    # The library's table under another name: right answers, none of them the student's.
    pass
"""

HOSTILE_HALF_BLOCK = f"""
import sys
{WHATEVER}

def half_block_waste_estimate(block_size, mean_length):
    # nbgrader reads a test cell's first execute_result as its score: forge one, then fail.
    {FORGE_SCORE}
    return Whatever()
"""

HOSTILE_WASTE = f"""
def memory_weighted_waste(final_lengths, block_size):
    # Ask IPython to swallow the failing assertion instead of showing it.
    {SWALLOW_ERRORS}
    return Whatever()
"""

HOSTILE_UPDATE = '''
import torch


class Agreeable(torch.Tensor):
    """A tensor that compares equal to anything."""

    def __eq__(self, other):
        return True

    def tolist(self):
        return [0.0, 2.0]


def online_softmax_update(running_max, running_sum, acc, scores, values):
    return tuple(torch.zeros(1, dtype=torch.float64).as_subclass(Agreeable) for _ in range(3))
'''

HOSTILE_BLOCKWISE = '''
import kvcourse.kv
import kvcourse.model
from kvcourse.attention import blockwise_attention as _reference


def blockwise_attention(q, k_blocks, v_blocks, block_ids, seq_len, scale=None):
    # The library's blockwise attention, one query wide.
    return _reference(q[None], k_blocks, v_blocks, block_ids, seq_len, scale=scale)[0]


class _NotPaged(kvcourse.kv.ContiguousKVCache):
    """A contiguous cache posing as the paged one: the table is never used."""

    def __init__(self, pool, *shape, table_factory=None, **kwargs):
        super().__init__(*shape)


# Part 4 compares a "paged" run with a contiguous one: answer the paged call with the logits of
# the contiguous call just before it. (Nothing the tests switch off is called on the way.)
_forward = kvcourse.model.TinyTransformer.forward
_last = {}


def _echo(self, batch, cache, **kwargs):
    if isinstance(cache, _NotPaged):
        return _last["logits"]
    _last["logits"] = _forward(self, batch, cache, **kwargs)
    return _last["logits"]


kvcourse.kv.PagedKVCache = _NotPaged
kvcourse.model.TinyTransformer.forward = _echo
'''


SAMPLES = {
    **basic_samples(),
    "partial": Sample(
        about="a table that leaks blocks when a multi-block append runs out, a percentage, a "
        "per-request mean, attention that reads the empty slots of the last block",
        cells={
            "MyBlockTable": _partial_table,
            "half_block_waste_estimate": PARTIAL_HALF_BLOCK,
            "memory_weighted_waste": PARTIAL_WASTE,
            "blockwise_attention": PARTIAL_BLOCKWISE,
        },
        passes=(
            "test_MyBlockTable",
            *tests_of("online_softmax_update"),
            "test_blockwise_attention",
            *tests_of("tiny_transformer"),
        ),
    ),
    "raises": Sample(
        about="the first cell raises at top level, so MyBlockTable is never defined",
        cells={"MyBlockTable": raises_first},
        passes=tests_of(
            "half_block_waste_estimate",
            "memory_weighted_waste",
            "online_softmax_update",
            "blockwise_attention",
        ),
    ),
    "syntax_error": Sample(
        about="part 3a does not parse, so 3b and 4, which call it, fail too",
        cells={"online_softmax_update": lambda code: code.replace("def ", "def (", 1)},
        passes=tests_of("MyBlockTable", "half_block_waste_estimate", "memory_weighted_waste"),
    ),
    "hostile": Sample(
        about="the library's table and attention in disguise, always-equal results, a forged "
        "score, swallowed errors, a rewritten library",
        cells={
            "MyBlockTable": HOSTILE_TABLE,
            "half_block_waste_estimate": HOSTILE_HALF_BLOCK,
            "memory_weighted_waste": HOSTILE_WASTE,
            "online_softmax_update": HOSTILE_UPDATE,
            "blockwise_attention": HOSTILE_BLOCKWISE,
        },
        passes=(),
    ),
}
