"""Token eviction on the tiny transformer (§10): H2O's heavy hitters, sinks + window, full cache.

A token-eviction rule keeps at most ``budget`` tokens' K and V per layer and KV head, and
decides which to drop as the sequence grows:

* ``"full"``: keeps everything (the reference);
* ``"sink_window"``: StreamingLLM's rule (:func:`kvcourse.kv_formats.sink_window_tokens`): the
  first ``sinks`` tokens and the most recent ones, ``budget − sinks`` of them;
* ``"h2o"``: H2O (Zhang et al., NeurIPS 2023, "Heavy-Hitter Oracle"): the ``recent`` newest
  tokens, plus the ``budget − recent`` older ones with the largest *accumulated attention*, the
  attention weight each token has received from every query so far, summed over the query heads
  that read its KV head.

When to evict, for both rules: just before token ``t`` joins a cache that already holds
``budget`` tokens, one token leaves, so the query of ``t`` attends to at most ``budget`` tokens,
itself included. H2O's victim is the kept token outside the recent window (the ``recent − 1``
tokens before ``t``, with ``t`` itself the window's newest) whose accumulated attention is the
smallest; **ties go to the oldest** (the lowest position leaves first). Every layer and KV head
keeps its own set, since each sees its own attention.

:func:`h2o_kept` runs the rule on a hand-made attention matrix (no model);
:func:`evicted_decode` runs the trained or seeded tiny transformer token by token (teacher-forced
on a given text) under a rule; :func:`eviction_sweep` compares the rules with the full cache at
several budgets: largest and mean logit error, KL divergence and top-1 agreement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from kvcourse._checks import check_count, check_positive_int
from kvcourse.model import TinyTransformer

__all__ = [
    "AttentionShares",
    "EvictionPoint",
    "EvictionRun",
    "Rule",
    "attention_map",
    "attention_shares",
    "evicted_decode",
    "eviction_sweep",
    "h2o_kept",
    "h2o_victim",
]

#: The eviction rules :func:`evicted_decode` knows.
Rule = Literal["full", "sink_window", "h2o"]
RULES: tuple[str, ...] = ("full", "sink_window", "h2o")


def h2o_victim(scores: torch.Tensor, kept: torch.Tensor, protected_from: int) -> int:
    """The position H2O evicts: among ``kept`` positions below ``protected_from`` (the recent
    window starts there), the one with the smallest accumulated attention ``scores``; ties go
    to the oldest (lowest position).

    >>> h2o_victim(torch.tensor([5.0, 1.0, 1.0, 0.2]), torch.tensor([True] * 4), 3)
    1
    """
    candidates = kept.clone()
    candidates[protected_from:] = False
    if not bool(candidates.any()):
        raise ValueError(
            "no token outside the recent window is kept, so H2O has nothing to evict; "
            "the budget must exceed the recent window"
        )
    low = scores[candidates].min()
    return int(torch.nonzero(candidates & (scores == low))[0, 0])


def _check_budget(budget: int, recent: int | None, sinks: int, rule: str) -> tuple[int, int, int]:
    budget = check_positive_int("budget", budget, "e.g. 32 tokens")
    sinks = check_count("sinks", sinks)
    recent = budget // 2 if recent is None else check_positive_int("recent", recent, "e.g. 16")
    if rule == "h2o" and not 1 <= recent < budget:
        raise ValueError(
            f"H2O's recent window ({recent}) must be at least 1 and below the budget ({budget}), "
            f"so that some of the budget is left for heavy hitters"
        )
    if rule == "sink_window" and sinks >= budget:
        raise ValueError(f"sinks ({sinks}) must be below the budget ({budget}) to leave a window")
    return budget, recent, sinks


def h2o_kept(
    attention: Sequence[Sequence[float]] | torch.Tensor, budget: int, recent: int | None = None
) -> list[tuple[int, ...]]:
    """H2O on a hand-made attention matrix: after each step ``t``, the positions kept.

    Row ``t`` of the square ``attention`` is what the query of token ``t`` pays to tokens
    ``0..t``; only the entries of tokens still kept count (an evicted token can receive nothing).
    Step ``t``: if ``budget`` tokens are kept, evict :func:`h2o_victim` (recent window: the
    ``recent − 1`` tokens before ``t``); then ``t`` joins and row ``t`` adds to the scores.
    ``recent`` defaults to half the budget.

    >>> h2o_kept([[1, 0, 0], [0.9, 0.1, 0], [0.5, 0.2, 0.3]], budget=2, recent=1)
    [(0,), (0, 1), (0, 2)]
    """
    a = torch.as_tensor(attention, dtype=torch.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"attention must be a square matrix (query × key), got {tuple(a.shape)}")
    budget, recent, _ = _check_budget(budget, recent, 0, "h2o")
    n = a.shape[0]
    scores = torch.zeros(n, dtype=torch.float64)
    kept = torch.zeros(n, dtype=torch.bool)
    history = []
    for t in range(n):
        if int(kept.sum()) >= budget:
            kept[h2o_victim(scores, kept, t - (recent - 1))] = False
        kept[t] = True
        scores[: t + 1] += torch.where(kept[: t + 1], a[t, : t + 1], 0.0)
        history.append(tuple(torch.nonzero(kept).flatten().tolist()))
    return history


@dataclass(frozen=True)
class EvictionRun:
    """One teacher-forced pass under a rule: ``logits[t]`` predicts token ``t + 1``; ``kept``
    [layers, kv_heads, tokens] is what each layer and KV head held at the end; ``attention``
    [layers, query_heads, tokens, tokens] is every query's attention (when it was recorded)."""

    rule: str
    budget: int
    logits: torch.Tensor
    kept: torch.Tensor
    attention: torch.Tensor | None


