"""KV caches the tiny transformer can run on (§4): one contiguous, one paged.

Both follow the :class:`~kvcourse.kv.protocols.KVCache` protocol and its write rule (layer 0
first, the same new tokens to every layer; ``length`` advances when the last layer has written),
and admit and retire sequences (:class:`~kvcourse.kv.protocols.ManagedKVCache`).

:class:`ContiguousKVCache` keeps one growing tensor per sequence and layer, as systems did before
PagedAttention. :class:`PagedKVCache` keeps each layer's K and V in block arrays of shape
``[num_blocks, block_size, kv_heads, head_dim]`` shared by all sequences, and gives each sequence
a :class:`~kvcourse.blocks.table.BlockTable` over one :class:`~kvcourse.blocks.pool.BlockPool`;
every layer uses the same block ids. Its :meth:`~PagedKVCache.read` gathers through the block
table, :meth:`~PagedKVCache.paged_view` hands one sequence's blocks to blockwise attention, and
:meth:`~PagedKVCache.kernel_inputs` exports the tensors the paged-attention kernel takes (the
cache's own block arrays, not copies). ``PagedKVCache(..., table_factory=...)`` runs on another
block table with the same interface (:class:`~kvcourse.kv.protocols.BlockTableLike`), such as the
one a student writes in assignment a2. All tensors are PyTorch tensors, float64 by default (so
rounding is visible only at 1e-16); the Triton kernel takes float32, float16 or bfloat16 caches.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import torch

from kvcourse._checks import as_index, ceil_div, check_count, check_positive_int
from kvcourse.blocks.errors import OutOfBlocksError, UnknownSequenceError
from kvcourse.blocks.pool import BlockPool
from kvcourse.blocks.table import BlockTable

# KVCache and ManagedKVCache are used by the callers of these caches; they are named here too for
# code that imports them from this module.
from kvcourse.kv.protocols import BlockTableLike, KVCache, ManagedKVCache  # noqa: F401


@dataclass(frozen=True)
class PagedView:
    """One sequence's KV in one layer, as blockwise attention reads it: the layer's block arrays,
    the sequence's physical block ids in logical order, and how many tokens the layer holds."""

    k_blocks: torch.Tensor
    v_blocks: torch.Tensor
    block_ids: tuple[int, ...]
    length: int


