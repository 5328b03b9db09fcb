"""What can go wrong in block bookkeeping, as exception classes the whole library shares."""

from __future__ import annotations


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
