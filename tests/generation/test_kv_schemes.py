"""Tests for kvcourse.generation.kv_schemes (§5.2): the full-copy fork, and one run's cache under
either scheme with its copy counts."""

from __future__ import annotations

import pytest
import torch

from kvcourse.blocks import SharedBlockManager
from kvcourse.generation import copy_sequence
from kvcourse.generation.kv_schemes import SchemeCache, check_scheme
from kvcourse.kv import ContiguousKVCache, SharingPagedKVCache, UnknownSequenceError
from kvcourse.model import TinyTransformer


@pytest.fixture(scope="module")
def model():
    return TinyTransformer(seed=0)


def test_copy_sequence_copies_every_layer(model):
    cache = model.contiguous_cache()
    cache.add_sequence("p")
    model.forward({"p": list(range(9))}, cache)
    assert copy_sequence(cache, "p", "c") == 9
    for layer in range(model.config.num_layers):
        for got, want in zip(cache.read("c", layer), cache.read("p", layer), strict=True):
            assert torch.equal(got, want) and got.data_ptr() != want.data_ptr()


def test_copy_sequence_errors_change_nothing():
    cache = ContiguousKVCache(1, 1, 2)
    with pytest.raises(UnknownSequenceError):
        copy_sequence(cache, "nobody", "c")
    assert cache.seq_ids == ()
    with pytest.raises(TypeError, match="num_layers"):
        copy_sequence(object(), 0, 1)


@pytest.mark.parametrize("scheme", ["paged", "full_copy"])
def test_scheme_cache_forks_and_counts(model, scheme):
    kv = SchemeCache(model, scheme, num_blocks=16, block_size=4, manager_factory=SharedBlockManager)
    assert isinstance(kv.cache, SharingPagedKVCache) == (scheme == "paged")
    assert (kv.manager is None) == (scheme == "full_copy")
    kv.cache.add_sequence(0)
    model.forward({0: list(range(6))}, kv.cache)  # block 1 holds 2 tokens
    kv.fork(0, 1)
    model.forward({0: [7], 1: [8]}, kv.cache)
    if scheme == "paged":
        assert (kv.cow_count, kv.copied_tokens) == (1, 2)
    else:
        assert (kv.cow_count, kv.copied_tokens) == (0, 6)
    assert kv.free([0, 1]) == 0


def test_check_scheme():
    assert check_scheme("paged") == "paged" and check_scheme("full_copy") == "full_copy"
    with pytest.raises(ValueError, match="'paged' or 'full_copy'"):
        check_scheme("contiguous")
