"""Prefix caching on real K and V (§8.3): a paged KV cache whose prompts start from the cached
blocks of earlier prompts with the same beginning.

:class:`PrefixCachingKVCache` is a :class:`~kvcourse.kv.cache.PagedKVCache` with a
:class:`~kvcourse.blocks.prefix_cache.PrefixCache` over its pool. :meth:`~PrefixCachingKVCache.
add_prompt` starts a sequence whose block table already points at the leading run of cached
blocks (their K and V are in place in every layer, nothing is copied) and says how many prompt
tokens that covers; the model then runs only the rest of the prompt. Once the prefill has run,
:meth:`~PrefixCachingKVCache.register_prompt` names the prompt's full blocks, so the next request
can hit them (:meth:`~PrefixCachingKVCache.register_sequence` names the blocks its generated tokens
filled too, as vLLM v1 does, so that turn 2 of a conversation hits turn 1's answer); freeing a
sequence leaves its blocks cached until the pool needs them. The blocks
for the rest of a prompt are taken as the model writes it, in the pool's free-queue order, so the
cache evicts LRU here (:meth:`~kvcourse.blocks.prefix_cache.PrefixCache.allocate` offers LFU).

The tiny transformer runs on it unchanged: it asks the cache how long a sequence is and starts
the new tokens' positions there, so the logits of a prompt served from the cache equal those of
the same prompt computed from scratch.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

from kvcourse.blocks.pool import BlockPool
from kvcourse.blocks.prefix_cache import PrefixCache
from kvcourse.blocks.table import BlockTable
from kvcourse.kv.cache import PagedKVCache
from kvcourse.kv.protocols import ShapedModel

__all__ = ["PrefixCachingKVCache"]


class PrefixCachingKVCache(PagedKVCache):
    """A paged KV cache over ``pool`` whose prompts reuse cached prefixes through
    ``prefix_cache`` (a new :class:`~kvcourse.blocks.prefix_cache.PrefixCache` over ``pool`` by
    default). Sequences added with ``add_sequence`` work as in a plain paged cache.

    Blocks get their names only from :meth:`register_prompt` and :meth:`register_sequence`, once
    their K and V are written: a ``prefix_cache`` made with ``naming="allocated"`` (vLLM v1's
    rule) names nothing earlier through this cache, since the blocks for the rest of a prompt are
    taken as the model writes it, not by :meth:`PrefixCache.allocate
    <kvcourse.blocks.prefix_cache.PrefixCache.allocate>`."""

    def __init__(
        self,
        pool: BlockPool,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        *,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
        prefix_cache: PrefixCache | None = None,
    ) -> None:
        super().__init__(pool, num_layers, num_kv_heads, head_dim, dtype=dtype, device=device)
        if prefix_cache is None:
            prefix_cache = PrefixCache(pool)
        if not isinstance(prefix_cache, PrefixCache) or prefix_cache.pool is not pool:
            raise TypeError(
                f"prefix_cache must be a PrefixCache over this cache's pool, got {prefix_cache!r}"
            )
        self.prefix_cache = prefix_cache
        self._prompts: dict[Hashable, tuple[int, ...]] = {}

    @classmethod
    def for_model(
        cls, model: ShapedModel, pool: BlockPool, *, dtype: torch.dtype = torch.float64
    ) -> PrefixCachingKVCache:
        """A cache shaped for ``model`` (its layers, KV heads and head size) over ``pool``."""
        c = model.config
        return cls(pool, c.num_layers, c.num_kv_heads, c.head_dim, dtype=dtype)

    def add_prompt(self, seq_id: Hashable, tokens: Sequence[int]) -> int:
        """Start sequence ``seq_id`` for the prompt ``tokens`` from its cached leading blocks and
        return how many of its tokens they cover (a multiple of the block size, always fewer than
        ``len(tokens)``): run the model on ``tokens[cached:]`` next, then call
        :meth:`register_prompt`."""
        if not isinstance(seq_id, Hashable):
            raise TypeError(f"a sequence id must be hashable (an int or a str), got {seq_id!r}")
        if seq_id in self:
            raise ValueError(
                f"sequence {seq_id!r} already exists; free it first or pick another id"
            )
        found = self.prefix_cache.take(tokens)
        self._tables[seq_id] = BlockTable.adopt(self.pool, found.block_ids)
        self._filled[seq_id] = [found.cached_tokens] * self.num_layers
        self._prompts[seq_id] = tuple(int(t) for t in tokens)
        return found.cached_tokens

    def register_prompt(self, seq_id: Hashable) -> int:
        """Name the full blocks of ``seq_id``'s prompt in the prefix cache, once the prefill has
        written them; returns how many blocks hold their name now. Raises ``ValueError`` if the
        sequence was not added with :meth:`add_prompt` or its prompt is not all stored yet."""
        prompt = self._prompts.get(seq_id)
        if prompt is None:
            raise ValueError(f"sequence {seq_id!r} was not started with add_prompt()")
        if self.length(seq_id) < len(prompt):
            raise ValueError(
                f"sequence {seq_id!r} holds {self.length(seq_id)} of its {len(prompt)} prompt "
                f"tokens; run the model on the rest of the prompt first"
            )
        return self.prefix_cache.register(self._tables[seq_id].block_ids, prompt)

    def register_sequence(self, seq_id: Hashable, tokens: Sequence[int]) -> int:
        """Name the full blocks of ``seq_id``'s ``tokens``, its prompt followed by the generated
        tokens whose KV is stored, so that a later prompt repeating them hits them all: vLLM v1
        names the blocks that generation fills (release v0.33.0, a request's block hashes grow
        with its output). Returns how many blocks hold their name now. Raises ``ValueError`` if
        the sequence was not added with :meth:`add_prompt`, ``tokens`` does not begin with its
        prompt, or holds more tokens than the cache stores for it."""
        prompt = self._prompts.get(seq_id)
        if prompt is None:
            raise ValueError(f"sequence {seq_id!r} was not started with add_prompt()")
        tokens = list(tokens)
        if tuple(tokens[: len(prompt)]) != prompt or len(tokens) > self.length(seq_id):
            raise ValueError(
                f"sequence {seq_id!r} stores {self.length(seq_id)} tokens after its "
                f"{len(prompt)}-token prompt; pass its prompt and then the generated tokens whose "
                f"KV is stored ({len(tokens)} tokens given)"
            )
        return self.prefix_cache.register(self._tables[seq_id].block_ids, tokens)

    def _free(self, seq_id: Hashable) -> None:
        table = self._tables.pop(seq_id)
        self._prompts.pop(seq_id, None)
        self.prefix_cache.free(table.block_ids)  # last block first; they stay cached
