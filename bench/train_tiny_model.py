"""Train the tiny transformer on the book's own prose and write kvcourse's trained weights.

    python bench/train_tiny_model.py   # the shipped run (one thread; 13 min on a busy 2-core box)
    python bench/train_tiny_model.py --steps 20 --out /tmp/tiny   # a quick try elsewhere

The corpus is the English prose of every book/*.md page: front matter, code cells, directive
lines and options, Chinese and other non-ASCII text stripped, MyST roles reduced to their text
(`{term}`KV cache`` → KV cache; a glued number becomes the letter N). One page,
book/12_summary.md, is held out: the model never trains on it, and its prose is shipped as
heldout.txt for the held-out loss. Tokens are characters (kvcourse.trained_model.encode).

The model is kvcourse.model.TinyTransformer's architecture written again here with autograd, in
float32 (same weight layout: x @ w, RMSNorm without a gain, RoPE on halves, GQA, SwiGLU). After
training the weights are rounded to float16 and written to lib/kvcourse/data/tiny_model/ with
record.json; the losses in the record are measured on the float16 weights by the library's own
float64 model (kvcourse.trained_model.text_loss), so the record says what a reader gets.

Seeded (torch.manual_seed) and single-threaded (torch.set_num_threads(1)), so a rerun on the
same book and the same PyTorch should write the same weights. The book's pages change, so a
rerun on a later commit trains on other text: the shipped weights are the record's, with the
PyTorch version and the page list it names.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "lib"))

from kvcourse.model import TinyConfig, TinyTransformer  # noqa: E402
from kvcourse.trained_model import (  # noqa: E402
    BOS,
    WEIGHT_NAMES,
    encode,
    layer_weight_shapes,
    text_loss,
)

HELD_OUT = "12_summary.md"
CONFIG = TinyConfig(
    vocab_size=128, d_model=64, num_layers=3, num_heads=4, num_kv_heads=2, ffn_size=192
)
CONTEXT = 192

_FENCE = re.compile(r"^(`{3,}|:{3,})")
_ROLE = re.compile(r"\{([\w:-]+)\}`([^`]*)`")


def prose(markdown: str) -> str:
    """A page's English prose: no front matter, code, directive lines, labels or Chinese."""
    lines, inside_code, fence = [], False, ""
    body = re.sub(r"\A---\n.*?\n---\n", "", markdown, flags=re.S)
    for line in body.splitlines():
        m = _FENCE.match(line.strip())
        if inside_code:
            if m and line.strip() == fence:
                inside_code = False
            continue
        if m:
            rest = line.strip()[len(m.group(1)) :]
            if rest.startswith("{code-cell}") or rest == "" and m.group(1).startswith("`"):
                inside_code, fence = True, m.group(1)
            continue  # an opening or closing directive line
        if re.match(r"^\s*:[\w-]+:", line) or re.match(r"^\(.*\)=\s*$", line):
            continue  # a directive option or a label
        lines.append(line)
    text = "\n".join(lines)

    def role(m: re.Match) -> str:
        name, content = m.group(1), m.group(2)
        if name.startswith("glue"):
            return "N"
        return re.sub(r"\s*<[^>]*>$", "", content)  # {term}`text <target>` -> text

    text = _ROLE.sub(role, text)
    text = re.sub(r"\$[^$\n]*\$", "", text)  # inline maths
    text = re.sub(r"[ \t]*·[^\n]*", "", text)  # "English · 中文" headings keep the English
    text = "".join(c for c in text if ord(c) < 0x2E80)  # no CJK
    text = re.sub(r"\n{3,}", "\n\n", text)
    return re.sub(r"[ \t]+", " ", text).strip() + "\n"


def corpus() -> tuple[str, str, list[str]]:
    pages = sorted(p.name for p in (REPO / "book").glob("*.md"))
    train = "\n".join(prose((REPO / "book" / p).read_text()) for p in pages if p != HELD_OUT)
    return train, prose((REPO / "book" / HELD_OUT).read_text()), pages


def init_weights(c: TinyConfig, gen: torch.Generator) -> dict[str, torch.Tensor]:
    def w(fan_in: int, *shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) / math.sqrt(fan_in)).requires_grad_()

    shapes = layer_weight_shapes(c)
    weights = {"embed": (torch.randn(c.vocab_size, c.d_model, generator=gen)).requires_grad_()}
    for i in range(c.num_layers):
        for n in WEIGHT_NAMES:
            weights[f"layer{i}.{n}"] = w(shapes[n][0], *shapes[n])
    weights["lm_head"] = w(c.d_model, c.d_model, c.vocab_size)
    return weights