def evicted_decode(
    model: TinyTransformer,
    ids: Sequence[int],
    rule: Rule = "h2o",
    budget: int | None = None,
    *,
    recent: int | None = None,
    sinks: int = 4,
    record_attention: bool = False,
) -> EvictionRun:
    """Run ``ids`` through ``model`` one token at a time, keeping at most ``budget`` tokens per
    layer and KV head under ``rule`` (see the module docstring); every token is fed as given, so
    all rules see the same text. The arithmetic is :class:`~kvcourse.model.TinyTransformer`'s,
    with evicted tokens masked out of the softmax, so ``"full"`` gives the model's own logits.
    H2O's ``recent`` window is half the budget unless given."""
    ids = _check_ids(model, ids)
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    if budget is None:
        if rule != "full":
            raise ValueError(f"rule {rule!r} needs a budget (tokens kept per layer and KV head)")
        budget = len(ids)
    setting = (rule, *_check_budget(budget, recent, sinks, rule))
    logits, kept, attention = _decode_together(model, ids, [setting], record_attention)
    return EvictionRun(
        rule, setting[1], logits[0], kept[0], attention[0] if record_attention else None
    )


def _check_ids(model: TinyTransformer, ids: Sequence[int]) -> list[int]:
    vocab = model.config.vocab_size
    out = [int(i) for i in ids]
    if not out or not all(0 <= i < vocab for i in out):
        raise ValueError(f"ids must be a non-empty list of token ids in 0..{vocab - 1}")
    return out


