"""What can go wrong in block bookkeeping: the exception classes the whole library shares, and the
block pool's argument check and messages."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kvcourse._checks import as_index


class OutOfBlocksError(MemoryError):
    """Raised when a block is needed and the pool has no free block left.

    A serving system answers it by freeing a finished sequence or preempting a running one (§6);
    the pool itself never takes blocks away from anybody.
    """


class SharedBlockWriteError(RuntimeError):
    """Raised when an append would write into a block that other block tables also hold.

    Writing there would change the other sequences' KV too; copy-on-write (§5) must first give this
    sequence its own copy of the block.
    """


class UnknownSequenceError(KeyError):
    """Raised for a sequence id that was never added (or has already been freed)."""

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0]) if self.args else ""


def out_of_blocks_message(pool: Any, needed: int) -> str:
    """What :class:`OutOfBlocksError` says when ``needed`` blocks were asked of ``pool`` (a
    :class:`~kvcourse.blocks.pool.BlockPool`) and fewer are free."""
    return (
        f"out of KV blocks: needed {needed} but only {pool.num_free} of the pool's "
        f"{pool.num_blocks} blocks (block size {pool.block_size}) are free; free a finished "
        f"sequence or preempt a running one (§6), or create a pool with more blocks"
    )


def free_block_message(block_id: int, action: str) -> str:
    """What the pool says when asked to ``action`` (``"release"``, ``"hash"``, ``"share"`` …)
    block ``block_id``, which is free."""
    if action == "release":
        return (
            f"cannot release block {block_id}: it is already free (reference count 0), so this "
            f"would be a double free; release a block once per reference you hold"
        )
    if action == "hash":
        return (
            f"cannot set the hash of block {block_id}: it is free (reference count 0); hash a "
            f"block while the sequence that filled it still holds it"
        )
    return (
        f"cannot {action} block {block_id}: it is free (reference count 0); only a block that "
        f"some sequence holds can be shared, so allocate() it first"
    )


def check_taken(taken: object, num_blocks: int) -> list[int]:
    """The block ids of a pool's ``taken`` argument (blocks in use from the start), checked: a list
    of distinct ids of a pool of ``num_blocks`` blocks; ``TypeError`` or ``ValueError`` if not."""
    if isinstance(taken, (str, bytes)) or not isinstance(taken, Iterable):
        raise TypeError(f"taken must be a list of block ids, got {taken!r}")
    taken_ids = [as_index(b, "each id in taken") for b in taken]
    for block_id in taken_ids:
        if not 0 <= block_id < num_blocks:
            raise ValueError(
                f"taken block {block_id} does not exist: a pool of {num_blocks} blocks has "
                f"ids 0..{num_blocks - 1}"
            )
    if len(set(taken_ids)) != len(taken_ids):
        duplicates = sorted({b for b in taken_ids if taken_ids.count(b) > 1})
        raise ValueError(f"taken lists blocks {duplicates} more than once; list each once")
    return taken_ids