class _LayeredKVCache:
    """Bookkeeping shared by both caches: which sequences exist and how far each layer is filled.

    Subclasses store the tensors (``_store``/``_load``); this class checks every argument before
    either is called, so a failed call leaves the cache unchanged.
    """

    def __init__(
        self,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        *,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
    ) -> None:
        num_layers = check_positive_int("num_layers", num_layers)
        num_kv_heads = check_positive_int("num_kv_heads", num_kv_heads)
        head_dim = check_positive_int("head_dim", head_dim)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch dtype like torch.float64, got {dtype}")
        self.num_layers = num_layers
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.dtype = dtype
        self.device = torch.device(device)
        self._filled: dict[Hashable, list[int]] = {}  # tokens held per layer, per sequence

    # ------------------------------------------------------------------ sequences

    @property
    def seq_ids(self) -> tuple[Hashable, ...]:
        """The live sequences, in the order they were added."""
        return tuple(self._filled)

    def __contains__(self, seq_id: object) -> bool:
        return isinstance(seq_id, Hashable) and seq_id in self._filled

    def add_sequence(self, seq_id: Hashable) -> None:
        """Start an empty sequence ``seq_id`` (any hashable id: an int, a string)."""
        if not isinstance(seq_id, Hashable):
            raise TypeError(f"a sequence id must be hashable (an int or a str), got {seq_id!r}")
        if seq_id in self._filled:
            raise ValueError(
                f"sequence {seq_id!r} already exists; free_sequence({seq_id!r}) first or pick "
                f"another id"
            )
        self._add(seq_id)
        self._filled[seq_id] = [0] * self.num_layers

    def free_sequence(self, seq_id: Hashable) -> None:
        """Forget sequence ``seq_id`` and give back its memory."""
        self._check_seq(seq_id)
        self._free(seq_id)
        del self._filled[seq_id]

    # ------------------------------------------------------------------ the KVCache protocol

    def length(self, seq_id: Hashable) -> int:
        """Tokens of sequence ``seq_id`` stored in every layer (the last layer's count)."""
        return self._check_seq(seq_id)[-1]

    def layer_length(self, seq_id: Hashable, layer: int) -> int:
        """Tokens of sequence ``seq_id`` stored in ``layer`` (ahead of :meth:`length` mid-pass)."""
        return self._check_seq(seq_id)[self._check_layer(layer)]

    def write(self, seq_id: Hashable, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Append the new tokens' ``k`` and ``v``, each ``[new_tokens, kv_heads, head_dim]``, to
        ``layer`` of sequence ``seq_id``. Layers are written in order, layer 0 first; a layer may
        not hold more tokens than the layer before it."""
        filled = self._check_seq(seq_id)
        layer = self._check_layer(layer)
        k = self._check_kv("k", k)
        v = self._check_kv("v", v)
        if k.shape != v.shape:
            raise ValueError(
                f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}"
            )
        new_tokens = k.shape[0]
        if layer == 0 and filled[0] != filled[-1]:
            raise ValueError(
                f"sequence {seq_id!r}: a forward pass is still in progress (layer 0 holds "
                f"{filled[0]} tokens, layer {self.num_layers - 1} only {filled[-1]}); write the "
                f"remaining layers before starting the next pass at layer 0"
            )
        if layer > 0 and filled[layer] + new_tokens > filled[layer - 1]:
            raise ValueError(
                f"sequence {seq_id!r}: writing {new_tokens} tokens to layer {layer} would give it "
                f"{filled[layer] + new_tokens} tokens but layer {layer - 1} has only "
                f"{filled[layer - 1]}; write the layers in order, layer 0 first, the same new "
                f"tokens to each"
            )
        if new_tokens == 0:
            return
        self._store(seq_id, layer, filled[layer], k, v)  # may raise OutOfBlocksError, unchanged
        filled[layer] += new_tokens

    def read(self, seq_id: Hashable, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(K, V)`` of ``layer`` for sequence ``seq_id``, each ``[tokens, kv_heads, head_dim]``,
        in token order. Treat them as read-only."""
        filled = self._check_seq(seq_id)
        layer = self._check_layer(layer)
        return self._load(seq_id, layer, filled[layer])

    # ------------------------------------------------------------------ storage (subclasses)

    def _add(self, seq_id: Hashable) -> None:
        raise NotImplementedError

    def _free(self, seq_id: Hashable) -> None:
        raise NotImplementedError

    def _store(
        self, seq_id: Hashable, layer: int, start: int, k: torch.Tensor, v: torch.Tensor
    ) -> None:
        raise NotImplementedError

    def _load(self, seq_id: Hashable, layer: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    # ------------------------------------------------------------------ checks

    def _check_seq(self, seq_id: Hashable) -> list[int]:
        if not isinstance(seq_id, Hashable) or seq_id not in self._filled:
            known = ", ".join(repr(s) for s in list(self._filled)[:10]) or "none"
            raise UnknownSequenceError(
                f"unknown sequence {seq_id!r} (live sequences: {known}); call "
                f"add_sequence({seq_id!r}) before writing to it, and do not use it after "
                f"free_sequence"
            )
        return self._filled[seq_id]

    def _check_layer(self, layer: object) -> int:
        layer = as_index(layer, "layer")
        if not 0 <= layer < self.num_layers:
            raise IndexError(
                f"layer {layer} does not exist: this cache has layers 0..{self.num_layers - 1}"
            )
        return layer

    def _check_kv(self, name: str, x: object) -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            raise TypeError(
                f"{name} must be a torch.Tensor, got {type(x).__name__}; convert a NumPy array "
                f"with torch.from_numpy"
            )
        expected = (self.num_kv_heads, self.head_dim)
        if x.ndim != 3 or tuple(x.shape[1:]) != expected:
            raise ValueError(
                f"{name} must have shape [new_tokens, kv_heads={expected[0]}, "
                f"head_dim={expected[1]}], got {tuple(x.shape)}"
            )
        return x.to(dtype=self.dtype, device=self.device)


class ContiguousKVCache(_LayeredKVCache):
    """Each sequence's K and V in one growing tensor per layer: the pre-paging layout, and the
    reference the paged cache is checked against."""

    def __init__(
        self,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        *,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__(num_layers, num_kv_heads, head_dim, dtype=dtype, device=device)
        self._k: dict[Hashable, list[torch.Tensor]] = {}
        self._v: dict[Hashable, list[torch.Tensor]] = {}

    def _add(self, seq_id: Hashable) -> None:
        empty = torch.empty(
            0, self.num_kv_heads, self.head_dim, dtype=self.dtype, device=self.device
        )
        self._k[seq_id] = [empty] * self.num_layers
        self._v[seq_id] = [empty] * self.num_layers

    def _free(self, seq_id: Hashable) -> None:
        del self._k[seq_id], self._v[seq_id]

    def _store(
        self, seq_id: Hashable, layer: int, start: int, k: torch.Tensor, v: torch.Tensor
    ) -> None:
        self._k[seq_id][layer] = torch.cat([self._k[seq_id][layer], k])
        self._v[seq_id][layer] = torch.cat([self._v[seq_id][layer], v])

    def _load(self, seq_id: Hashable, layer: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self._k[seq_id][layer], self._v[seq_id][layer]


class PagedKVCache(_LayeredKVCache):
    """K and V in fixed-size blocks shared by all sequences, found through per-sequence block
    tables over ``pool``.

    Each layer has one K and one V array of shape ``[pool.num_blocks, pool.block_size, kv_heads,
    head_dim]``; physical block ``b`` of every layer belongs to the same sequence. Writing layer 0
    allocates blocks on demand (all or nothing: an ``OutOfBlocksError`` leaves everything as it
    was); later layers fill the slots layer 0 reserved.

    ``table_factory(pool)`` makes each sequence's block table; by default a
    :class:`~kvcourse.blocks.table.BlockTable`. Any other :class:`BlockTableLike` works: the cache
    then calls its ``append`` when layer 0 writes, asks its ``slot_of`` where each token's K and V
    go (and come from), hands its ``block_ids`` to attention and calls ``free`` when the sequence
    is freed.
    """

    def __init__(
        self,
        pool: BlockPool,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        *,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
        table_factory: Callable[[BlockPool], BlockTableLike] | None = None,
    ) -> None:
        if not isinstance(pool, BlockPool):
            raise TypeError(f"pool must be a BlockPool, got {pool!r}")
        if table_factory is not None and not callable(table_factory):
            raise TypeError(
                f"table_factory must be a class or function that takes the pool and returns a "
                f"block table, got {table_factory!r}"
            )
        super().__init__(num_layers, num_kv_heads, head_dim, dtype=dtype, device=device)
        self.pool = pool
        self._table_factory = BlockTable if table_factory is None else table_factory
        shape = (pool.num_blocks, pool.block_size, num_kv_heads, head_dim)
        self._k = [torch.zeros(shape, dtype=dtype, device=self.device) for _ in range(num_layers)]
        self._v = [torch.zeros(shape, dtype=dtype, device=self.device) for _ in range(num_layers)]
        self._tables: dict[Hashable, BlockTableLike] = {}

    @property
    def block_size(self) -> int:
        """Token slots per block."""
        return self.pool.block_size

    def blocks_needed(self, new_tokens: Mapping[Hashable, int]) -> int:
        """How many free blocks a step appending ``new_tokens[seq_id]`` tokens to each listed
        sequence would take from the pool."""
        total = 0
        for seq_id, count in new_tokens.items():
            self._check_seq(seq_id)
            table = self._tables[seq_id]
            if isinstance(table, BlockTable):
                total += table.blocks_needed(count)
                continue
            count = check_count("the number of new tokens", count)
            total += ceil_div(table.num_tokens + count, self.block_size) - len(table.block_ids)
        return total

    def check_room(self, new_tokens: Mapping[Hashable, int]) -> None:
        """Raise :class:`~kvcourse.blocks.pool.OutOfBlocksError` unless the pool has the blocks a
        step appending ``new_tokens[seq_id]`` tokens to each sequence needs.

        :meth:`TinyTransformer.forward <kvcourse.model.TinyTransformer.forward>` calls
        it before writing anything, so a batch that does not fit changes nothing.
        """
        needed = self.blocks_needed(new_tokens)
        if needed > self.pool.num_free:
            raise OutOfBlocksError(
                f"this step needs {needed} new KV blocks but only {self.pool.num_free} of the "
                f"pool's {self.pool.num_blocks} are free (block size {self.block_size}); free a "
                f"finished sequence or preempt one (§6), or run fewer sequences this step"
            )

    def block_table(self, seq_id: Hashable) -> BlockTableLike:
        """The block table of sequence ``seq_id`` (for inspection and drawing; do not append to it
        directly, or the cache's layer counts fall out of step)."""
        self._check_seq(seq_id)
        return self._tables[seq_id]

    def layer_blocks(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The K and V block arrays of ``layer``, each ``[num_blocks, block_size, Hkv, D]``."""
        layer = self._check_layer(layer)
        return self._k[layer], self._v[layer]

    def paged_view(self, seq_id: Hashable, layer: int) -> PagedView:
        """Sequence ``seq_id`` in ``layer`` as blocks, for :func:`blockwise_attention`."""
        filled = self._check_seq(seq_id)
        layer = self._check_layer(layer)
        block_ids = tuple(int(b) for b in self._tables[seq_id].block_ids)
        return PagedView(self._k[layer], self._v[layer], block_ids, filled[layer])

    def kernel_inputs(
        self, seq_ids: Sequence[Hashable], layer: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The paged-attention kernel's inputs for a batch of sequences and one layer.

        Returns ``(k_cache, v_cache, block_tables, seq_lens)``: the layer's block arrays
        ``[num_blocks, block_size, kv_heads, head_dim]`` (the cache's own storage, not a copy),
        ``block_tables`` ``[batch, max_blocks]`` int32 (row ``i`` lists sequence ``i``'s physical
        blocks in logical order, padded with 0, which the kernel never reads because it stops at
        the sequence's length) and ``seq_lens`` ``[batch]`` int32 (tokens held in this layer).
        """
        if isinstance(seq_ids, (str, bytes)) or not isinstance(seq_ids, Sequence) or not seq_ids:
            raise ValueError(f"seq_ids must be a non-empty list of sequence ids, got {seq_ids!r}")
        layer = self._check_layer(layer)
        lengths = [self._check_seq(s)[layer] for s in seq_ids]
        rows = [self._tables[s].block_ids for s in seq_ids]
        width = max(1, max(len(r) for r in rows))
        block_tables = torch.zeros(len(rows), width, dtype=torch.int32)
        for i, row in enumerate(rows):
            block_tables[i, : len(row)] = torch.tensor(row, dtype=torch.int32)
        seq_lens = torch.tensor(lengths, dtype=torch.int32)
        return (
            self._k[layer],
            self._v[layer],
            block_tables.to(self.device),
            seq_lens.to(self.device),
        )

    def _add(self, seq_id: Hashable) -> None:
        self._tables[seq_id] = self._table_factory(self.pool)

    def _free(self, seq_id: Hashable) -> None:
        self._tables.pop(seq_id).free()

    def _slots(self, seq_id: Hashable, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Physical block and offset of each token position in ``start .. stop - 1``."""
        table = self._tables[seq_id]
        if not isinstance(table, BlockTable):  # another table: ask it, token by token
            slots = [table.slot_of(position) for position in range(start, stop)]
            blocks = torch.tensor([int(b) for b, _ in slots], dtype=torch.long, device=self.device)
            offsets = torch.tensor([int(o) for _, o in slots], dtype=torch.long, device=self.device)
            return blocks, offsets
        positions = torch.arange(start, stop, device=self.device)
        blocks = torch.tensor(table.block_ids, dtype=torch.long, device=self.device)
        return blocks[positions // self.block_size], positions % self.block_size

    def _store(
        self, seq_id: Hashable, layer: int, start: int, k: torch.Tensor, v: torch.Tensor
    ) -> None:
        if layer == 0:
            self._tables[seq_id].append(k.shape[0])  # all or nothing
        blocks, offsets = self._slots(seq_id, start, start + k.shape[0])
        self._k[layer][blocks, offsets] = k
        self._v[layer][blocks, offsets] = v

    def _load(self, seq_id: Hashable, layer: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        blocks, offsets = self._slots(seq_id, 0, count)
        return self._k[layer][blocks, offsets], self._v[layer][blocks, offsets]
