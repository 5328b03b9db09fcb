"""Tests for kvcourse.model (§4.2): the tiny model gives the same logits on a paged KV cache
as on a contiguous one, whether attention gathers the blocks, walks them, runs through the Triton
kernel or is a function passed in (assignment a2). The caches themselves: tests/kv/test_cache.py."""

from __future__ import annotations

import pytest
import torch

from kvcourse.attention import backend as accel
from kvcourse.attention import blockwise_attention, kernel_device
from kvcourse.attention import paged_decode as pak
from kvcourse.blocks import BlockPool, OutOfBlocksError
from kvcourse.kv import (
    BlockTableLike,
    ContiguousKVCache,
    KVCache,
    ManagedKVCache,
    PagedKVCache,
    UnknownSequenceError,
)
from kvcourse.model import (
    TinyConfig,
    TinyTransformer,
    max_logit_difference,
    paged_vs_contiguous,
)

TOLERANCE = 1e-12  # float64; the observed difference is a few 1e-15
#: attention="kernel" runs on a float32 cache with float32 queries: the observed difference from
#: the float64 contiguous run is about 4e-7 at every block size.
KERNEL_TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def model() -> TinyTransformer:
    return TinyTransformer(seed=0)


@pytest.fixture(autouse=True)
def one_thread():
    """The model's tensors are tiny: more threads only add overhead (seconds on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ---------------------------------------------------------------------------- the §4 experiment


@pytest.mark.parametrize("block_size", [1, 4, 16, 64])
def test_ragged_batch_paged_equals_contiguous(block_size):
    """4 uneven prompts (5, 17, 33, 2), prefill + 20 greedy decode steps."""
    blockwise = paged_vs_contiguous([block_size])[block_size]
    gathered = paged_vs_contiguous([block_size], attention="read")[block_size]
    print(
        f"\nblock size {block_size:>2}: max |logit diff| blockwise {blockwise:.2e}, "
        f"gather-then-attend {gathered:.2e}"
    )
    assert blockwise <= TOLERANCE
    assert gathered <= TOLERANCE


def test_any_cache_with_the_three_methods_plugs_in(model):
    """A student's cache needs only length / write / read (plus add_sequence for the runner)."""

    class ListCache:
        def __init__(self):
            self.k, self.v = {}, {}

        def add_sequence(self, seq_id):
            self.k[seq_id], self.v[seq_id] = [[], []], [[], []]

        def free_sequence(self, seq_id):
            del self.k[seq_id], self.v[seq_id]

        def length(self, seq_id):
            return sum(x.shape[0] for x in self.k[seq_id][-1])

        def write(self, seq_id, layer, k, v):
            self.k[seq_id][layer].append(k)
            self.v[seq_id][layer].append(v)

        def read(self, seq_id, layer):
            return torch.cat(self.k[seq_id][layer]), torch.cat(self.v[seq_id][layer])

    cache = ListCache()
    assert isinstance(cache, KVCache) and isinstance(cache, ManagedKVCache)
    assert max_logit_difference(cache, model=model, decode_steps=5) <= TOLERANCE


def test_prefill_in_one_chunk_equals_token_by_token(model):
    tokens = [3, 14, 15, 92, 65, 35, 89, 79, 32]
    whole, steps = model.contiguous_cache(), model.contiguous_cache()
    whole.add_sequence(0)
    steps.add_sequence(0)
    chunk_logits = model.forward({0: tokens}, whole)[0]
    one_by_one = torch.cat([model.forward({0: [t]}, steps)[0] for t in tokens])
    assert chunk_logits.shape == (len(tokens), model.config.vocab_size)
    assert (chunk_logits - one_by_one).abs().max().item() <= TOLERANCE


def test_batching_does_not_change_a_sequences_logits(model):
    alone, batched = model.contiguous_cache(), model.contiguous_cache()
    alone.add_sequence("a")
    for s in ("a", "b", "c"):
        batched.add_sequence(s)
    batch = [("b", [1, 2, 3]), ("a", [7, 8]), ("c", [9])]
    out = model.forward(batch, batched)
    assert list(out) == ["b", "a", "c"]
    assert (out["a"] - model.forward({"a": [7, 8]}, alone)["a"]).abs().max().item() <= TOLERANCE


