"""Tests for kvcourse.generation._setup: the set-up and tear-down the §5 drivers share."""

from __future__ import annotations

import pytest

from kvcourse.blocks import BlockPool, SharedBlockManager
from kvcourse.generation._setup import (
    append_counting,
    check_model_and_prompt,
    fraction_saved,
    free_all,
    new_manager,
)
from kvcourse.model import TinyTransformer


def test_new_manager_is_checked_and_over_a_fresh_pool():
    manager = new_manager(SharedBlockManager, 8, 4)
    assert (manager.pool.num_blocks, manager.pool.block_size, manager.pool.num_used) == (8, 4, 0)
    with pytest.raises(ValueError, match="same BlockPool"):
        new_manager(lambda pool: SharedBlockManager(BlockPool(8, 4)), 8, 4)
    with pytest.raises(TypeError, match="lacks"):
        new_manager(lambda pool: object(), 8, 4)


def test_append_counting_and_free_all():
    manager = new_manager(SharedBlockManager, 8, 4)
    manager.add_sequence(0)
    manager.append(0, 6)
    manager.fork(0, 1)
    assert append_counting(manager, 1, 6, 1) == (1, 2)  # block 1's 2 filled slots copied
    assert append_counting(manager, 0, 6, 1) == (0, 0)  # the last holder writes in place
    assert free_all(manager, [0, 1]) == 0


def test_fraction_saved():
    assert fraction_saved(3, 4) == 0.25 and fraction_saved(0, 0) == 0.0


def test_check_model_and_prompt():
    model = TinyTransformer(seed=0)
    assert check_model_and_prompt(model, (1, 2)) == [1, 2]
    with pytest.raises(TypeError, match="TinyTransformer"):
        check_model_and_prompt("model", [1])
    with pytest.raises(ValueError, match="prompt is empty"):
        check_model_and_prompt(model, [])
