"""The Triton paged decode-attention kernel (§4) against its PyTorch reference.

On a machine without a GPU the kernel runs in Triton's interpreter, which is slow, so the problems
here are small; they still cover every page size class (1, 2, 16, 64, 128), tiles that span pages
and tiles inside one page, GQA ratios 1/4/8, uneven batches, the split-KV path with empty splits,
and head sizes that are not powers of two (80, 96, 112, 192: padded inside the kernel). The
interpreter computes bfloat16 ``tl.dot`` wrongly, so kernel accuracy is checked in float32 and
float16 (bfloat16 inputs are widened by the wrapper there). On a GPU the same tests run the
compiled kernel, plus bfloat16.
"""

from __future__ import annotations

import math

import pytest
import torch

from kvcourse.attention import (
    KERNEL_HEAD_DIMS,
    MAX_HEAD_DIM,
    MAX_SPLITS,
    LaunchConfig,
    choose_launch_config,
    head_dim_pad,
    paged_decode_attention,
    paged_decode_attention_reference,
)
from kvcourse.attention import backend as accel
from kvcourse.attention import paged_decode as pak

pytestmark = pytest.mark.slow  # the kernel runs in the Triton interpreter

DEVICE = "cuda" if accel.detect_backend().name == "triton-gpu" else "cpu"
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}


