"""Tests for kvcourse.kv.cache and kvcourse.model (§4, demo 2): the tiny model gives the
same logits on a paged KV cache as on a contiguous one, and the caches' errors are clear."""

from __future__ import annotations

import pytest
import torch

from kvcourse.attention import (
    blockwise_attention,
    blockwise_decode_attention,
    contiguous_attention,
)
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


@pytest.fixture(scope="module")
def model() -> TinyTransformer:
    return TinyTransformer(seed=0)


def kv(n: int, heads: int = 2, dim: int = 16, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, heads, dim, generator=gen, dtype=torch.float64)


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


def test_kernel_inputs_are_what_the_kernel_expects(model):
    pool = BlockPool(40, 4, taken=[0, 5])
    cache = model.paged_cache(pool)
    prompts = {"x": list(range(9)), "y": [5], "z": list(range(20, 33))}
    for s in prompts:
        cache.add_sequence(s)
    model.forward(prompts, cache)
    model.forward({s: [1] for s in prompts}, cache)
    order = ["z", "x", "y"]
    k_cache, v_cache, block_tables, seq_lens = cache.kernel_inputs(order, 1)
    c = model.config
    assert k_cache.shape == v_cache.shape == (40, 4, c.num_kv_heads, c.head_dim)
    assert k_cache.dtype == torch.float64
    assert block_tables.dtype == torch.int32 and seq_lens.dtype == torch.int32
    assert seq_lens.tolist() == [14, 10, 2]
    assert block_tables.shape == (3, 4)
    for row, s in zip(block_tables.tolist(), order, strict=True):
        ids = cache.block_table(s).block_ids
        assert tuple(row[: len(ids)]) == ids and all(x == 0 for x in row[len(ids) :])
    assert k_cache.data_ptr() == cache.layer_blocks(1)[0].data_ptr()  # no copy
    # The reference decode attention over these inputs equals attention over what read() gives.
    q = torch.randn(3, c.num_heads, c.head_dim, dtype=torch.float64)
    got = blockwise_decode_attention(q, k_cache, v_cache, block_tables, seq_lens)
    for i, s in enumerate(order):
        k, v = cache.read(s, 1)
        assert (got[i] - contiguous_attention(q[i : i + 1], k, v)[0]).abs().max() <= TOLERANCE


# ---------------------------------------------------------------------------- the KV caches


def make_caches():
    pool = BlockPool(6, 4)
    return [ContiguousKVCache(2, 2, 16), PagedKVCache(pool, 2, 2, 16)]


@pytest.mark.parametrize("index", [0, 1])
def test_write_rule_length_advances_after_the_last_layer(index):
    cache = make_caches()[index]
    assert isinstance(cache, ManagedKVCache)
    cache.add_sequence(7)
    k, v = kv(5), kv(5, seed=1)
    cache.write(7, 0, k, v)
    assert cache.length(7) == 0 and cache.layer_length(7, 0) == 5
    assert cache.read(7, 1)[0].shape == (0, 2, 16)
    cache.write(7, 1, 2 * k, 2 * v)
    assert cache.length(7) == 5
    got_k, got_v = cache.read(7, 0)
    assert torch.equal(got_k, k) and torch.equal(got_v, v)
    assert torch.equal(cache.read(7, 1)[0], 2 * k)
    cache.write(7, 0, kv(1, seed=2), kv(1, seed=3))
    cache.write(7, 1, kv(1, seed=4), kv(1, seed=5))
    assert cache.length(7) == 6
    assert torch.equal(cache.read(7, 0)[0][5], kv(1, seed=2)[0])


def test_paged_read_gathers_the_same_values_as_contiguous():
    contiguous, paged = make_caches()
    for cache in (contiguous, paged):
        cache.add_sequence("s")
        cache.add_sequence("t")
    # Interleave the two sequences so their blocks alternate in the pool.
    for step, (seq, n) in enumerate([("s", 3), ("t", 2), ("s", 4), ("t", 5), ("s", 1)]):
        for layer in (0, 1):
            k, v = kv(n, seed=10 * step + layer), kv(n, seed=10 * step + layer + 5)
            contiguous.write(seq, layer, k, v)
            paged.write(seq, layer, k, v)
    assert paged.block_table("s").block_ids == (0, 2)
    assert paged.block_table("t").block_ids == (1, 3)
    for seq in ("s", "t"):
        for layer in (0, 1):
            for a, b in zip(contiguous.read(seq, layer), paged.read(seq, layer), strict=True):
                assert torch.equal(a, b)


def test_paged_view_describes_the_blocks():
    _, paged = make_caches()
    paged.add_sequence(1)
    paged.write(1, 0, kv(6), kv(6))
    view = paged.paged_view(1, 0)
    assert view.block_ids == (0, 1) and view.length == 6
    assert view.k_blocks.shape == (6, 4, 2, 16)
    assert paged.paged_view(1, 1).length == 0