def test_same_seed_same_model_other_seed_other_model():
    def logits(seed):
        m = TinyTransformer(seed=seed)
        cache = m.contiguous_cache()
        cache.add_sequence(0)
        return m.forward({0: [1, 2, 3]}, cache)[0]

    assert torch.equal(logits(0), logits(0))
    assert not torch.allclose(logits(0), logits(1))


def test_section4_demo_on_the_model(model):
    """'Four score and seven years ago our': 7 tokens, block size 4, other requests hold blocks."""
    pool = BlockPool(num_blocks=8, block_size=4, taken=[0, 2, 3, 5, 6])
    cache = model.paged_cache(pool)
    cache.add_sequence("A")
    logits = model.forward({"A": list(range(10, 17))}, cache)
    table = cache.block_table("A")
    assert table.block_ids == (1, 4)  # prefill: 2 blocks, not adjacent
    history = []
    for _ in range(2):
        nxt = int(logits["A"][-1].argmax())
        logits = model.forward({"A": [nxt]}, cache, attention="blockwise")
        history.append(table.block_ids)
    assert history == [(1, 4), (1, 4, 7)]  # decode 1 fills slot 3 of block 4; decode 2 allocates
    assert cache.length("A") == 9 and table.wasted_slots == 3
    cache.free_sequence("A")
    assert pool.free_block_ids() == (1, 4, 7)


def test_forward_that_does_not_fit_raises_before_writing_anything(model):
    pool = BlockPool(5, 4)
    cache = model.paged_cache(pool)
    for s in ("a", "b"):
        cache.add_sequence(s)
    model.forward({"a": list(range(8)), "b": list(range(7))}, cache)  # 2 + 2 blocks
    assert cache.blocks_needed({"a": 1, "b": 1}) == 1
    before = (pool.free_block_ids(), [cache.layer_length(s, 0) for s in ("a", "b")])
    with pytest.raises(OutOfBlocksError, match="needs 2 new KV blocks but only 1"):
        model.forward({"b": [1, 2], "a": [3]}, cache)
    after = (pool.free_block_ids(), [cache.layer_length(s, 0) for s in ("a", "b")])
    assert after == before
    model.forward({"a": [3], "b": [4]}, cache)  # one new block: fits
    cache.free_sequence("a")
    assert pool.num_free == 3


def test_forward_refuses_bad_batches_before_writing(model):
    cache = model.contiguous_cache()
    cache.add_sequence(0)
    vocab = model.config.vocab_size
    cases = [
        ({1: [1]}, UnknownSequenceError, "add_sequence"),
        ({0: []}, ValueError, "no new tokens"),
        ({0: [vocab]}, ValueError, f"0..{vocab - 1}"),
        ({0: [1.0]}, ValueError, "token ids must be ints"),
        ([(0, [1]), (0, [2])], ValueError, "appears twice"),
        ([], ValueError, "empty"),
        ([0, 1], TypeError, "pair"),
    ]
    for batch, error, match in cases:
        with pytest.raises(error, match=match):
            model.forward(batch, cache)
        assert cache.layer_length(0, 0) == 0
    with pytest.raises(TypeError, match="paged_view"):
        model.forward({0: [1]}, cache, attention="blockwise")
    with pytest.raises(ValueError, match="'read', 'blockwise' or 'kernel'"):
        model.forward({0: [1]}, cache, attention="fast")


def test_config_and_experiment_errors():
    with pytest.raises(ValueError, match="num_kv_heads"):
        TinyConfig(num_heads=4, num_kv_heads=3)
    with pytest.raises(ValueError, match="positive int"):
        TinyConfig(num_layers=0)
    with pytest.raises(ValueError, match="even for RoPE"):
        TinyConfig(d_model=12, num_heads=4, num_kv_heads=2)
    with pytest.raises(ValueError, match="prompt_lengths"):
        max_logit_difference(ContiguousKVCache(2, 2, 16), prompt_lengths=[0])


# ---------------------------------------------------------------------------- pieces passed in (a2)


