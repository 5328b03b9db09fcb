"""Sample submissions for a2_block_tables (see kvcourse_grader.samples).

Each sample starts from the current student version in notebooks/ and fills the solution cells
named here; the others take the instructor's solution unless ``default=STUB``. ``passes`` lists the
test cells that must score. The tests grade all of them in one ``kvcourse-grade autograde`` run;
``kvcourse-grade samples a2_block_tables --out DIR`` writes them out for a dry run.

The runner's own robustness (a loop, a dead kernel, a memory hog, deleted test cells) is shown by
the samples of a0_kv_sizing; these show what this assignment's tests add: parts that build on
each other, and a library that must not stand in for the student's code.
"""

from kvcourse_grader.leak_samples import leak_samples
from kvcourse_grader.samples import (
    COPY_TOOLS,
    FORGE_SCORE,
    SWALLOW_ERRORS,
    WHATEVER,
    Sample,
    basic_samples,
    pasted_reference,
    raises_first,
    replaced,
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
    # Reads every slot of the last block and gives the empty ones a score of -inf. The numbers
    # are right while those slots hold numbers (NaN there, in the hidden tests, turns 0 * NaN
    # into NaN), but the last block is folded in whole, which the visible tests count.
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


# --- one realistic mistake each: each costs the cells of its own part (and of Part 4, which runs
# the table, the online softmax and the attention together) --------------------------------------
#: free() empties the table but gives no block back: the pool leaks every block.
NO_RELEASE = replaced(
    "        for block in self._blocks:\n            self.pool.release(block)\n", ""
)

#: slot_of forgets the offset within the block: it returns the position itself. The cache then
#: writes past the end of a block (an IndexError deep inside the library, which Part 4 explains).
SLOT_OFFSET = replaced(
    "        logical, offset = divmod(position, self.pool.block_size)\n"
    "        return self._blocks[logical], offset\n",
    "        return self._blocks[position // self.pool.block_size], position\n",
)

#: Half a block in whole slots: 1 // 2 is 0, so a block of one slot wastes nothing.
HALF_BLOCK_FLOOR = replaced(
    "return float(block_size / 2 / mean_length)", "return float(block_size // 2 / mean_length)"
)

#: ceil(length / B) as length // B + 1: one block too many when the length is a multiple of B.
LOOSE_CEILING = replaced(
    "-(-length // block_size) * block_size", "(length // block_size + 1) * block_size"
)

#: The sum is rescaled to the new maximum, the accumulated values are not.
MISSED_RESCALE = replaced("new_acc = rescale[:, None] * acc + ", "new_acc = acc + ")

GATHERS = """
import math

import torch


def blockwise_attention(q, k_blocks, v_blocks, block_ids, seq_len, scale=None):
    # Puts the sequence's keys and values side by side, then plain softmax attention: the same
    # numbers, but no walk over the blocks (and no online softmax).
    q_heads, head_dim = q.shape
    block_size, kv_heads = k_blocks.shape[1], k_blocks.shape[2]
    used = [int(b) for b in block_ids[: -(-seq_len // block_size)]]
    group = q_heads // kv_heads
    k = k_blocks[used].reshape(-1, kv_heads, head_dim)[:seq_len].repeat_interleave(group, dim=1)
    v = v_blocks[used].reshape(-1, kv_heads, head_dim)[:seq_len].repeat_interleave(group, dim=1)
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    weights = torch.softmax(torch.einsum("hd,lhd->hl", q, k) * scale, dim=-1)
    return torch.einsum("hl,lhd->hd", weights, v)
"""


# --- right answers the tests must not punish --------------------------------------------------
#: The solution, but free releases the blocks last first. The pool's free queue then holds them in
#: the other order, so the blocks a table gets after a free differ from the instructor's; every
#: test must accept that.
REVERSE_FREE = replaced(
    "        for block in self._blocks:\n", "        for block in reversed(self._blocks):\n"
)


#: block_ids hands out the list the table keeps: a caller who changes it changes the table.
HANDS_OUT_BLOCKS = replaced("        return tuple(self._blocks)\n", "        return self._blocks\n")

#: Rounds the caller's lengths up to whole blocks in place to add up the allocated slots.
ROUNDS_LENGTHS_IN_PLACE = """
def memory_weighted_waste(final_lengths: list[int], block_size: int) -> float:
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    if not final_lengths or any(length <= 0 for length in final_lengths):
        raise ValueError("final_lengths must be a non-empty list of positive lengths")
    stored = sum(final_lengths)
    for i, length in enumerate(final_lengths):
        final_lengths[i] = -(-length // block_size) * block_size  # the caller's list, rounded up
    allocated = sum(final_lengths)
    return float((allocated - stored) / allocated)
"""

#: Cuts the table it was given down to the blocks the sequence uses, in place.
TRIMS_BLOCK_IDS = replaced(
    "    for logical in range(-(-seq_len // block_size)):\n",
    "    del block_ids[-(-seq_len // block_size) :]  # the caller's table loses its extra entries\n"
    "    for logical in range(len(block_ids)):\n",
)


# --- right answers written another way: the tests must give them full marks ----------------------
#: A dict from logical to physical block, blocks taken one at a time after checking that all fit,
#: block_ids as a new list, free last block first; the estimate as B / (2 L); the waste as one
#: minus stored over allocated with math.ceil; the online softmax with torch.where and a
#: broadcast sum; attention with the query heads grouped by KV head and the KV heads picked by
#: indexing one block's slots.
DICT_TABLE = {
    "MyBlockTable": """
from kvcourse.blocks import BlockPool, OutOfBlocksError


class MyBlockTable:
    def __init__(self, pool: BlockPool) -> None:
        self.pool = pool
        self._table: dict[int, int] = {}  # logical block -> physical block
        self._tokens = 0

    @property
    def num_tokens(self) -> int:
        return self._tokens

    @property
    def block_ids(self) -> list[int]:
        return [self._table[logical] for logical in range(len(self._table))]

    @property
    def wasted_slots(self) -> int:
        return len(self._table) * self.pool.block_size - self._tokens

    def append(self, num_tokens: int = 1) -> list[int]:
        if num_tokens < 0:
            raise ValueError(f"num_tokens must be zero or more, got {num_tokens}")
        size, need = self.pool.block_size, 0
        while (len(self._table) + need) * size < self._tokens + num_tokens:
            need += 1
        if need > self.pool.num_free:  # check first: then take them one at a time
            raise OutOfBlocksError(f"{need} blocks needed, {self.pool.num_free} free")
        new = [self.pool.allocate() for _ in range(need)]
        for block in new:
            self._table[len(self._table)] = block
        self._tokens += num_tokens
        return new

    def slot_of(self, position: int) -> tuple[int, int]:
        if position < 0 or position >= self._tokens:
            raise IndexError(f"no token at position {position}")
        return self._table[position // self.pool.block_size], position % self.pool.block_size

    def free(self) -> None:
        for logical in sorted(self._table, reverse=True):
            self.pool.release(self._table.pop(logical))
        self._tokens = 0
""",
    "half_block_waste_estimate": """
def half_block_waste_estimate(block_size: int, mean_length: float) -> float:
    if min(block_size, mean_length) <= 0:
        raise ValueError("block_size and mean_length must be positive")
    return block_size / (2 * mean_length)
""",
    "memory_weighted_waste": """
import math


def memory_weighted_waste(final_lengths: list[int], block_size: int) -> float:
    if block_size <= 0 or len(final_lengths) == 0 or min(final_lengths) <= 0:
        raise ValueError("bad lengths or block size")
    allocated = block_size * sum(math.ceil(n / block_size) for n in final_lengths)
    return 1 - sum(final_lengths) / allocated
""",
    "online_softmax_update": """
import torch


def online_softmax_update(running_max, running_sum, acc, scores, values):
    block_max = scores.max(dim=-1).values
    new_max = torch.where(block_max > running_max, block_max, running_max)
    old_weight = torch.exp(running_max - new_max)
    weights = torch.exp(scores - new_max.unsqueeze(-1))
    new_sum = running_sum * old_weight + weights.sum(dim=-1)
    new_acc = acc * old_weight.unsqueeze(-1) + (weights.unsqueeze(-1) * values).sum(dim=1)
    return new_max, new_sum, new_acc
""",
    "blockwise_attention": """
import math

import torch


def blockwise_attention(q, k_blocks, v_blocks, block_ids, seq_len, scale=None):
    q_heads, head_dim = q.shape
    block_size, kv_heads = k_blocks.shape[1], k_blocks.shape[2]
    group = q_heads // kv_heads
    scale = 1 / math.sqrt(head_dim) if scale is None else scale
    kv_of_head = torch.arange(q_heads) // group  # the KV head each query head reads
    state = (
        torch.full((q_heads,), -math.inf, dtype=torch.float64),
        torch.zeros(q_heads, dtype=torch.float64),
        torch.zeros(q_heads, head_dim, dtype=torch.float64),
    )
    start = 0
    for physical in block_ids:
        if start >= seq_len:
            break
        filled = min(block_size, seq_len - start)
        k = k_blocks[int(physical), :filled]  # [filled, kv_heads, head_dim]
        v = v_blocks[int(physical), :filled]
        keys, values = k[:, kv_of_head], v[:, kv_of_head]  # [filled, q_heads, head_dim]
        scores = (keys * q).sum(dim=-1).T * scale  # [q_heads, filled]
        state = online_softmax_update(*state, scores, values.transpose(0, 1))
        start += filled
    return state[2] / state[1].unsqueeze(-1)
""",
}

#: Each logical block as [physical block, slots filled], the token count added up from them, the
#: room in the last block filled first; the estimate as 0.5 B / L; the waste from each request's
#: empty slots; the online softmax with a stacked maximum and a batched matrix product; attention
#: with the query grouped by KV head (einsum on [kv_heads, group, head_dim]).
FILLED_COUNTS = {
    "MyBlockTable": """
from kvcourse.blocks import BlockPool


class MyBlockTable:
    def __init__(self, pool: BlockPool) -> None:
        self.pool = pool
        self._blocks = []  # [physical block, slots filled], in logical order

    @property
    def num_tokens(self) -> int:
        return sum(filled for _, filled in self._blocks)

    @property
    def block_ids(self) -> tuple[int, ...]:
        return tuple(block for block, _ in self._blocks)

    @property
    def wasted_slots(self) -> int:
        return sum(self.pool.block_size - filled for _, filled in self._blocks)

    def append(self, num_tokens: int = 1) -> list[int]:
        if num_tokens < 0:
            raise ValueError(f"num_tokens must be zero or more, got {num_tokens}")
        size = self.pool.block_size
        room = size - self._blocks[-1][1] if self._blocks else 0
        beyond = max(num_tokens - room, 0)
        new = self.pool.allocate_many((beyond + size - 1) // size)  # all or nothing
        left = num_tokens
        if self._blocks:
            into_last = min(room, left)
            self._blocks[-1][1] += into_last
            left -= into_last
        for block in new:
            self._blocks.append([block, min(size, left)])
            left -= min(size, left)
        return list(new)

    def slot_of(self, position: int) -> tuple[int, int]:
        if not 0 <= position < self.num_tokens:
            raise IndexError(f"no token at position {position}")
        for block, filled in self._blocks:
            if position < filled:
                return block, position
            position -= filled
        raise IndexError(position)

    def free(self) -> None:
        while self._blocks:
            block, _ = self._blocks.pop(0)
            self.pool.release(block)
""",
    "half_block_waste_estimate": """
def half_block_waste_estimate(block_size: int, mean_length: float) -> float:
    if block_size <= 0:
        raise ValueError("block_size must be positive")
    if mean_length <= 0:
        raise ValueError("mean_length must be positive")
    return 0.5 * block_size / mean_length
""",
    "memory_weighted_waste": """
def memory_weighted_waste(final_lengths: list[int], block_size: int) -> float:
    if block_size <= 0:
        raise ValueError("block_size must be positive")
    empty, stored = 0, 0
    for length in final_lengths:
        if length <= 0:
            raise ValueError(f"a length of {length}")
        empty += -length % block_size  # the empty slots of this request's last block
        stored += length
    if stored == 0:
        raise ValueError("no lengths")
    return empty / (stored + empty)
""",
    "online_softmax_update": """
import torch


def online_softmax_update(running_max, running_sum, acc, scores, values):
    new_max = torch.stack([running_max, scores.amax(dim=-1)]).amax(dim=0)
    rescale = torch.exp(running_max - new_max)
    weights = torch.exp(scores - new_max[:, None])
    new_acc = rescale[:, None] * acc + torch.bmm(weights.unsqueeze(1), values).squeeze(1)
    return new_max, rescale * running_sum + weights.sum(dim=-1), new_acc
""",
    "blockwise_attention": """
import math

import torch


def blockwise_attention(q, k_blocks, v_blocks, block_ids, seq_len, scale=None):
    q_heads, head_dim = q.shape
    _, block_size, kv_heads, _ = k_blocks.shape
    group = q_heads // kv_heads
    if scale is None:
        scale = head_dim**-0.5
    grouped = q.reshape(kv_heads, group, head_dim)  # query heads h * group .. read KV head h
    running_max = torch.full((q_heads,), float("-inf"), dtype=torch.float64)
    running_sum = torch.zeros(q_heads, dtype=torch.float64)
    acc = torch.zeros(q_heads, head_dim, dtype=torch.float64)
    logical = 0
    while logical * block_size < seq_len:
        filled = min(block_size, seq_len - logical * block_size)
        k = k_blocks[int(block_ids[logical])][:filled]  # [filled, kv_heads, head_dim]
        v = v_blocks[int(block_ids[logical])][:filled]
        scores = torch.einsum("kgd,fkd->kgf", grouped, k).reshape(q_heads, filled) * scale
        values = v.permute(1, 0, 2).repeat_interleave(group, dim=0)  # [q_heads, filled, dim]
        running_max, running_sum, acc = online_softmax_update(
            running_max, running_sum, acc, scores, values
        )
        logical += 1
    return acc / running_sum[:, None]
""",
}

# --- a copycat: the reference's functions copied before the tests can switch them off ----------
COPYCAT_TABLE = f"""
{COPY_TOOLS}
import kvcourse.blocks

MyBlockTable = _copied_class("MyBlockTable", kvcourse.blocks.BlockTable)
"""

COPYCAT_ATTENTION = """
import sys
import types

import kvcourse.attention


def _copied_module(module):
    # Every function of the module, copied into a namespace of its own, so that the copies call
    # each other and never the originals the tests switch off.
    namespace = dict(vars(module))
    for key, member in vars(module).items():
        if isinstance(member, types.FunctionType):
            copy = types.FunctionType(
                member.__code__, namespace, member.__name__, member.__defaults__
            )
            copy.__kwdefaults__ = member.__kwdefaults__
            namespace[key] = copy
    return namespace


_library = _copied_module(sys.modules[kvcourse.attention.blockwise_attention.__module__])


def blockwise_attention(q, k_blocks, v_blocks, block_ids, seq_len, scale=None):
    return _library["blockwise_attention"](
        q[None], k_blocks, v_blocks, block_ids, seq_len, scale=scale
    )[0]
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


PARTS = (
    "MyBlockTable",
    "half_block_waste_estimate",
    "memory_weighted_waste",
    "online_softmax_update",
    "blockwise_attention",
    "tiny_transformer",
)


def all_but(*parts: str) -> tuple[str, ...]:
    """The test cells of every part except those named."""
    return tests_of(*(part for part in PARTS if part not in parts))


#: What a pasted block table keeps: every part but the table's own.
PASTED_PASSES = tests_of(
    "half_block_waste_estimate",
    "memory_weighted_waste",
    "online_softmax_update",
    "blockwise_attention",
)


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
            *tests_of("tiny_transformer"),
        ),
    ),
    "reverse_free": Sample(
        about="every part right; free releases a table's blocks last first, so blocks come back "
        "from the pool in another order",
        cells={"MyBlockTable": REVERSE_FREE},
    ),
    "dict_table": Sample(
        about="every part right, written another way: a dict from logical to physical block, "
        "B / (2 L), one minus stored over allocated, torch.where, KV heads picked by indexing "
        "one block's slots",
        cells=DICT_TABLE,
    ),
    "filled_counts": Sample(
        about="every part right, written another way: each block with its fill, 0.5 B / L, each "
        "request's empty slots added up, a batched matrix product, the query grouped by KV head",
        cells=FILLED_COUNTS,
    ),
    "hands_out_blocks": Sample(
        about="block_ids returns the list the table keeps, not a copy of it",
        cells={"MyBlockTable": HANDS_OUT_BLOCKS},
        passes=(*all_but("MyBlockTable"), "test_MyBlockTable"),
    ),
    "rounds_lengths_in_place": Sample(
        about="memory_weighted_waste rounds the caller's lengths up to whole blocks in place",
        cells={"memory_weighted_waste": ROUNDS_LENGTHS_IN_PLACE},
        passes=(*all_but("memory_weighted_waste"), "test_memory_weighted_waste"),
    ),
    "trims_block_ids": Sample(
        about="blockwise_attention deletes the extra entries of the block table it was given "
        "(and fails on the cache's tuple in Part 4)",
        cells={"blockwise_attention": TRIMS_BLOCK_IDS},
        passes=(
            *all_but("blockwise_attention", "tiny_transformer"),
            "test_blockwise_attention",
        ),
    ),
    "no_release": Sample(
        about="free() empties the table but releases no block (a forgotten release)",
        cells={"MyBlockTable": NO_RELEASE},
        passes=tests_of(
            "half_block_waste_estimate",
            "memory_weighted_waste",
            "online_softmax_update",
            "blockwise_attention",
        ),
    ),
    "slot_offset": Sample(
        about="slot_of returns the position instead of the offset within its block (an "
        "off-by-a-block error the cache trips over)",
        cells={"MyBlockTable": SLOT_OFFSET},
        passes=tests_of(
            "half_block_waste_estimate",
            "memory_weighted_waste",
            "online_softmax_update",
            "blockwise_attention",
        ),
    ),
    "half_block_floor": Sample(
        about="half a block rounded down to whole slots (B // 2)",
        cells={"half_block_waste_estimate": HALF_BLOCK_FLOOR},
        passes=(
            *tests_of("MyBlockTable", "memory_weighted_waste"),
            "test_half_block_waste_estimate",
            *tests_of("online_softmax_update", "blockwise_attention", "tiny_transformer"),
        ),
    ),
    "loose_ceiling": Sample(
        about="blocks per request as length // B + 1, a wrong ceiling for exact multiples",
        cells={"memory_weighted_waste": LOOSE_CEILING},
        passes=(
            *tests_of("MyBlockTable", "half_block_waste_estimate"),
            "test_memory_weighted_waste",
            *tests_of("online_softmax_update", "blockwise_attention", "tiny_transformer"),
        ),
    ),
    "missed_rescale": Sample(
        about="the online softmax rescales the running sum but not the accumulated values",
        cells={"online_softmax_update": MISSED_RESCALE},
        passes=tests_of(
            "MyBlockTable",
            "half_block_waste_estimate",
            "memory_weighted_waste",
            "blockwise_attention",
        ),
    ),
    "gathers": Sample(
        about="attention that gathers the sequence's keys and values and calls softmax instead "
        "of walking the blocks (the same numbers)",
        cells={"blockwise_attention": GATHERS},
        passes=tests_of(
            "MyBlockTable",
            "half_block_waste_estimate",
            "memory_weighted_waste",
            "online_softmax_update",
            "tiny_transformer",
        ),
    ),
    # The library's BlockTable pasted into the cell, and retyped with other names for every
    # argument and variable: the hidden tests' watch knows both for copies.
    "pasted_reference": Sample(
        about="the library's BlockTable pasted into the cell as MyBlockTable",
        cells={
            "MyBlockTable": pasted_reference(
                "kvcourse.blocks.table", {"BlockTable": "MyBlockTable"}
            )
        },
        passes=PASTED_PASSES,
    ),
    "retyped_reference": Sample(
        about="the library's BlockTable retyped with other variable names",
        cells={
            "MyBlockTable": pasted_reference(
                "kvcourse.blocks.table", {"BlockTable": "MyBlockTable"}, retyped=True
            )
        },
        passes=PASTED_PASSES,
    ),
    "copycat": Sample(
        about="the library's block table and blockwise attention copied function by function "
        "before the tests run",
        cells={"MyBlockTable": COPYCAT_TABLE, "blockwise_attention": COPYCAT_ATTENTION},
        passes=tests_of(
            "half_block_waste_estimate", "memory_weighted_waste", "online_softmax_update"
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
        about="part 3a does not parse, so Part 4, which runs it, fails too (3b's tests bring "
        "their own online softmax)",
        cells={"online_softmax_update": lambda code: code.replace("def ", "def (", 1)},
        passes=tests_of(
            "MyBlockTable",
            "half_block_waste_estimate",
            "memory_weighted_waste",
            "blockwise_attention",
        ),
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
# A correct student who stashes the frames that call online_softmax_update and prints them,
# base64-encoded: the hidden tests call it from the grader, so no frame of theirs is there.
# And one who traces every call from the first solution cell on, printed scrambled in the last.
LEAKS = leak_samples("online_softmax_update", "blockwise_attention", "online_softmax_update")
SAMPLES.update({name: LEAKS[name] for name in ("leaks_callers", "leaks_tracer")})