@pytest.mark.parametrize("index", [0, 1])
def test_unknown_sequences_are_named_with_a_hint(index):
    cache = make_caches()[index]
    cache.add_sequence("known")
    for call in (
        lambda: cache.length("nope"),
        lambda: cache.read("nope", 0),
        lambda: cache.write("nope", 0, kv(1), kv(1)),
        lambda: cache.free_sequence("nope"),
        lambda: cache.length(["unhashable"]),
    ):
        with pytest.raises(UnknownSequenceError) as info:
            call()
        assert isinstance(info.value, KeyError)
        message = str(info.value)
        assert "unknown sequence" in message and "add_sequence" in message
        assert "'known'" in message and not message.startswith('"')


@pytest.mark.parametrize("index", [0, 1])
def test_cache_refuses_bad_writes_and_changes_nothing(index):
    cache = make_caches()[index]
    cache.add_sequence(0)
    cache.write(0, 0, kv(3), kv(3))
    cache.write(0, 1, kv(3), kv(3))
    before = [cache.read(0, layer)[0].clone() for layer in (0, 1)]
    cases = [
        (lambda: cache.write(0, 2, kv(1), kv(1)), IndexError, "layers 0..1"),
        (lambda: cache.read(0, -1), IndexError, "layers 0..1"),
        (lambda: cache.read(0, 1.0), TypeError, "layer must be an int"),
        (lambda: cache.write(0, 0, kv(1, heads=3), kv(1, heads=3)), ValueError, "kv_heads=2"),
        (lambda: cache.write(0, 0, kv(1)[0], kv(1)[0]), ValueError, "new_tokens"),
        (lambda: cache.write(0, 0, kv(1), kv(2)), ValueError, "same shape"),
        (lambda: cache.write(0, 0, kv(1).numpy(), kv(1)), TypeError, "torch.from_numpy"),
        (lambda: cache.write(0, 1, kv(1), kv(1)), ValueError, "layers in order"),
        (lambda: cache.add_sequence(0), ValueError, "already exists"),
        (lambda: cache.add_sequence([0]), TypeError, "hashable"),
    ]
    for call, error, match in cases:
        with pytest.raises(error, match=match):
            call()
        assert cache.length(0) == 3 and cache.layer_length(0, 0) == 3
        assert all(torch.equal(cache.read(0, i)[0], before[i]) for i in (0, 1))


@pytest.mark.parametrize("index", [0, 1])
def test_a_pass_must_finish_before_the_next_one_starts(index):
    cache = make_caches()[index]
    cache.add_sequence(0)
    cache.write(0, 0, kv(2), kv(2))
    with pytest.raises(ValueError, match="still in progress"):
        cache.write(0, 0, kv(1), kv(1))
    assert cache.layer_length(0, 0) == 2


def test_paged_write_out_of_blocks_changes_nothing():
    pool = BlockPool(3, 4, taken=[1])
    cache = PagedKVCache(pool, 2, 2, 16)
    cache.add_sequence(0)
    cache.write(0, 0, kv(6), kv(6))
    cache.write(0, 1, kv(6), kv(6))
    state = (pool.free_block_ids(), cache.block_table(0).block_ids, cache.length(0))
    with pytest.raises(OutOfBlocksError, match="free a finished sequence or preempt"):
        cache.write(0, 0, kv(3), kv(3))
    assert (pool.free_block_ids(), cache.block_table(0).block_ids, cache.length(0)) == state
    assert cache.layer_length(0, 0) == 6
    cache.write(0, 0, kv(2), kv(2))  # what fits still works
    assert cache.layer_length(0, 0) == 8


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
    with pytest.raises(ValueError, match="'read' or 'blockwise'"):
        model.forward({0: [1]}, cache, attention="fast")


def test_config_and_cache_construction_errors():
    with pytest.raises(ValueError, match="num_kv_heads"):
        TinyConfig(num_heads=4, num_kv_heads=3)
    with pytest.raises(ValueError, match="positive int"):
        TinyConfig(num_layers=0)
    with pytest.raises(ValueError, match="even for RoPE"):
        TinyConfig(d_model=12, num_heads=4, num_kv_heads=2)
    with pytest.raises(TypeError, match="BlockPool"):
        PagedKVCache("pool", 2, 2, 16)
    with pytest.raises(ValueError, match="num_layers"):
        ContiguousKVCache(0, 2, 16)
    with pytest.raises(TypeError, match="floating"):
        ContiguousKVCache(2, 2, 16, dtype=torch.int32)
    with pytest.raises(ValueError, match="non-empty list"):
        PagedKVCache(BlockPool(2, 2), 1, 1, 2).kernel_inputs([], 0)
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
