"""Set-up and tear-down every §5 driver repeats: checking the model and prompt, a fresh pool with
a block manager over it, an append that counts its copy-on-writes, freeing at the end, and the
fraction of memory that sharing saved."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from kvcourse.blocks.pool import BlockPool
from kvcourse.blocks.sharing import ForkAppendFree, check_manager
from kvcourse.model import TinyTransformer

ManagerFactory = Callable[[BlockPool], ForkAppendFree]
"""Builds a block manager over a pool: :class:`~kvcourse.blocks.sharing.SharedBlockManager`, or
yours."""


def new_manager(factory: ManagerFactory, num_blocks: int, block_size: int) -> ForkAppendFree:
    """``factory``'s manager over a fresh pool of ``num_blocks`` blocks of ``block_size`` slots,
    checked to have the :class:`~kvcourse.blocks.sharing.ForkAppendFree` interface on that pool."""
    pool = BlockPool(num_blocks, block_size)
    return check_manager(factory(pool), pool)


def append_counting(
    manager: ForkAppendFree, seq_id: Hashable, length: int, num_tokens: int
) -> tuple[int, int]:
    """Append and return ``(copy-on-writes, token slots copied)`` that this append made; the
    sequence held ``length`` tokens before, so a copied block held ``length mod B`` of them."""
    before = manager.cow_count
    manager.append(seq_id, num_tokens)
    cows = manager.cow_count - before
    return cows, cows * (length % manager.pool.block_size)


def free_all(manager: ForkAppendFree, seq_ids: Sequence[Hashable]) -> int:
    """Free ``seq_ids`` and return how many blocks are still used afterwards (leaked)."""
    for seq_id in seq_ids:
        manager.free(seq_id)
    return manager.pool.num_used


def fraction_saved(shared: int, unshared: int) -> float:
    """``1 − shared / unshared``: the memory sharing saved, a fraction (0 when nothing is held)."""
    return 1.0 - shared / unshared if unshared else 0.0


def check_model_and_prompt(model: object, prompt: Sequence[int]) -> list[int]:
    """Refuse anything but a :class:`~kvcourse.model.TinyTransformer` and an empty prompt; return
    the prompt as a list of plain ``int`` token ids."""
    if not isinstance(model, TinyTransformer):
        raise TypeError(f"model must be a TinyTransformer, got {type(model).__name__}")
    tokens = [int(t) for t in prompt]
    if not tokens:
        raise ValueError("the prompt is empty; give at least one token id")
    return tokens
