"""The two ways a new sequence gets its parent's KV (§5.2), for the drivers that run the tiny
transformer.

* ``"paged"``: the child forks the parent on a
  :class:`~kvcourse.kv.sharing_cache.SharingPagedKVCache`: it shares every block, and a shared,
  partly filled block is copied only when one of them writes into it (copy-on-write);
* ``"full_copy"``: the child gets a copy of all of the parent's K and V in a contiguous cache
  (:func:`copy_sequence`), as systems before PagedAttention did.

:class:`SchemeCache` is one run's cache under either scheme, with the counts a run reports.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal

from kvcourse.blocks.sharing import ForkAppendFree
from kvcourse.generation._setup import ManagerFactory, new_manager
from kvcourse.kv.protocols import ManagedKVCache
from kvcourse.kv.sharing_cache import SharingPagedKVCache
from kvcourse.model import TinyTransformer

Scheme = Literal["paged", "full_copy"]


def check_scheme(scheme: object) -> Scheme:
    """``scheme`` if it is ``"paged"`` or ``"full_copy"``; ``ValueError`` otherwise."""
    if scheme not in ("paged", "full_copy"):
        raise ValueError(f"scheme must be 'paged' or 'full_copy', got {scheme!r}")
    return scheme  # type: ignore[return-value]


def copy_sequence(cache: ManagedKVCache, parent_id: Hashable, child_id: Hashable) -> int:
    """The full-copy fork: add ``child_id`` and copy all of ``parent_id``'s K and V into it, layer
    by layer. Returns the tokens copied (counted once, not per layer)."""
    num_layers = getattr(cache, "num_layers", None)
    if isinstance(num_layers, bool) or not isinstance(num_layers, int):
        raise TypeError(f"{type(cache).__name__} has no num_layers; copy_sequence needs it")
    cache.length(parent_id)  # an unknown parent raises before the child exists
    cache.add_sequence(child_id)
    for layer in range(num_layers):
        k, v = cache.read(parent_id, layer)
        cache.write(child_id, layer, k.clone(), v.clone())
    return cache.length(child_id)


class SchemeCache:
    """The KV cache of one run over ``model`` under ``scheme``.

    ``"paged"``: a :class:`~kvcourse.kv.sharing_cache.SharingPagedKVCache` over a fresh pool of
    ``num_blocks`` blocks of ``block_size`` slots, its block tables in ``manager_factory``'s
    manager (:attr:`manager`). ``"full_copy"``: the model's contiguous cache, and no manager.
    :meth:`fork` makes a child either way; :attr:`copied_tokens` and :attr:`cow_count` are what
    that cost.
    """

    def __init__(
        self,
        model: TinyTransformer,
        scheme: Scheme,
        *,
        num_blocks: int,
        block_size: int,
        manager_factory: ManagerFactory,
    ) -> None:
        self.scheme = check_scheme(scheme)
        self.manager: ForkAppendFree | None = None
        self.cache: ManagedKVCache
        if scheme == "paged":
            self.manager = new_manager(manager_factory, num_blocks, block_size)
            self.cache = SharingPagedKVCache.for_model(
                model, self.manager.pool, manager=self.manager
            )
        else:
            self.cache = model.contiguous_cache()
        self._full_copies = 0

    def fork(self, parent_id: Hashable, child_id: Hashable) -> None:
        """Make ``child_id`` from ``parent_id``: a fork (paged) or a full copy of its KV."""
        if isinstance(self.cache, SharingPagedKVCache):
            self.cache.fork_sequence(parent_id, child_id)
        else:
            self._full_copies += copy_sequence(self.cache, parent_id, child_id)

    @property
    def copied_tokens(self) -> int:
        """Token rows copied so far: the filled slots of copy-on-written blocks (paged) or every
        child's whole inherited KV (full copy)."""
        if isinstance(self.cache, SharingPagedKVCache):
            return self.cache.copied_slots
        return self._full_copies

    @property
    def cow_count(self) -> int:
        """Copy-on-writes so far (always 0 under full copy)."""
        return self.cache.cow_count if isinstance(self.cache, SharingPagedKVCache) else 0

    def free(self, seq_ids: Sequence[Hashable]) -> int:
        """Free ``seq_ids``; return the blocks still used afterwards (leaked; 0 under full copy)."""
        for seq_id in seq_ids:
            self.cache.free_sequence(seq_id)
        return self.manager.pool.num_used if self.manager is not None else 0