class ListTable:
    """A block table written from scratch, as a student would: only the BlockTableLike methods."""

    slot_calls = 0

    def __init__(self, pool):
        self.pool, self.blocks, self.count = pool, [], 0

    @property
    def num_tokens(self):
        return self.count

    @property
    def block_ids(self):
        return list(self.blocks)  # a list, not a tuple: the cache must not care

    def append(self, num_tokens=1):
        size = self.pool.block_size
        new = self.pool.allocate_many(-(-(self.count + num_tokens) // size) - len(self.blocks))
        self.blocks += new
        self.count += num_tokens
        return new

    def slot_of(self, position):
        ListTable.slot_calls += 1
        if not 0 <= position < self.count:
            raise IndexError(position)
        return self.blocks[position // self.pool.block_size], position % self.pool.block_size

    def free(self):
        for block in self.blocks:
            self.pool.release(block)
        self.blocks, self.count = [], 0


def per_query(q, k_blocks, v_blocks, block_ids, seq_len):
    """The library's blockwise attention in the one-query shape of a DecodeAttention."""
    return blockwise_attention(q[None], k_blocks, v_blocks, block_ids, seq_len)[0]


@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_a_table_of_ones_own_runs_the_paged_cache(model, block_size):
    c = model.config
    pool = BlockPool(90, block_size, taken=[0, 2, 3, 5, 6])
    cache = PagedKVCache(pool, c.num_layers, c.num_kv_heads, c.head_dim, table_factory=ListTable)
    assert isinstance(ListTable(pool), BlockTableLike)
    calls = ListTable.slot_calls
    assert max_logit_difference(cache, model=model, decode_steps=5) <= TOLERANCE
    assert ListTable.slot_calls > calls  # the cache asked the table where each token goes
    table = cache.block_table(2)
    assert isinstance(table, ListTable) and table.num_tokens == 33 + 5
    assert cache.paged_view(2, 0).block_ids == tuple(table.blocks)
    assert cache.blocks_needed({2: 0}) == 0
    assert cache.blocks_needed({2: block_size * 3 + 1}) == 3 + (table.num_tokens % block_size == 0)
    for seq_id in list(cache.seq_ids):
        cache.free_sequence(seq_id)
    assert pool.num_free == 85


def test_a_table_of_ones_own_is_all_or_nothing_in_forward(model):
    c = model.config
    pool = BlockPool(3, 4)
    cache = PagedKVCache(pool, c.num_layers, c.num_kv_heads, c.head_dim, table_factory=ListTable)
    cache.add_sequence("a")
    model.forward({"a": list(range(7))}, cache)
    with pytest.raises(OutOfBlocksError, match="needs 2 new KV blocks but only 1"):
        model.forward({"a": list(range(6))}, cache)
    assert cache.layer_length("a", 0) == 7 and pool.num_free == 1
    with pytest.raises(ValueError, match="zero or more"):
        cache.blocks_needed({"a": -1})
    with pytest.raises(TypeError, match="table_factory"):
        PagedKVCache(pool, 1, 1, 2, table_factory="ListTable")


def test_attention_can_be_a_function(model):
    c = model.config
    seen = []

    def attend(q, k_blocks, v_blocks, block_ids, seq_len):
        seen.append((tuple(q.shape), seq_len))
        return per_query(q, k_blocks, v_blocks, block_ids, seq_len)

    cache = model.paged_cache(BlockPool(40, 4, taken=[1]))
    assert max_logit_difference(cache, model=model, decode_steps=3, attention=attend) <= TOLERANCE
    queries = [(c.num_heads, c.head_dim)]
    prefill = [(shape, n) for shape, n in seen[: c.num_layers * (5 + 17 + 33 + 2)]]
    assert {shape for shape, _ in prefill} == set(queries)
    assert [n for _, n in prefill[:5]] == [1, 2, 3, 4, 5]  # causal: token p sees p + 1 tokens
    own = PagedKVCache(BlockPool(40, 4), c.num_layers, c.num_kv_heads, c.head_dim)
    own.add_sequence(0)
    with pytest.raises(ValueError, match=r"shape \(4, 16\)"):
        model.forward({0: [1, 2]}, own, attention=lambda q, *rest: q[:2])
    assert own.layer_length(0, 0) == 2  # checked after the first layer's write, not before
    with pytest.raises(TypeError, match="paged_view"):
        contiguous = model.contiguous_cache()
        contiguous.add_sequence(0)
        model.forward({0: [1]}, contiguous, attention=per_query)
    assert contiguous.layer_length(0, 0) == 0


def test_max_logit_difference_reports_nan_logits():
    """A cache that produces NaN must not look perfect: max() would drop the NaN."""
    import math

    from kvcourse.model import TinyTransformer, max_logit_difference

    model = TinyTransformer(seed=0)

    class NaNCache:
        def __init__(self):
            self.inner = model.contiguous_cache()

        def add_sequence(self, seq_id):
            self.inner.add_sequence(seq_id)

        def length(self, seq_id):
            return self.inner.length(seq_id)

        def write(self, seq_id, layer, k, v):
            self.inner.write(seq_id, layer, k * float("nan"), v)

        def read(self, seq_id, layer):
            return self.inner.read(seq_id, layer)

    diff = max_logit_difference(NaNCache(), model=model, prompt_lengths=(3, 2), decode_steps=1)
    assert math.isnan(diff)


# ---------------------------------------------------------------------------- through the kernel


@pytest.mark.slow  # the Triton interpreter: about 3 s per block size on a CPU
@pytest.mark.parametrize("block_size", [1, 4, 16, 64])
def test_kernel_mode_equals_contiguous_on_a_ragged_batch(block_size):
    """4 uneven prompts (5, 17, 33, 2) prefilled through the kernel, then 5 greedy decode steps
    through it, on a float32 paged cache: the logits match the float64 contiguous run."""
    diff = paged_vs_contiguous([block_size], decode_steps=5, attention="kernel")[block_size]
    print(f"\nblock size {block_size:>2}: max |logit diff| through the kernel {diff:.2e}")
    assert diff <= KERNEL_TOLERANCE


def test_a_table_of_ones_own_drives_the_kernel(model, monkeypatch):
    """A small ragged batch on block tables of one's own (as a2 builds them): one kernel launch
    per layer and step, on the cache's own blocks, with the table's block ids and causal lengths."""
    launches = []
    launch = pak._launch

    def spy(kernels, q, k_cache, v_cache, block_tables, seq_lens, *rest):
        launches.append((block_tables.tolist(), seq_lens.tolist(), k_cache.data_ptr()))
        return launch(kernels, q, k_cache, v_cache, block_tables, seq_lens, *rest)

    monkeypatch.setattr(pak, "_launch", spy)
    c = model.config
    pool = BlockPool(30, 4, taken=[0, 2, 3, 5])
    shape = (c.num_layers, c.num_kv_heads, c.head_dim)
    cache = PagedKVCache(
        pool, *shape, dtype=torch.float32, device=kernel_device(), table_factory=ListTable
    )
    diff = max_logit_difference(
        cache, model=model, prompt_lengths=(3, 6, 1), decode_steps=3, attention="kernel"
    )
    assert diff <= KERNEL_TOLERANCE
    if not accel.detect_backend().uses_triton:
        pytest.skip("Triton is not installed: the reference ran instead of the kernel")
    assert len(launches) == c.num_layers * 4  # prefill + 3 decode steps, one launch per layer
    assert launches[0][1] == [1, 2, 3, 1, 2, 3, 4, 5, 6, 1]  # prefill: a row per prompt token
    tables, lens, data = launches[-1]  # the last decode step, the last layer
    assert lens == [3 + 3, 6 + 3, 1 + 3]
    for seq_id, row in enumerate(tables):
        blocks = cache.block_table(seq_id).blocks
        assert row[: len(blocks)] == blocks and not set(blocks) & {0, 2, 3, 5}
    assert data == cache.layer_blocks(c.num_layers - 1)[0].data_ptr()


def test_kernel_mode_refuses_caches_the_kernel_cannot_read(model):
    cases = [
        (
            model.paged_cache(BlockPool(8, 4)),
            TypeError,
            r"float64; build it with dtype=torch\.float32",
        ),
        (model.contiguous_cache(), TypeError, "kernel_inputs"),
        (model.paged_cache(BlockPool(8, 3), dtype=torch.float32), ValueError, "power of two"),
    ]
    for cache, error, match in cases:
        cache.add_sequence(0)
        with pytest.raises(error, match=match):
            model.forward({0: [1, 2]}, cache, attention="kernel")
        assert cache.layer_length(0, 0) == 0  # refused before anything was written