def forward(weights: dict[str, torch.Tensor], tokens: torch.Tensor, c: TinyConfig) -> torch.Tensor:
    """Logits [B, T, vocab] for a batch of equal-length sequences, causal; TinyTransformer's
    computation, batched and differentiable."""
    b, t = tokens.shape
    half = c.head_dim // 2
    inv_freq = c.rope_base ** (-torch.arange(half, dtype=torch.float32) / half)
    angles = torch.arange(t, dtype=torch.float32)[:, None] * inv_freq[None, :]
    cos, sin = torch.cos(angles)[:, None, :], torch.sin(angles)[:, None, :]

    def norm(x: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + c.norm_eps)

    def rope(x: torch.Tensor) -> torch.Tensor:
        first, second = x.chunk(2, dim=-1)
        return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)

    group = c.num_heads // c.num_kv_heads
    x = weights["embed"][tokens]
    for i in range(c.num_layers):
        w = {n: weights[f"layer{i}.{n}"] for n in WEIGHT_NAMES}
        h = norm(x)
        q = rope((h @ w["wq"]).view(b, t, c.num_heads, c.head_dim))
        k = rope((h @ w["wk"]).view(b, t, c.num_kv_heads, c.head_dim))
        v = (h @ w["wv"]).view(b, t, c.num_kv_heads, c.head_dim)
        k = k.repeat_interleave(group, dim=2)  # query head h reads KV head h // group
        v = v.repeat_interleave(group, dim=2)
        out = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        x = x + out.transpose(1, 2).reshape(b, t, -1) @ w["wo"]
        h = norm(x)
        x = x + (torch.nn.functional.silu(h @ w["w_gate"]) * (h @ w["w_up"])) @ w["w_down"]
    return norm(x) @ weights["lm_head"]


def batch(ids: torch.Tensor, size: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    starts = torch.randint(len(ids) - CONTEXT, (size,), generator=gen)
    pieces = torch.stack([ids[s : s + CONTEXT] for s in starts.tolist()])  # CONTEXT - 1 + target
    inputs = torch.cat([torch.full((size, 1), BOS), pieces[:, :-1]], dim=1)
    return inputs, pieces


def to_model(weights: dict[str, torch.Tensor], c: TinyConfig) -> TinyTransformer:
    model = TinyTransformer(c)
    as64 = {n: w.detach().to(torch.float16).to(torch.float64) for n, w in weights.items()}
    model.embed, model.lm_head = as64["embed"], as64["lm_head"]
    model.layers = [{n: as64[f"layer{i}.{n}"] for n in WEIGHT_NAMES} for i in range(c.num_layers)]
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument("--batch", type=int, default=12)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "lib/kvcourse/data/tiny_model")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    train_text, held_text, pages = corpus()
    ids = torch.tensor(encode(train_text))
    weights = init_weights(CONFIG, gen)
    opt = torch.optim.AdamW(weights.values(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.95))
    warmup = max(args.steps // 20, 1)
    began = time.perf_counter()
    for step in range(args.steps):
        scale = min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * step / args.steps))
        for group in opt.param_groups:
            group["lr"] = args.lr * max(scale, 0.02)
        inputs, targets = batch(ids, args.batch, gen)
        logits = forward(weights, inputs, CONFIG)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, CONFIG.vocab_size), targets.reshape(-1)
        )
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(weights.values(), 1.0)
        opt.step()
        if step % 100 == 0 or step == args.steps - 1:
            print(
                f"step {step:5d}  loss {loss.item():.3f}  {time.perf_counter() - began:6.0f} s",
                flush=True,
            )
    seconds = time.perf_counter() - began

    args.out.mkdir(parents=True, exist_ok=True)
    arrays = {n: w.detach().numpy().astype(np.float16) for n, w in weights.items()}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    (args.out / "weights.npz").write_bytes(buffer.getvalue())
    held_bytes = held_text.encode("utf-8")
    (args.out / "heldout.txt").write_bytes(held_bytes)
    model = to_model(weights, CONFIG)
    # The train loss on a fixed slice of the training text as long as the held-out one.
    train_slice = encode(train_text)[: len(encode(held_text))]
    record = {
        "what": "kvcourse.model.TinyTransformer trained by bench/train_tiny_model.py",
        "corpus": "English prose of the book's pages (code, directives, maths, Chinese removed)",
        "train_pages": [p for p in pages if p != HELD_OUT],
        "heldout_page": HELD_OUT,
        "train_characters": len(ids),
        "heldout_characters": len(encode(held_text)),
        "tokenizer": "one token per ASCII character (kvcourse.trained_model.encode), BOS = 2",
        "config": CONFIG.__dict__ | {},
        "context": CONTEXT,
        "steps": args.steps,
        "batch": args.batch,
        "optimizer": f"AdamW lr {args.lr} (warm-up {warmup} steps, cosine), wd 0.01, clip 1",
        "seed": args.seed,
        "torch": torch.__version__,
        "threads": 1,
        "training_seconds": round(seconds, 1),
        "stored_as": "float16 (weights.npz); run in float64 after loading",
        "train_loss": text_loss(model, train_slice, context=CONTEXT),
        "train_loss_on": f"the first {len(train_slice)} characters of the training text",
        "heldout_loss": text_loss(model, encode(held_text), context=CONTEXT),
        "loss_unit": "nats per character, float16 weights run in float64",
        "weights_sha256": hashlib.sha256(buffer.getvalue()).hexdigest(),
        "heldout_sha256": hashlib.sha256(held_bytes).hexdigest(),
    }
    (args.out / "record.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: record[k] for k in ("train_loss", "heldout_loss", "training_seconds")}))


if __name__ == "__main__":
    main()