def make_problem(
    seq_lens: list[int],
    *,
    q_heads: int = 8,
    kv_heads: int = 2,
    head_dim: int = 32,
    block_size: int = 16,
    dtype: torch.dtype = torch.float32,
    spare_blocks: int = 3,
    seed: int = 0,
) -> tuple[torch.Tensor, ...]:
    """A random paged cache: shuffled physical pages, -1 past each sequence's last page, and NaN in
    every slot no sequence uses (so a kernel that reads past a sequence's end shows NaN)."""
    gen = torch.Generator().manual_seed(seed)
    pages = [math.ceil(n / block_size) for n in seq_lens]
    num_blocks = sum(pages) + spare_blocks
    max_blocks = max(pages) + 1  # one entry more than any sequence needs
    shape = (num_blocks, block_size, kv_heads, head_dim)
    k_cache = torch.full(shape, float("nan"))
    v_cache = torch.full(shape, float("nan"))
    block_tables = torch.full((len(seq_lens), max_blocks), -1, dtype=torch.int32)
    physical = torch.randperm(num_blocks, generator=gen)
    used = 0
    for b, (n, p) in enumerate(zip(seq_lens, pages, strict=True)):
        ids = physical[used : used + p]
        used += p
        block_tables[b, :p] = ids.to(torch.int32)
        k = torch.randn(n, kv_heads, head_dim, generator=gen)
        v = torch.randn(n, kv_heads, head_dim, generator=gen)
        for j in range(n):
            k_cache[ids[j // block_size], j % block_size] = k[j]
            v_cache[ids[j // block_size], j % block_size] = v[j]
    q = torch.randn(len(seq_lens), q_heads, head_dim, generator=gen)
    lens = torch.tensor(seq_lens, dtype=torch.int32)
    tensors = [q.to(dtype), k_cache.to(dtype), v_cache.to(dtype), block_tables, lens]
    return tuple(t.to(DEVICE) for t in tensors)


def reference_fp32(q, k_cache, v_cache, block_tables, seq_lens, **kwargs) -> torch.Tensor:
    """The oracle on the same (rounded) inputs, computed and returned in float32."""
    return paged_decode_attention_reference(
        q.float(), k_cache.float(), v_cache.float(), block_tables, seq_lens, **kwargs
    )


def assert_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, case: str) -> None:
    assert out.dtype == dtype, f"{case}: output dtype {out.dtype}, expected {dtype}"
    assert out.shape == ref.shape, f"{case}: output shape {tuple(out.shape)} != {tuple(ref.shape)}"
    assert torch.isfinite(out).all(), f"{case}: output has NaN/inf (read past a sequence's end?)"
    error = (out.float() - ref).abs().max().item()
    assert error <= TOLERANCE[dtype], f"{case}: max |kernel - reference| = {error:.3g}"


# (block_size, seq_lens, q_heads, kv_heads, head_dim, tile, splits): every page size class, tiles
# spanning pages (tile > block) and inside one page (tile < block), GQA 1/4/8, lengths of 1, exact
# multiples of the page size and very uneven batches, one program per sequence and split-KV.
CASES = [
    (1, [1, 37, 5], 8, 2, 32, 16, 1),
    (1, [1, 37, 5], 8, 2, 32, 16, 4),
    (2, [1, 300, 17], 4, 4, 16, 32, 1),
    (2, [1, 300, 17], 4, 4, 16, 32, 5),
    (16, [16, 64, 48], 8, 1, 64, 32, 1),
    (16, [16, 64, 48], 8, 1, 64, 32, 3),
    (16, [1, 300, 17], 8, 2, 32, 64, 1),
    (16, [1, 300, 17], 8, 2, 32, 64, 7),
    (64, [1, 300, 17], 8, 2, 32, 16, 1),
    (64, [1, 300, 17], 8, 2, 32, 16, 4),
    (128, [128, 256, 1], 8, 1, 32, 32, 1),
    (128, [128, 256, 1], 8, 1, 32, 32, 2),
    (128, [1, 300, 17], 4, 4, 16, 128, 3),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize(
    "block_size, seq_lens, q_heads, kv_heads, head_dim, tile, splits",
    CASES,
    ids=[f"B{c[0]}-len{'_'.join(map(str, c[1]))}-gqa{c[2] // c[3]}-t{c[5]}-s{c[6]}" for c in CASES],
)
def test_kernel_matches_reference(
    block_size, seq_lens, q_heads, kv_heads, head_dim, tile, splits, dtype
):
    problem = make_problem(
        seq_lens, q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim, block_size=block_size,
        dtype=dtype,
    )  # fmt: skip
    config = LaunchConfig(tile_tokens=tile, num_splits=splits)
    out = paged_decode_attention(*problem, config=config)
    case = f"block {block_size}, lens {seq_lens}, GQA {q_heads}/{kv_heads}, {config}"
    assert_close(out, reference_fp32(*problem), dtype, case)


@pytest.mark.parametrize("splits", [1, 3], ids=["one-program", "split-kv"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("head_dim", [80, 96, 112, 192])
def test_head_dims_that_are_not_powers_of_two(head_dim, dtype, splits):
    """Padded to the next power of two inside the kernel, not copied: q, K and V are views of wider
    tensors whose extra columns hold NaN, so a kernel that read past head_dim would show NaN."""
    problem = make_problem([5, 40, 17], q_heads=4, kv_heads=2, head_dim=head_dim, block_size=8,
                           dtype=dtype)  # fmt: skip
    q, k_cache, v_cache, block_tables, seq_lens = problem
    wide = head_dim_pad(head_dim)
    views = []
    for t in (q, k_cache, v_cache):
        storage = torch.full((*t.shape[:-1], wide), float("nan"), dtype=dtype, device=DEVICE)
        storage[..., :head_dim] = t
        views.append(storage[..., :head_dim])
    out = paged_decode_attention(*views, block_tables, seq_lens, config=LaunchConfig(16, splits))
    case = f"head_dim {head_dim} (computed as {wide}), {dtype}, {splits} split(s)"
    assert_close(out, reference_fp32(*problem), dtype, case)


def test_default_configuration_and_num_splits_override():
    problem = make_problem([5, 100, 33], block_size=8, q_heads=4, kv_heads=1)
    ref = reference_fp32(*problem)
    assert_close(paged_decode_attention(*problem), ref, torch.float32, "default configuration")
    for splits in (2, 6):
        out = paged_decode_attention(*problem, num_splits=splits)
        assert_close(out, ref, torch.float32, f"num_splits={splits}")


def test_more_splits_than_tokens_leaves_empty_splits_harmless():
    problem = make_problem([1, 2, 1], block_size=4, q_heads=4, kv_heads=2)
    out = paged_decode_attention(*problem, config=LaunchConfig(tile_tokens=16, num_splits=16))
    assert_close(out, reference_fp32(*problem), torch.float32, "16 splits of 1-2 tokens")


def test_splits_beyond_one_combine_chunk():
    # head_dim 128 merges 32 partial results per combine iteration; 40 splits of 2 tiles each
    # leave the last 8 empty, in the second chunk.
    problem = make_problem([1000], block_size=16, q_heads=4, kv_heads=2, head_dim=128)
    out = paged_decode_attention(*problem, config=LaunchConfig(tile_tokens=16, num_splits=40))
    assert_close(out, reference_fp32(*problem), torch.float32, "40 splits, head_dim 128")


def test_single_long_sequence_split_many_ways():
    problem = make_problem([1000], block_size=16, q_heads=8, kv_heads=1, head_dim=16)
    ref = reference_fp32(*problem)
    for splits in (1, 9, 32):
        out = paged_decode_attention(
            *problem, config=LaunchConfig(tile_tokens=32, num_splits=splits)
        )
        assert_close(out, ref, torch.float32, f"1000 tokens, {splits} splits")


def test_custom_scale_int64_lengths_and_strided_views():
    q, k_cache, v_cache, block_tables, seq_lens = make_problem([9, 70], block_size=8)
    # K and V as two views of one [num_blocks, 2, block, heads, dim] pool, q as a transposed copy.
    pool = torch.stack([k_cache, v_cache], dim=1)
    q_strided = q.transpose(0, 1).contiguous().transpose(0, 1)
    args = (q_strided, pool[:, 0], pool[:, 1], block_tables, seq_lens.long())
    assert not q_strided.is_contiguous() and not pool[:, 0].is_contiguous()
    out = paged_decode_attention(*args, scale=0.3, config=LaunchConfig(16, 2))
    assert_close(out, reference_fp32(*args, scale=0.3), torch.float32, "strided views, scale 0.3")


def test_strided_block_table_and_lengths():
    q, k_cache, v_cache, block_tables, seq_lens = make_problem([30, 7, 64], block_size=8)
    table = block_tables.t().contiguous().t()  # column-major: entries of a row are strided
    lens = torch.stack([seq_lens, seq_lens], dim=1)[:, 0]  # every other element of a buffer
    assert table.stride(1) != 1 and lens.stride(0) != 1
    out = paged_decode_attention(q, k_cache, v_cache, table, lens, config=LaunchConfig(16, 2))
    ref = reference_fp32(q, k_cache, v_cache, block_tables, seq_lens)
    assert_close(out, ref, torch.float32, "column-major block table, strided seq_lens")


def test_bfloat16_inputs_give_bfloat16_output():
    problem = make_problem([3, 77], block_size=16, dtype=torch.bfloat16)
    out = paged_decode_attention(*problem, config=LaunchConfig(32, 2))
    assert_close(out, reference_fp32(*problem), torch.bfloat16, "bf16")


def test_empty_batch():
    q, k_cache, v_cache, _, _ = make_problem([4])
    empty_tables = torch.zeros((0, 1), dtype=torch.int32, device=DEVICE)
    empty_lens = torch.zeros((0,), dtype=torch.int32, device=DEVICE)
    out = paged_decode_attention(q[:0], k_cache, v_cache, empty_tables, empty_lens)
    assert out.shape == (0, q.shape[1], q.shape[2])


def test_falls_back_to_the_reference_without_triton(monkeypatch):
    problem = make_problem([5, 40], block_size=4)
    monkeypatch.setattr(pak, "_kernels_loaded", False)
    monkeypatch.setattr(pak, "_kernels_module", None)
    monkeypatch.setattr(pak, "load_triton", lambda: None)
    out = paged_decode_attention(*problem)
    assert torch.equal(out, paged_decode_attention_reference(*problem))


def test_reference_equals_contiguous_attention_in_float64():
    """The oracle itself: paging must not change the result (§4: equal to ~1e-15 in float64)."""
    problem = make_problem([1, 23, 64], block_size=8, q_heads=6, kv_heads=3, dtype=torch.float64)
    q, k_cache, v_cache, block_tables, seq_lens = problem
    out = paged_decode_attention_reference(*problem)
    for b, n in enumerate(seq_lens.tolist()):
        pages = block_tables[b, : math.ceil(n / 8)].long()
        k = k_cache[pages].flatten(0, 1)[:n].repeat_interleave(2, dim=1)  # [n, q_heads, d]
        v = v_cache[pages].flatten(0, 1)[:n].repeat_interleave(2, dim=1)
        scores = torch.einsum("hd,nhd->hn", q[b], k) / math.sqrt(q.shape[-1])
        expected = torch.einsum("hn,nhd->hd", torch.softmax(scores, dim=-1), v)
        assert (out[b] - expected).abs().max().item() < 1e-12


# ------------------------------------------------------------------------------------------------
# Launch configurations
# ------------------------------------------------------------------------------------------------


def h200_config(batch: int, context: int) -> LaunchConfig:
    return choose_launch_config(
        batch=batch, q_heads=32, kv_heads=8, head_dim=128, max_context=context,
        dtype=torch.bfloat16, num_sms=132,
    )  # fmt: skip


def test_launch_plans_for_the_benchmark_shapes():
    assert h200_config(128, 1024).num_splits == 1  # 1024 programs already fill the GPU
    assert h200_config(1, 4096).num_splits >= 16  # one sequence: split the context
    assert 1 < h200_config(8, 4096).num_splits <= 32
    for batch, context in [(1, 4096), (8, 4096), (64, 4096), (32, 16384), (128, 1024)]:
        config = h200_config(batch, context)
        assert config.tile_tokens == 64
        tiles = context // config.tile_tokens
        assert tiles / config.num_splits >= 2, f"{batch}x{context}: splits too short, {config}"


def test_padded_heads_are_planned_as_wide_as_the_kernel_computes_them():
    assert [head_dim_pad(d) for d in (1, 16, 17, 80, 96, 112, 128, 192, 256)] == [
        16, 16, 32, 128, 128, 128, 128, 256, 256,
    ]  # fmt: skip
    assert KERNEL_HEAD_DIMS == tuple(range(1, MAX_HEAD_DIM + 1))
    for head_dim, as_wide_as in [(80, 128), (112, 128), (192, 256)]:
        plans = [
            choose_launch_config(
                batch=8,
                q_heads=32,
                kv_heads=8,
                head_dim=d,
                max_context=4096,
                dtype=torch.bfloat16,
                num_sms=132,
            )  # fmt: skip
            for d in (head_dim, as_wide_as)
        ]
        assert plans[0] == plans[1]


def test_interpreter_uses_one_configuration_and_tiles_scale_with_row_bytes():
    config = choose_launch_config(
        batch=1, q_heads=32, kv_heads=8, head_dim=128, max_context=4096, dtype=torch.float16,
        num_sms=None,
    )  # fmt: skip
    assert config.num_splits == 1
    wide = choose_launch_config(
        batch=1, q_heads=32, kv_heads=8, head_dim=256, max_context=4096, dtype=torch.float32,
        num_sms=132,
    )  # fmt: skip
    assert wide.tile_tokens == 16


@pytest.mark.parametrize(
    "kwargs",
    [dict(tile_tokens=8), dict(tile_tokens=64, num_splits=0), dict(tile_tokens=64, num_warps=3)],
)
def test_launch_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        LaunchConfig(**kwargs)


# ------------------------------------------------------------------------------------------------
# Argument checks: each says what was wrong
# ------------------------------------------------------------------------------------------------


def replaced(problem, index, value):
    args = list(problem)
    args[index] = value
    return args


BAD_ARGUMENTS = [
    ("q not a tensor", lambda p: replaced(p, 0, p[0].tolist()), TypeError, "q must be a torch"),
    ("q rank", lambda p: replaced(p, 0, p[0][:, None]), ValueError, "q must have shape"),
    ("k/v shapes", lambda p: replaced(p, 2, p[2][:-1]), ValueError, "same shape"),
    ("batch", lambda p: replaced(p, 4, p[4][:1]), ValueError, "batch size"),
    ("head_dim", lambda p: replaced(p, 0, p[0][..., :16]), ValueError, "head_dim"),
    ("GQA ratio", lambda p: replaced(p, 0, p[0][:, :3]), ValueError, "multiple of"),
    ("dtypes", lambda p: replaced(p, 1, p[1].half()), TypeError, "same dtype"),
    ("float64", lambda p: [t.double() if t.is_floating_point() else t for t in p], TypeError,
     "Triton kernel takes"),
    ("int64 table", lambda p: replaced(p, 3, p[3].long()), TypeError, "int32"),
    ("float lens", lambda p: replaced(p, 4, p[4].float()), TypeError, "seq_lens must be int"),
    ("seq_len 0", lambda p: replaced(p, 4, torch.zeros_like(p[4])), ValueError, "at least one"),
    ("seq_len too long", lambda p: replaced(p, 4, p[4] * 100), ValueError, "exceeds"),
    ("block id -1", lambda p: replaced(p, 3, torch.full_like(p[3], -1)), ValueError,
     "is not a page"),
    ("block id too big", lambda p: replaced(p, 3, p[3] + 1000), ValueError, "is not a page"),
    ("block size 3", lambda p: replaced(replaced(p, 1, p[1][:, :3]), 2, p[2][:, :3]), ValueError,
     "power of two"),
    ("block size 256", lambda p: replaced(replaced(p, 1, p[1].repeat(1, 16, 1, 1)), 2,
     p[2].repeat(1, 16, 1, 1)), ValueError, "power of two"),
    ("head_dim 320", lambda p: [t.repeat(*[1] * (t.dim() - 1), 5) for t in p[:3]] + list(p[3:]),
     ValueError, "head_dim from 1 to 256"),
    ("devices", lambda p: replaced(p, 0, p[0].to("meta")), ValueError, "one device"),
]  # fmt: skip


@pytest.mark.parametrize(
    "make_args, error, message", [c[1:] for c in BAD_ARGUMENTS], ids=[c[0] for c in BAD_ARGUMENTS]
)
def test_wrapper_rejects_bad_arguments_with_a_clear_message(make_args, error, message):
    problem = make_problem([3, 40], q_heads=4, kv_heads=2, head_dim=64, block_size=16)
    with pytest.raises(error, match=message):  # validate=True: checked on a GPU too
        paged_decode_attention(*make_args(problem), validate=True)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "0.1", True])
def test_bad_scale_is_rejected(bad):
    problem = make_problem([3])
    with pytest.raises(ValueError, match="scale"):
        paged_decode_attention(*problem, scale=bad)


@pytest.mark.parametrize("bad", [0, -2, MAX_SPLITS + 1, True, 2.0])
def test_bad_num_splits_is_rejected(bad):
    problem = make_problem([3])
    with pytest.raises(ValueError, match="num_splits"):
        paged_decode_attention(*problem, num_splits=bad)


def test_bad_config_type_is_rejected():
    problem = make_problem([3])
    with pytest.raises(TypeError, match="LaunchConfig"):
        paged_decode_attention(*problem, config={"tile_tokens": 32})


def test_reference_checks_values_too():
    problem = make_problem([3, 40])
    with pytest.raises(ValueError, match="at least one"):
        paged_decode_attention_reference(*replaced(problem, 4, torch.zeros_like(problem[4])))


@pytest.mark.parametrize("seed", range(16))
def test_random_problems(seed):
    """Random page sizes, lengths, GQA ratios, tiles and splits, each a fresh shuffled pool."""
    rng = torch.Generator().manual_seed(1000 + seed)

    def pick(options):
        return options[int(torch.randint(len(options), (1,), generator=rng))]

    block_size = pick([1, 2, 4, 8, 16, 32, 64, 128])
    kv_heads, group = pick([1, 2]), pick([1, 2, 4, 8])
    batch = pick([1, 2, 3, 4])
    seq_lens = [int(torch.randint(1, 200, (1,), generator=rng)) for _ in range(batch)]
    dtype = pick([torch.float32, torch.float16])
    problem = make_problem(
        seq_lens, q_heads=kv_heads * group, kv_heads=kv_heads, head_dim=pick([16, 32, 64]),
        block_size=block_size, dtype=dtype, seed=seed,
    )  # fmt: skip
    config = LaunchConfig(tile_tokens=pick([16, 32, 64, 128]), num_splits=pick([1, 2, 3, 8]))
    out = paged_decode_attention(*problem, config=config)
    case = f"seed {seed}: block {block_size}, lens {seq_lens}, GQA {group}, {config}"
    assert_close(out, reference_fp32(*problem), dtype, case)
