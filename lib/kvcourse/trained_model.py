"""The tiny transformer with trained weights: the course's prose, learned character by character.

:class:`~kvcourse.model.TinyTransformer` draws its weights from a seed, so its attention is
spread without pattern: no token draws much more attention than another, and there is nothing for
a heavy-hitter rule to find. This module loads weights that ``bench/train_tiny_model.py`` trained
on the English prose of the book's own pages (code, directives and Chinese stripped), so that its
attention has the structure of a trained model: attention sinks at the start and tokens that
keep drawing attention (§10's heavy hitters).

The files ship with the library in ``kvcourse/data/tiny_model/``:

* ``weights.npz``: every weight matrix in float16 (half the bytes of float32); the model runs in
  float64 after loading, as the seeded one does;
* ``record.json``: what the weights were trained on, the model's shape, the steps, the seed, the
  losses, and the SHA-256 of ``weights.npz`` and of the held-out text;
* ``heldout.txt``: prose the model never saw in training (one page of the book).

The tokenizer is one token per character: ASCII after a few replacements (``·`` → ``.``, ``×``
→ ``x``, dashes and curly quotes to their ASCII forms); anything else is dropped. Token 2 (ASCII
"start of text", :data:`BOS`) starts every sequence, in training and here.
"""

from __future__ import annotations

import hashlib
import io
import json
import unicodedata
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

import numpy as np
import torch

from kvcourse._checks import check_count, check_positive_int
from kvcourse.model import TinyConfig, TinyTransformer

__all__ = [
    "BOS",
    "WEIGHT_NAMES",
    "decode",
    "encode",
    "greedy_continue",
    "heldout_loss",
    "layer_weight_shapes",
    "heldout_text",
    "load_record",
    "text_loss",
    "trained_tiny_model",
]

#: The token that starts every sequence (ASCII 2, "start of text").
BOS = 2
#: The per-layer weight names, in the order of :class:`~kvcourse.model.TinyTransformer`.
WEIGHT_NAMES = ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")
_REPLACE = {
    "·": ".",
    "×": "x",
    "—": "-",
    "–": "-",
    "−": "-",
    "‘": "'",
    "’": "'",
    "“": '"',
    "”": '"',
    "→": "->",
    "←": "<-",
    "≤": "<=",
    "≥": ">=",
    "≈": "~",
    "…": "...",
    "§": "S",
    "\t": " ",
    "\N{NO-BREAK SPACE}": " ",
    "µ": "u",
    "√": "sqrt",
}
_FOLDER = "data/tiny_model"


def layer_weight_shapes(c: TinyConfig) -> dict[str, tuple[int, int]]:
    """The shape of each of a layer's matrices (:data:`WEIGHT_NAMES`) for the model ``c``: the
    query and output projections span every query head, the key and value ones the KV heads."""
    q_width, kv_width = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
    return {
        "wq": (c.d_model, q_width),
        "wk": (c.d_model, kv_width),
        "wv": (c.d_model, kv_width),
        "wo": (q_width, c.d_model),
        "w_gate": (c.d_model, c.ffn_size),
        "w_up": (c.d_model, c.ffn_size),
        "w_down": (c.ffn_size, c.d_model),
    }


def encode(text: str) -> list[int]:
    """``text`` as token ids, one per character: ASCII after the module's replacements, other
    characters dropped, control characters except the newline dropped."""
    if not isinstance(text, str):
        raise TypeError(f"encode takes a str, got {type(text).__name__}")
    out = []
    for ch in text:
        ch = _REPLACE.get(ch, ch)
        for c in unicodedata.normalize("NFKD", ch):
            code = ord(c)
            if code < 128 and (code >= 32 or c == "\n"):
                out.append(code)
    return out


def decode(ids: Sequence[int]) -> str:
    """Token ids back to text (the start token :data:`BOS` left out).

    >>> decode(encode("KV · cache × 2"))
    'KV . cache x 2'
    """
    return "".join(chr(int(i)) for i in ids if int(i) != BOS)


def _read(name: str) -> bytes:
    return resources.files("kvcourse").joinpath(f"{_FOLDER}/{name}").read_bytes()


@cache
def load_record() -> dict[str, Any]:
    """The training record, ``record.json``: corpus, config, steps, seed, losses, checksums."""
    record = json.loads(_read("record.json").decode("utf-8"))
    for key in ("config", "weights_sha256", "heldout_sha256", "heldout_loss", "train_loss"):
        if key not in record:
            raise ValueError(f"the trained model's record.json has no {key!r}; retrain it")
    return record


