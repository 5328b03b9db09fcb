"""Tests for kvcourse.generation.token_eviction (§10): H2O's choice of victim on hand-made
attention (which tokens stay, the budget, the tie rule), the rules on the tiny transformer
(equal to the full cache when the budget covers the text, the budget held per layer and KV
head), and the sweep against the full cache."""

from __future__ import annotations

import pytest
import torch

from kvcourse.generation import (
    attention_map,
    attention_shares,
    evicted_decode,
    eviction_sweep,
    h2o_kept,
    h2o_victim,
)
from kvcourse.model import TinyTransformer

#: Row t: what token t's query pays to tokens 0..t. Token 1 keeps drawing attention (a heavy
#: hitter); token 2 and token 3 draw little. Values are exact in binary.
HAND_MADE = [
    [1.0, 0.0, 0.0, 0.0, 0.0],
    [0.5, 0.5, 0.0, 0.0, 0.0],
    [0.25, 0.625, 0.125, 0.0, 0.0],
    [0.125, 0.5, 0.125, 0.25, 0.0],
    [0.125, 0.5, 0.0, 0.25, 0.125],
]


def test_h2o_keeps_the_heavy_hitter_and_the_newest_token():
    kept = h2o_kept(HAND_MADE, budget=3, recent=1)
    # t=3: scores 0: 1.75, 1: 1.125, 2: 0.125 -> token 2 leaves; t=4: token 3 (0.25) leaves.
    assert kept == [(0,), (0, 1), (0, 1, 2), (0, 1, 3), (0, 1, 4)]
    assert all(len(k) <= 3 for k in kept)


def test_the_recent_window_is_never_evicted():
    # recent = 2: at t = 3 the window is tokens 2 and 3, so token 1 (score 1.125) would be the
    # lowest outside it... but token 0 is higher, so 1 leaves, although token 2 scores less.
    kept = h2o_kept(HAND_MADE, budget=3, recent=2)
    assert kept[3] == (0, 2, 3)
    for t, k in enumerate(kept):
        assert t in k and len(k) <= 3


def test_ties_go_to_the_oldest_token():
    kept = torch.tensor([True, True, True, True])
    assert h2o_victim(torch.tensor([0.5, 0.5, 0.5, 0.0]), kept, 3) == 0
    assert h2o_victim(torch.tensor([0.75, 0.25, 0.25, 0.0]), kept, 3) == 1
    # An evicted token is not a candidate, whatever its score.
    assert (
        h2o_victim(torch.tensor([0.0, 0.25, 0.5, 0.0]), torch.tensor([False, *[True] * 3]), 3) == 1
    )


def test_h2o_kept_checks_its_arguments():
    with pytest.raises(ValueError, match="square"):
        h2o_kept([[1.0, 0.0]], budget=2)
    with pytest.raises(ValueError, match="below the budget"):
        h2o_kept(HAND_MADE, budget=2, recent=2)
    with pytest.raises(ValueError, match="nothing to evict"):
        h2o_victim(torch.tensor([1.0, 2.0]), torch.tensor([True, True]), 0)


MODEL = TinyTransformer(seed=0)
IDS = torch.randint(128, (40,), generator=torch.Generator().manual_seed(3)).tolist()


def test_the_full_rule_gives_the_models_own_logits():
    run = evicted_decode(MODEL, IDS, "full")
    cache = MODEL.contiguous_cache()
    cache.add_sequence(0)
    expected = torch.cat([MODEL.forward({0: [i]}, cache)[0] for i in IDS])
    assert (run.logits - expected).abs().max().item() <= 1e-12  # observed: exactly 0


@pytest.mark.parametrize("rule", ["h2o", "sink_window"])
def test_a_budget_covering_the_text_equals_the_full_cache_exactly(rule):
    full = evicted_decode(MODEL, IDS, "full")
    for budget in (len(IDS), len(IDS) + 5):
        run = evicted_decode(MODEL, IDS, rule, budget)
        assert torch.equal(run.logits, full.logits)
        assert bool(run.kept.all())


def test_each_layer_and_kv_head_keeps_the_budget():
    h2o = evicted_decode(MODEL, IDS, "h2o", 12, recent=4, record_attention=True)
    assert h2o.kept.sum(dim=-1).tolist() == [[12, 12], [12, 12]]
    assert bool(h2o.kept[..., -4:].all())  # the recent window
    sw = evicted_decode(MODEL, IDS, "sink_window", 12, sinks=3)
    expected = torch.zeros(len(IDS), dtype=torch.bool)
    expected[:3] = True
    expected[-9:] = True
    assert bool((sw.kept == expected).all())
    assert not torch.equal(h2o.logits, sw.logits)


def test_the_model_evicts_what_h2o_kept_says_on_its_own_attention():
    run = evicted_decode(MODEL, IDS, "h2o", 10, recent=3, record_attention=True)
    group = MODEL.config.num_heads // MODEL.config.num_kv_heads
    for layer in range(MODEL.config.num_layers):
        for head in range(MODEL.config.num_kv_heads):
            rows = run.attention[layer, head * group : (head + 1) * group].sum(dim=0)
            final = h2o_kept(rows, 10, 3)[-1]
            assert final == tuple(torch.nonzero(run.kept[layer, head]).flatten().tolist())


def test_evicted_decode_checks_its_arguments():
    with pytest.raises(ValueError, match="rule must be one of"):
        evicted_decode(MODEL, IDS, "lru", 8)
    with pytest.raises(ValueError, match="needs a budget"):
        evicted_decode(MODEL, IDS, "h2o")
    with pytest.raises(ValueError, match="sinks"):
        evicted_decode(MODEL, IDS, "sink_window", 4, sinks=4)
    with pytest.raises(ValueError, match="token ids"):
        evicted_decode(MODEL, [0, 999], "full")


def test_the_sweep_scores_each_rule_against_the_full_cache():
    points = eviction_sweep(MODEL, IDS, [8, len(IDS)], score_from=10)
    assert [(p.rule, p.budget) for p in points] == [
        ("sink_window", 8),
        ("sink_window", len(IDS)),
        ("h2o", 8),
        ("h2o", len(IDS)),
    ]
    for p in points:
        if p.budget == len(IDS):
            # rows of one batched run: rounding of the batched products only (observed 2e-15)
            assert p.max_abs_error <= 1e-12 and p.top1_agreement == 1.0
        else:
            assert p.max_abs_error > 0.0 and p.mean_kl > 0.0 and p.top1_agreement < 1.0
    with pytest.raises(ValueError, match="leaves no position"):
        eviction_sweep(MODEL, IDS, [8], score_from=len(IDS))


def test_attention_map_rows_are_distributions():
    a = attention_map(MODEL, IDS[:12], layer=1)
    assert a.shape == (12, 12)
    assert torch.allclose(a.sum(dim=1), torch.ones(12, dtype=torch.float64))
    assert bool((a.triu(1) == 0).all())
    with pytest.raises(ValueError, match="layer must be"):
        attention_map(MODEL, IDS[:4], layer=2)


def test_attention_shares_reads_sink_previous_token_and_concentration():
    a = torch.tensor(
        [
            [1.0, 0.0, 0.0, 0.0],
            [0.5, 0.5, 0.0, 0.0],
            [0.5, 0.25, 0.25, 0.0],
            [0.25, 0.25, 0.5, 0.0],
        ]
    )
    shares = attention_shares(a, top=2, skip=2)
    assert (shares.first, shares.previous, shares.top) == (0.375, 0.375, 0.75)
    with pytest.raises(ValueError, match="square"):
        attention_shares(a, skip=4)
