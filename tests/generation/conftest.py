"""Block managers written independently of the reference, for the §5 drivers' tests: one right
(``list_manager``), one that forgets copy-on-write (``no_copy_manager``)."""

from __future__ import annotations

import pytest

from kvcourse.blocks import BlockPool


class ListManager:
    """A student-style implementation written independently of the reference (plain dicts)."""

    def __init__(self, pool: BlockPool) -> None:
        self.pool = pool
        self.cow_count = 0
        self.tables: dict = {}
        self.lengths: dict = {}

    def add_sequence(self, seq_id) -> None:
        self.tables[seq_id], self.lengths[seq_id] = [], 0

    def fork(self, parent_id, child_id) -> None:
        for b in self.tables[parent_id]:
            self.pool.share(b)
        self.tables[child_id] = list(self.tables[parent_id])
        self.lengths[child_id] = self.lengths[parent_id]

    def append(self, seq_id, num_tokens: int = 1) -> None:
        table, size = self.tables[seq_id], self.pool.block_size
        for _ in range(num_tokens):
            if self.lengths[seq_id] % size == 0:
                table.append(self.pool.allocate())
            elif self.pool.ref_count(table[-1]) > 1:
                new = self.pool.allocate()
                self.pool.release(table[-1])
                table[-1] = new
                self.cow_count += 1
            self.lengths[seq_id] += 1

    def free(self, seq_id) -> None:
        for b in self.tables.pop(seq_id):
            self.pool.release(b)
        del self.lengths[seq_id]

    def block_ids(self, seq_id):
        return tuple(self.tables[seq_id])


class NoCopyManager(ListManager):
    """A wrong manager: it forgets copy-on-write and writes into the shared block."""

    def append(self, seq_id, num_tokens: int = 1) -> None:
        table, size = self.tables[seq_id], self.pool.block_size
        for _ in range(num_tokens):
            if self.lengths[seq_id] % size == 0:
                table.append(self.pool.allocate())
            self.lengths[seq_id] += 1


@pytest.fixture
def list_manager() -> type[ListManager]:
    """A right block manager that shares no code with the reference."""
    return ListManager


@pytest.fixture
def no_copy_manager() -> type[NoCopyManager]:
    """A block manager without copy-on-write: siblings overwrite each other's KV."""
    return NoCopyManager