def heldout_text() -> str:
    """The held-out prose (``heldout.txt``), checked against the record's SHA-256."""
    data = _read("heldout.txt")
    if hashlib.sha256(data).hexdigest() != load_record()["heldout_sha256"]:
        raise ValueError("heldout.txt does not match its record; the package data is damaged")
    return data.decode("utf-8")


def _check_array(arrays: Any, name: str, shape: tuple[int, ...]) -> torch.Tensor:
    if name not in arrays.files:
        raise ValueError(f"weights.npz has no array {name!r}; it was not written by the trainer")
    array = arrays[name]
    if array.dtype != np.float16 or tuple(array.shape) != shape:
        raise ValueError(
            f"weights.npz: {name} is {array.dtype} {tuple(array.shape)}, expected float16 {shape}"
        )
    if not np.isfinite(array).all():
        raise ValueError(f"weights.npz: {name} holds a NaN or an infinity")
    return torch.from_numpy(array.astype(np.float64))


def trained_tiny_model() -> TinyTransformer:
    """The tiny transformer with the shipped trained weights, float64, ready for any KV cache.

    The file is checked before use: its SHA-256 against the record, then every array's name,
    float16 dtype, shape (from the record's config) and finiteness.
    """
    record = load_record()
    data = _read("weights.npz")
    if hashlib.sha256(data).hexdigest() != record["weights_sha256"]:
        raise ValueError("weights.npz does not match record.json's SHA-256; reinstall kvcourse")
    config = TinyConfig(**record["config"])
    c = config
    shapes = layer_weight_shapes(c)
    with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
        model = TinyTransformer(config)
        model.embed = _check_array(arrays, "embed", (c.vocab_size, c.d_model))
        model.lm_head = _check_array(arrays, "lm_head", (c.d_model, c.vocab_size))
        model.layers = [
            {n: _check_array(arrays, f"layer{i}.{n}", shapes[n]) for n in WEIGHT_NAMES}
            for i in range(c.num_layers)
        ]
    return model


def text_loss(model: TinyTransformer, ids: Sequence[int], *, context: int | None = None) -> float:
    """Mean cross-entropy, in nats per character, of ``model`` predicting each token of ``ids``
    from the ones before it. ``ids`` is cut into pieces of ``context − 1`` tokens (the record's
    training context by default); each piece runs after :data:`BOS` on a fresh cache."""
    ids = [int(i) for i in ids]
    if len(ids) < 1:
        raise ValueError("text_loss needs at least one token")
    context = load_record()["context"] if context is None else context
    context = check_positive_int("context", context, "e.g. 256")
    if context < 2:
        raise ValueError(
            f"context must be at least 2 (the start token and one more), got {context}"
        )
    total, count = 0.0, 0
    for start in range(0, len(ids), context - 1):
        piece = ids[start : start + context - 1]
        cache = model.contiguous_cache()
        cache.add_sequence(0)
        logits = model.forward({0: [BOS, *piece[:-1]]}, cache)[0]
        target = torch.tensor(piece)
        total += torch.nn.functional.cross_entropy(logits, target, reduction="sum").item()
        count += len(piece)
    return total / count


def heldout_loss(model: TinyTransformer | None = None) -> float:
    """:func:`text_loss` of the held-out prose, for the trained model unless another is given;
    the record's ``heldout_loss`` is this number for the shipped weights."""
    return text_loss(model or trained_tiny_model(), encode(heldout_text()))


def greedy_continue(model: TinyTransformer, prompt: str, new_tokens: int = 80) -> str:
    """``prompt`` continued by ``new_tokens`` greedy steps (argmax each time); only the new text
    is returned. The prompt runs after :data:`BOS` in one prefill on a contiguous cache."""
    new_tokens = check_count("new_tokens", new_tokens)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one row at a time: more threads only cost time
    try:
        return _greedy(model, [BOS, *encode(prompt)], new_tokens)
    finally:
        torch.set_num_threads(threads)


def _greedy(model: TinyTransformer, ids: list[int], new_tokens: int) -> str:
    cache = model.contiguous_cache()
    cache.add_sequence(0)
    logits = model.forward({0: ids}, cache)[0]
    out: list[int] = []
    for _ in range(new_tokens):
        token = int(logits[-1].argmax())
        out.append(token)
        logits = model.forward({0: [token]}, cache)[0]
    return decode(out)
