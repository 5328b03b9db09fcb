"""Fork and copy-on-write on real K and V (§5): a paged KV cache whose block tables come from a
block manager with sharing.

:class:`SharingPagedKVCache` is a :class:`~kvcourse.kv.cache.PagedKVCache` whose block tables live
in any :class:`~kvcourse.blocks.sharing.ForkAppendFree` manager (the reference
:class:`~kvcourse.blocks.sharing.SharedBlockManager`, or a student's from assignment a3). When an
append moves a sequence to a new block, the filled rows of the old block are copied into it in
every layer before the new tokens are written, so the tiny transformer runs on it unchanged.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import torch

from kvcourse._checks import as_index, ceil_div, check_count
from kvcourse.blocks.pool import BlockPool
from kvcourse.blocks.sharing import ForkAppendFree, SharedBlockManager, check_manager
from kvcourse.blocks.table import BlockTable
from kvcourse.kv.cache import PagedKVCache
from kvcourse.kv.protocols import ShapedModel

__all__ = ["SharedTableView", "SharingPagedKVCache"]


class SharedTableView:
    """A read-only look at one sequence's block table inside a :class:`SharingPagedKVCache`: the
    block ids come from the cache's manager, the token count from the cache.

    :meth:`slot_of` and :meth:`entries` are :class:`~kvcourse.blocks.table.BlockTable`'s own, which
    read only ``block_ids``, ``num_tokens`` and ``block_size``, so the two never disagree.
    """

    # Borrowed rather than inherited: a view is no BlockTable (it cannot append or free).
    slot_of = BlockTable.slot_of
    entries = BlockTable.entries

    def __init__(self, cache: SharingPagedKVCache, seq_id: Hashable) -> None:
        self._cache = cache
        self._seq_id = seq_id

    @property
    def block_ids(self) -> tuple[int, ...]:
        """Physical block ids in logical order (the manager's)."""
        return tuple(as_index(b) for b in self._cache.manager.block_ids(self._seq_id))

    @property
    def block_size(self) -> int:
        """Token slots per block."""
        return self._cache.block_size

    @property
    def num_tokens(self) -> int:
        """Tokens stored in every layer."""
        return self._cache.length(self._seq_id)

    @property
    def num_blocks(self) -> int:
        """How many blocks the table lists."""
        return len(self.block_ids)

    def ref_counts(self) -> tuple[int, ...]:
        """The pool reference count of each listed block (> 1 where the block is shared)."""
        return tuple(self._cache.pool.ref_count(b) for b in self.block_ids)

    def __repr__(self) -> str:
        return f"SharedTableView(blocks={list(self.block_ids)}, num_tokens={self.num_tokens})"


class SharingPagedKVCache(PagedKVCache):
    """A paged KV cache whose sequences can fork, sharing blocks, with copy-on-write of real K/V.

    Block tables live in ``manager`` (any :class:`ForkAppendFree`; a fresh
    :class:`SharedBlockManager` by default), over the same ``pool``. The cache follows the
    :class:`~kvcourse.kv.cache.KVCache` write rule; on top of it:

    * :meth:`fork_sequence` makes a child that shares the parent's blocks (between forward passes);
    * when layer 0 of a pass appends tokens, the cache compares the sequence's block ids before and
      after the manager's ``append``: a block that was replaced (copy-on-write) has its filled rows
      copied from the old block to the new one, in K and V of **every layer**, before anything new
      is written. :attr:`copied_slots` counts those token rows (once, not per layer).

    Because the cache only looks at block ids, it works with a student's manager too, and a wrong
    manager shows up as wrong outputs, not as a crash.
    """

    def __init__(
        self,
        pool: BlockPool,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        *,
        manager: ForkAppendFree | None = None,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
    ) -> None:
        if not isinstance(pool, BlockPool):
            raise TypeError(f"pool must be a BlockPool, got {pool!r}")
        manager = SharedBlockManager(pool) if manager is None else check_manager(manager, pool)
        super().__init__(pool, num_layers, num_kv_heads, head_dim, dtype=dtype, device=device)
        self.manager: ForkAppendFree = manager
        self.copied_slots = 0

    @classmethod
    def for_model(
        cls, model: ShapedModel, pool: BlockPool, *, manager: ForkAppendFree | None = None
    ) -> SharingPagedKVCache:
        """An empty sharing cache shaped for ``model`` (a tiny transformer, or anything whose
        ``config`` gives ``num_layers``, ``num_kv_heads`` and ``head_dim``), over ``pool``."""
        c = model.config
        return cls(pool, c.num_layers, c.num_kv_heads, c.head_dim, manager=manager)

    @property
    def cow_count(self) -> int:
        """Copy-on-writes made so far (the manager's count)."""
        return self.manager.cow_count

    def fork_sequence(self, parent_id: Hashable, child_id: Hashable) -> None:
        """Create ``child_id`` sharing every block (and so every layer's K/V) of ``parent_id``.

        Only between forward passes: a parent in the middle of a pass raises ``ValueError``.
        Errors leave the cache unchanged.
        """
        filled = self._check_seq(parent_id)
        if len(set(filled)) != 1:
            raise ValueError(
                f"sequence {parent_id!r} is in the middle of a forward pass (tokens per layer: "
                f"{filled}); fork it after the last layer has been written"
            )
        if not isinstance(child_id, Hashable):
            raise TypeError(f"a sequence id must be hashable (an int or a str), got {child_id!r}")
        if child_id in self._filled:
            raise ValueError(
                f"sequence {child_id!r} already exists; pick a new id or free_sequence it first"
            )
        self.manager.fork(parent_id, child_id)
        self._filled[child_id] = list(filled)
        self._tables[child_id] = SharedTableView(self, child_id)  # type: ignore[assignment]

    def block_table(self, seq_id: Hashable) -> SharedTableView:  # type: ignore[override]
        """A read-only view of sequence ``seq_id``'s block table (ids, counts, entries)."""
        self._check_seq(seq_id)
        return self._tables[seq_id]  # type: ignore[return-value]

    def blocks_needed(self, new_tokens: Mapping[Hashable, int]) -> int:
        """Free blocks a step appending ``new_tokens[seq_id]`` tokens to each sequence takes,
        copy-on-writes included.

        ``m`` sequences of this step that share a partly filled last block with reference count
        ``r`` copy it ``min(m, r − 1)`` times: the last writer of a block nobody else still holds
        writes in place.
        """
        size = self.block_size
        total = 0
        writers: dict[int, int] = {}
        for seq_id, count in new_tokens.items():
            length = self._check_seq(seq_id)[-1]
            count = check_count("new token count", count)
            blocks = self._tables[seq_id].block_ids
            total += ceil_div(length + count, size) - len(blocks)
            if count > 0 and length % size and self.pool.ref_count(blocks[-1]) > 1:
                writers[blocks[-1]] = writers.get(blocks[-1], 0) + 1
        for block, count in writers.items():
            total += min(count, self.pool.ref_count(block) - 1)
        return total

    # ------------------------------------------------------------------ storage hooks

    def _add(self, seq_id: Hashable) -> None:
        self.manager.add_sequence(seq_id)
        self._tables[seq_id] = SharedTableView(self, seq_id)  # type: ignore[assignment]

    def _free(self, seq_id: Hashable) -> None:
        self.manager.free(seq_id)
        del self._tables[seq_id]

    def _slots(self, seq_id: Hashable, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Physical block and offset of each token position in ``start .. stop - 1``."""
        positions = torch.arange(start, stop, device=self.device)
        blocks = torch.tensor(self._tables[seq_id].block_ids, dtype=torch.long, device=self.device)
        return blocks[positions // self.block_size], positions % self.block_size

    def _store(
        self, seq_id: Hashable, layer: int, start: int, k: torch.Tensor, v: torch.Tensor
    ) -> None:
        if layer == 0:
            before = self._tables[seq_id].block_ids
            self.manager.append(seq_id, k.shape[0])  # all or nothing
            after = self._tables[seq_id].block_ids
            size = self.block_size
            expected = ceil_div(start + k.shape[0], size)
            if len(after) != expected:
                raise RuntimeError(
                    f"the block manager's append({seq_id!r}, {k.shape[0]}) left "
                    f"{len(after)} blocks for {start + k.shape[0]} tokens; a sequence of that "
                    f"length needs exactly {expected} blocks of {size} slots"
                )
            for i, (old, new) in enumerate(zip(before, after, strict=False)):
                filled = min(size, start - i * size)
                if old != new and filled > 0:  # copy-on-write: the old block's rows, all layers
                    for k_blocks, v_blocks in zip(self._k, self._v, strict=True):
                        k_blocks[new, :filled] = k_blocks[old, :filled]
                        v_blocks[new, :filled] = v_blocks[old, :filled]
                    self.copied_slots += filled
        blocks, offsets = self._slots(seq_id, start, start + k.shape[0])
        self._k[layer][blocks, offsets] = k
        self._v[layer][blocks, offsets] = v