def _decode_together(
    model: TinyTransformer,
    ids: list[int],
    settings: Sequence[tuple[str, int, int, int]],
    record_attention: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every setting ``(rule, budget, recent, sinks)`` run side by side, one row each, so a
    sweep costs about one pass; returns logits [R, n, vocab], kept [R, layers, kv_heads, n] and
    the attention [R, layers, query_heads, n, n] (zeros unless recorded). Runs on one CPU
    thread: each product is a few rows, and splitting it over threads only costs time (on a busy
    2-core machine, ten times as much)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _decode_rows(model, ids, settings, record_attention)
    finally:
        torch.set_num_threads(threads)


def _decode_rows(
    model: TinyTransformer,
    ids: list[int],
    settings: Sequence[tuple[str, int, int, int]],
    record_attention: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    c, n, r = model.config, len(ids), len(settings)
    group, scale = c.num_heads // c.num_kv_heads, 1.0 / math.sqrt(c.head_dim)
    evicts = torch.tensor([rule != "full" for rule, *_ in settings])
    budgets = torch.tensor([b for _, b, _, _ in settings])
    recents = torch.tensor([w for _, _, w, _ in settings])
    sinks = torch.tensor([s for *_, s in settings])
    is_h2o = torch.tensor([rule == "h2o" for rule, *_ in settings])
    keys = torch.zeros(r, c.num_layers, n, c.num_kv_heads, c.head_dim, dtype=torch.float64)
    values = torch.zeros_like(keys)
    kept = torch.zeros(r, c.num_layers, c.num_kv_heads, n, dtype=torch.bool)
    scores = torch.zeros(kept.shape, dtype=torch.float64)
    size = (r, c.num_layers, c.num_heads, n, n) if record_attention else (r, 1, 1, 1, 1)
    attn = torch.zeros(size, dtype=torch.float64)
    where = torch.arange(n)[None, None, None, :]
    rows = []
    for t in range(n):
        full = evicts & (budgets <= t)  # these caches hold `budget` tokens: one leaves first
        if bool(full.any()):
            # H2O: the smallest score before the recent window, ties to the oldest (argmin
            # returns the first); sinks + window: the oldest kept token after the sinks.
            window_start = (t - (recents - 1))[:, None, None, None]
            outside = kept & (where < window_start)
            masked = torch.where(outside, scores, math.inf)
            h2o_victims = masked.argmin(dim=-1)
            after_sinks = kept & (where >= sinks[:, None, None, None])
            sw_victims = after_sinks.to(torch.int8).argmax(dim=-1)
            victims = torch.where(is_h2o[:, None, None], h2o_victims, sw_victims)
            drop = torch.zeros_like(kept).scatter_(-1, victims[..., None], True)
            kept &= ~(drop & full[:, None, None, None])
        kept[..., t] = True
        position = torch.tensor([t])
        x = model.embed[torch.tensor([ids[t]] * r)]  # [R, d_model]: one row per setting
        for layer, w in enumerate(model.layers):
            h = model._rms_norm(x)
            q = model._rope((h @ w["wq"]).view(r, c.num_heads, c.head_dim), position.expand(r))
            k_new = (h @ w["wk"]).view(r, c.num_kv_heads, c.head_dim)
            keys[:, layer, t] = model._rope(k_new, position.expand(r))
            values[:, layer, t] = (h @ w["wv"]).view(r, c.num_kv_heads, c.head_dim)
            k, v = keys[:, layer, : t + 1], values[:, layer, : t + 1]
            # contiguous_attention's arithmetic, with the evicted tokens masked out
            qg = q.reshape(r, c.num_kv_heads, group, c.head_dim)
            s = torch.einsum("rhgd,rkhd->rhgk", qg, k) * scale
            s = s.masked_fill(~kept[:, layer, :, None, : t + 1], -math.inf)
            weights = torch.exp(s - torch.amax(s, dim=-1, keepdim=True))
            weights = weights / torch.sum(weights, dim=-1, keepdim=True)
            out = torch.einsum("rhgk,rkhd->rhgd", weights, v)
            scores[:, layer, :, : t + 1] += weights.sum(dim=2)
            if record_attention:
                attn[:, layer, :, t, : t + 1] = weights.reshape(r, c.num_heads, t + 1)
            x = x + out.reshape(r, c.num_heads * c.head_dim) @ w["wo"]
            h = model._rms_norm(x)
            x = x + (torch.nn.functional.silu(h @ w["w_gate"]) * (h @ w["w_up"])) @ w["w_down"]
        rows.append(model._rms_norm(x) @ model.lm_head)
    return torch.stack(rows, dim=1), kept, attn


def attention_map(
    model: TinyTransformer, ids: Sequence[int], layer: int | None = None
) -> torch.Tensor:
    """The full cache's attention [tokens, tokens] (query row, key column), averaged over the
    query heads of ``layer`` (over every layer's heads when ``None``). A column's sum is the
    accumulated attention H2O ranks tokens by."""
    run = evicted_decode(model, ids, "full", record_attention=True)
    assert run.attention is not None
    if layer is None:
        return run.attention.mean(dim=(0, 1))
    if not 0 <= layer < model.config.num_layers:
        raise ValueError(f"layer must be in 0..{model.config.num_layers - 1}, got {layer}")
    return run.attention[layer].mean(dim=0)


@dataclass(frozen=True)
class AttentionShares:
    """Where the queries of an attention map from ``skip`` on put their attention, on average:
    the share on the first token (a sink would take a large one), on the token just before the
    query, and on the ``top`` keys that get most of it (how concentrated it is)."""

    first: float
    previous: float
    top: float


def attention_shares(a: torch.Tensor, *, top: int = 8, skip: int = 32) -> AttentionShares:
    """:class:`AttentionShares` of the map ``a`` [query, key] (from :func:`attention_map`), over
    queries ``skip..n−1``.

    >>> attention_shares(torch.tensor([[1.0, 0, 0], [0.5, 0.5, 0], [0.5, 0.25, 0.25]]), top=1,
    ...                  skip=1)
    AttentionShares(first=0.5, previous=0.375, top=0.5)
    """
    a = torch.as_tensor(a, dtype=torch.float64)
    top = check_positive_int("top", top, "e.g. 8")
    if a.ndim != 2 or a.shape[0] != a.shape[1] or not 1 <= skip < a.shape[0]:
        raise ValueError(
            f"a must be a square attention map and skip in 1..n-1, got {tuple(a.shape)}, {skip}"
        )
    rows = torch.arange(skip, a.shape[0])
    return AttentionShares(
        float(a[rows, 0].mean()),
        float(a[rows, rows - 1].mean()),
        float(a[rows].sort(dim=-1, descending=True).values[:, :top].sum(dim=-1).mean()),
    )


@dataclass(frozen=True)
class EvictionPoint:
    """One rule at one budget against the full cache, over the scored positions: the largest
    and mean |Δlogit|, the mean KL(full ‖ rule) in nats, and the share of positions whose
    argmax (top-1 next token) agrees with the full cache's."""

    rule: str
    budget: int
    max_abs_error: float
    mean_abs_error: float
    mean_kl: float
    top1_agreement: float


def eviction_sweep(
    model: TinyTransformer,
    ids: Sequence[int],
    budgets: Sequence[int],
    *,
    rules: Sequence[Rule] = ("sink_window", "h2o"),
    score_from: int = 0,
    sinks: int = 4,
    recent: int | None = None,
) -> list[EvictionPoint]:
    """Every rule at every budget, against the full cache, on the text ``ids``; positions from
    ``score_from`` on are scored (those before it are the prompt). H2O's ``recent`` window is half
    of each budget unless given."""
    ids = _check_ids(model, ids)
    if not 0 <= score_from < len(ids):
        raise ValueError(f"score_from ({score_from}) leaves no position of {len(ids)} to score")
    for rule in rules:
        if rule not in ("sink_window", "h2o"):
            raise ValueError(
                f"rules compared with the full cache: 'sink_window', 'h2o'; got {rule!r}"
            )
    settings = [("full", len(ids), 1, 0)]
    settings += [(rule, *_check_budget(b, recent, sinks, rule)) for rule in rules for b in budgets]
    logits = _decode_together(model, ids, settings, False)[0][:, score_from:]
    full = logits[0]
    log_p = torch.log_softmax(full, dim=-1)
    points = []
    for (rule, budget, _, _), got in zip(settings[1:], logits[1:], strict=True):
        diff = (got - full).abs()
        kl = (log_p.exp() * (log_p - torch.log_softmax(got, dim=-1))).sum(dim=-1)
        agree = (got.argmax(dim=-1) == full.argmax(dim=-1)).double().mean()
        points.append(
            EvictionPoint(
                rule, budget, float(diff.max()), float(diff.mean()), float(kl.mean()), float(agree)
            )
        )
    return points
