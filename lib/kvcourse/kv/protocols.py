"""What the tiny transformer needs from a KV cache, and what a paged cache needs from a block table.

The model needs only three things from a KV cache (the :class:`KVCache` protocol):

* ``length(seq_id)``: how many tokens of the sequence are stored in every layer;
* ``write(seq_id, layer, k, v)``: append the keys and values of the new tokens to one layer;
* ``read(seq_id, layer)``: all the keys and values of one layer, as contiguous tensors.

**The write rule.** One forward pass writes the new tokens' K and V layer by layer, layer 0 first,
the same number of tokens to each layer. A layer may never get ahead of the layer before it, and
layer 0 starts a new pass only after the last layer has finished the previous one. The
sequence's :meth:`~KVCache.length` counts the tokens that *every* layer holds, so it advances when
the last layer has written; during a forward pass it still reports the tokens that were there
before, which is where the new tokens' positions start. ``read(seq_id, layer)`` returns whatever
that layer holds, including tokens written in the current pass.

A runner also admits and retires sequences (:class:`ManagedKVCache`). The paged cache asks a
block table for the few things of :class:`BlockTableLike`, the part of
:class:`~kvcourse.blocks.table.BlockTable` that assignment a2 re-implements. The caches themselves
are in :mod:`kvcourse.kv.cache`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Protocol, runtime_checkable

import torch

__all__ = ["BlockTableLike", "KVCache", "KVShape", "ManagedKVCache", "ShapedModel"]


@runtime_checkable
class KVCache(Protocol):
    """What the transformer needs from a KV cache; see the module docstring for the write rule."""

    def length(self, seq_id: Hashable) -> int:
        """Tokens of sequence ``seq_id`` stored in every layer."""
        ...

    def write(self, seq_id: Hashable, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Append new tokens' ``k`` and ``v``, each ``[new_tokens, kv_heads, head_dim]``."""
        ...

    def read(self, seq_id: Hashable, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(K, V)`` of ``layer``, each ``[tokens in that layer, kv_heads, head_dim]``."""
        ...


@runtime_checkable
class ManagedKVCache(KVCache, Protocol):
    """A :class:`KVCache` that also admits and retires sequences (what a runner needs)."""

    def add_sequence(self, seq_id: Hashable) -> None:
        """Start an empty sequence ``seq_id``."""
        ...

    def free_sequence(self, seq_id: Hashable) -> None:
        """Forget sequence ``seq_id`` and give back its memory."""
        ...


@runtime_checkable
class BlockTableLike(Protocol):
    """What :class:`~kvcourse.kv.cache.PagedKVCache` needs from a block table: the part of
    :class:`~kvcourse.blocks.table.BlockTable`'s interface that assignment a2 re-implements."""

    @property
    def num_tokens(self) -> int:
        """Tokens the table has room reserved for."""
        ...

    @property
    def block_ids(self) -> Sequence[int]:
        """Physical block ids in logical order."""
        ...

    def append(self, num_tokens: int = 1) -> list[int]:
        """Reserve slots for ``num_tokens`` more tokens (all or nothing); the new block ids."""
        ...

    def slot_of(self, position: int) -> tuple[int, int]:
        """``(physical block, offset)`` of token ``position``."""
        ...

    def free(self) -> object:
        """Give every block back to the pool and empty the table."""
        ...


class KVShape(Protocol):
    """The KV shape of a model's configuration: layers, KV heads and head size."""

    num_layers: int
    num_kv_heads: int
    head_dim: int


class ShapedModel(Protocol):
    """What a cache's ``for_model`` reads of a model (the tiny transformer, one layer up): the KV
    shape in its ``config``."""

    @property
    def config(self) -> KVShape: ...
