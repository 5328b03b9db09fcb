"""Tests for kvcourse.trained_model: the shipped weights load and are checked, the held-out loss
is the one the training record states, and greedy decoding writes the book's kind of English."""

from __future__ import annotations

import hashlib
import re

import pytest
import torch

from kvcourse import trained_model as tm
from kvcourse.model import TinyConfig, TinyTransformer


def test_the_record_describes_the_shipped_files():
    record = tm.load_record()
    assert record["heldout_page"] not in record["train_pages"]
    assert record["stored_as"].startswith("float16")
    for key in ("steps", "seed", "context", "train_loss", "heldout_loss"):
        assert key in record
    assert len(tm.encode(tm.heldout_text())) == record["heldout_characters"]


def test_loading_gives_a_float64_model_of_the_recorded_shape():
    model = tm.trained_tiny_model()
    assert model.config == TinyConfig(**tm.load_record()["config"])
    assert model.embed.dtype == torch.float64
    assert len(model.layers) == model.config.num_layers
    # float16 on disk: every weight is a float16 value.
    w = model.layers[0]["wq"]
    assert torch.equal(w, w.to(torch.float16).to(torch.float64))


def test_damaged_weights_are_refused(monkeypatch):
    real = tm._read

    def damaged(name):
        data = real(name)
        return data[:-1] + bytes([data[-1] ^ 1]) if name == "weights.npz" else data

    monkeypatch.setattr(tm, "_read", damaged)
    with pytest.raises(ValueError, match="SHA-256"):
        tm.trained_tiny_model()


def test_the_tokenizer_keeps_ascii_and_maps_a_few_symbols():
    assert tm.decode(tm.encode("KV · cache × 2 — ok\t中文")) == "KV . cache x 2 - ok "
    assert tm.decode([tm.BOS, *tm.encode("a\nb")]) == "a\nb"
    assert all(0 <= i < 128 for i in tm.encode("§10 ≤ µs’"))


@pytest.mark.slow
def test_the_held_out_loss_is_the_recorded_one():
    record = tm.load_record()
    assert tm.heldout_loss() == pytest.approx(record["heldout_loss"], abs=1e-9)
    # Far below a seeded random model of the same shape, and below uniform guessing, ln 128.
    random = TinyTransformer(TinyConfig(**record["config"]), seed=0)
    text = tm.encode(tm.heldout_text())[:600]
    assert tm.text_loss(tm.trained_tiny_model(), text) < 0.5 * tm.text_loss(random, text)
    assert record["heldout_loss"] < 0.5 * 4.852  # ln 128 = 4.852


def test_greedy_decoding_writes_the_books_english():
    text = tm.greedy_continue(tm.trained_tiny_model(), "The KV cache of a request", 60)
    assert len(text) == 60
    words = re.findall(r"[a-z]+", text.lower())
    common = {"the", "of", "and", "a", "to", "is", "in", "tokens", "same", "block", "cache"}
    assert sum(w in common for w in words) >= 3, text
    assert sum(c.isalpha() or c == " " for c in text) >= 50, text


def test_weights_and_record_checksums_agree():
    digest = hashlib.sha256(tm._read("weights.npz")).hexdigest()
    assert digest == tm.load_record()["weights_sha256"]
