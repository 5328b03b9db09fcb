"""Making KV itself smaller (kvcourse.kv_formats): layouts, quantized formats, sink + window."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcourse.kv_formats import (
    DEEPSEEK_V3_LAYERS,
    DEEPSEEK_V3_MHA,
    DEEPSEEK_V3_MLA,
    FP8,
    FP16,
    INT4_G64,
    INT8_G128,
    KV_FORMATS,
    AttentionLayout,
    KVFormat,
    attention_layouts,
    effective_bits,
    kv_block_bytes_layout,
    kv_bytes_per_token_layout,
    layout_bytes_per_token,
    model_layout,
    requests_that_fit,
    sink_window_blocks,
    sink_window_kept_blocks,
    sink_window_tokens,
)
from kvcourse.sizing import kv_bytes_per_token, max_concurrent_requests
from kvcourse.specs import A100_40GB, A100_80GB, LLAMA2_70B, LLAMA31_8B, MODELS, OPT_13B


def test_own_layouts_agree_with_sizing():
    assert kv_bytes_per_token_layout(OPT_13B) == 819_200  # 2 × 40 × 40 × 128 × 2 B
    assert kv_bytes_per_token_layout(LLAMA2_70B) == 327_680  # 2 × 80 × 8 × 128 × 2 B
    for model in MODELS.values():
        assert kv_bytes_per_token_layout(model, model_layout(model)) == kv_bytes_per_token(model)
        assert kv_bytes_per_token_layout(model, None, FP8) == kv_bytes_per_token(model, "fp8")
    assert model_layout(OPT_13B) == AttentionLayout("MHA", 40, 128)
    assert model_layout(LLAMA2_70B).name == "GQA"


def test_effective_bits_count_the_group_metadata():
    assert effective_bits(FP16) == 16 and effective_bits(FP8) == 8
    assert effective_bits(INT4_G64) == 4.5  # 4 + (16 + 16) / 64
    assert effective_bits(INT8_G128) == 8.125  # 8 + 16 / 128
    assert effective_bits(KVFormat("INT4 g32", 4, 32, zero_point=True)) == 5.0
    assert effective_bits(KVFormat("INT4 g128", 4, 128, zero_point=True)) == 4.25
    assert [f.name for f in KV_FORMATS] == ["FP16", "FP8", "INT8 g128", "INT4 g64"]


def test_mla_against_mha_for_deepseek_v3():
    assert DEEPSEEK_V3_MLA.elements_per_layer == 512 + 64
    assert layout_bytes_per_token(DEEPSEEK_V3_LAYERS, DEEPSEEK_V3_MLA) == 61 * 576 * 2 == 70_272
    mha = layout_bytes_per_token(DEEPSEEK_V3_LAYERS, DEEPSEEK_V3_MHA)
    assert mha == 61 * 2 * 128 * 128 * 2 == 3_997_696
    assert round(mha / 70_272, 1) == 56.9


def test_layouts_of_one_model_shrink_in_order():
    mha, gqa, mqa, mla = attention_layouts(LLAMA31_8B)
    assert (mha.kv_heads, gqa.kv_heads, mqa.kv_heads) == (32, 8, 1)
    sizes = [kv_bytes_per_token_layout(LLAMA31_8B, x) for x in (mha, gqa, mqa, mla)]
    assert sizes == [524_288, 131_072, 16_384, 36_864]  # 32 layers; MLA 576 × 32 × 2
    assert kv_bytes_per_token_layout(LLAMA31_8B, gqa, INT4_G64) == 36_864  # = MLA in FP16
    assert attention_layouts(OPT_13B)[1].kv_heads == 8  # an MHA model gets 8 groups
    assert kv_block_bytes_layout(LLAMA31_8B, gqa) == 2 * 2**20  # 16 tokens × 128 KiB
    with pytest.raises(ValueError, match="between 2 and 16"):
        attention_layouts(LLAMA31_8B, gqa_heads=32)
    with pytest.raises(ValueError, match="divide"):
        attention_layouts(LLAMA31_8B, gqa_heads=6)


def test_requests_that_fit_reuses_the_sizing_capacity():
    for model, gpu in ((OPT_13B, A100_40GB), (LLAMA31_8B, A100_80GB)):
        for tokens in (2048, 4096):
            assert requests_that_fit(
                model, gpu, tokens_per_request=tokens
            ) == max_concurrent_requests(model, gpu, tokens)
    gqa = attention_layouts(LLAMA31_8B)[1]
    assert requests_that_fit(LLAMA31_8B, A100_80GB, gqa) == 104
    assert requests_that_fit(LLAMA31_8B, A100_80GB, gqa, FP8) == 208
    assert requests_that_fit(LLAMA2_70B, A100_80GB) == 0  # 70B's weights alone do not fit
    # 26 GB of weights and nothing kept back: the vLLM paper's 8 requests of 2048 on OPT-13B.
    assert requests_that_fit(
        OPT_13B, A100_40GB, weights=26 * 10**9, activation_fraction=0, tokens_per_request=2048
    ) == max_concurrent_requests(
        OPT_13B, A100_40GB, 2048, weights=26 * 10**9, activation_fraction=0
    )


def test_bad_arguments_say_what_to_pass():
    with pytest.raises(ValueError, match="both 0"):
        AttentionLayout("half", kv_heads=8)
    with pytest.raises(ValueError, match="caches nothing"):
        AttentionLayout("empty")
    with pytest.raises(ValueError, match="must be zero or more"):
        AttentionLayout("neg", latent_dim=-1)
    with pytest.raises(ValueError, match="bits must be positive"):
        KVFormat("zero", 0)
    with pytest.raises(ValueError, match="give group_size"):
        KVFormat("zp", 4, zero_point=True)
    with pytest.raises(TypeError, match="True or False"):
        KVFormat("zp", 4, 64, zero_point=1)
    with pytest.raises(TypeError, match="KVFormat"):
        effective_bits("fp8")
    with pytest.raises(TypeError, match="AttentionLayout"):
        layout_bytes_per_token(4, "MHA")
    with pytest.raises(TypeError, match="ModelSpec"):
        kv_bytes_per_token_layout("OPT-13B")
    with pytest.raises(TypeError, match="GPUSpec"):
        requests_that_fit(OPT_13B, "A100")
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        requests_that_fit(OPT_13B, A100_80GB, activation_fraction=1)
    with pytest.raises(ValueError, match="window must be positive"):
        sink_window_tokens(10, 4, 0)
    with pytest.raises(ValueError, match="num_tokens must be zero or more"):
        sink_window_blocks(-1)
    with pytest.raises(ValueError, match="block_size must be positive"):
        sink_window_blocks(10, block_size=0)


def test_sink_window_by_hand():
    assert sink_window_tokens(1000) == 1000  # nothing dropped yet
    assert sink_window_tokens(100_000) == 4 + 1024
    # Blocks of 16 after 2,049 tokens: block 0 (the sinks), then blocks 64..128 for the window
    # (tokens 1,025..2,048, whose oldest sits in block 64); blocks 1..63 were freed whole.
    kept = sink_window_kept_blocks(2049)
    assert kept == (0, *range(64, 129))
    assert sink_window_blocks(2049) == 66 and sink_window_blocks(2048) == 65
    assert sink_window_blocks(1028) == math.ceil(1028 / 16)  # all of it still fits
    assert sink_window_kept_blocks(0) == () and sink_window_blocks(5, sinks=0) == 1
    # A plain window without sinks frees the first block too.
    assert sink_window_kept_blocks(40, sinks=0, window=8, block_size=4) == (8, 9)


lengths = st.integers(min_value=0, max_value=5_000)
rules = st.tuples(
    st.integers(min_value=0, max_value=40),  # sinks
    st.integers(min_value=1, max_value=600),  # window
    st.sampled_from([1, 4, 16, 32]),  # block size
)


@given(lengths, rules)
def test_window_invariants(n, rule):
    sinks, window, size = rule
    kept = sink_window_tokens(n, sinks, window)
    blocks = sink_window_blocks(n, sinks, window, size)
    assert kept <= n and kept <= sinks + window
    assert blocks * size >= kept  # whole blocks hold every kept token
    assert blocks <= math.ceil(n / size)  # never more than the full cache's blocks
    ids = sink_window_kept_blocks(n, sinks, window, size)
    assert len(ids) == blocks and list(ids) == sorted(set(ids))
    # Brute force: a block is held iff one of its tokens is a sink or in the window.
    wanted = {t // size for t in range(n) if t < sinks or t >= n - window}
    assert set(ids) == wanted
    sink_blocks = math.ceil(sinks / size)
    window_ids = [b for b in ids if b >= sink_blocks]
    if window_ids and n >= window and (n - window) // size >= sink_blocks:
        # The window slides a block at a time: its blocks hold between W and W + B − 1 tokens.
        assert window <= n - window_ids[0] * size <= window + size - 1


@given(lengths, rules)
def test_window_memory_is_monotone_in_length(n, rule):
    sinks, window, size = rule
    assert sink_window_tokens(n + 1, sinks, window) >= sink_window_tokens(n, sinks, window)
    assert sink_window_tokens(n + 1, sinks, window) <= n + 1

    def freed(length):
        held = set(sink_window_kept_blocks(length, sinks, window, size))
        return set(range(math.ceil(length / size))) - held

    # The held count dips when a block leaves the window, but a freed block never comes back,
    # and the full cache never holds fewer blocks than the rule.
    assert freed(n) <= freed(n + 1)
    full = math.ceil((n + 1) / size)
    assert sink_window_blocks(n + 1, sinks, window, size) <= full
