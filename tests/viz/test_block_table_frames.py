"""§4's recorded block-table frames (kvcourse.viz.block_table_frames): a real block table, step
by step, as the lecture's example shows it."""

import pytest

from kvcourse.blocks import BlockPool
from kvcourse.viz import (
    FOUR_SCORE_OUTPUT,
    FOUR_SCORE_PROMPT,
    FOUR_SCORE_TAKEN,
    PoolState,
    block_table_frames,
    four_score_frames,
)
from kvcourse.viz.block_table_frames import check_frames


def test_four_score_frames_follow_the_lecture():
    frames = four_score_frames(2)
    assert [f.block_ids for f in frames] == [(1, 4), (1, 4), (1, 4, 7)]
    assert [f.new_blocks for f in frames] == [(1, 4), (), (7,)]
    assert [f.wasted_slots for f in frames] == [1, 0, 3]
    assert [len(f.tokens) for f in frames] == [7, 8, 9]
    assert frames[0].tokens == FOUR_SCORE_PROMPT
    assert frames[2].tokens[-1] == FOUR_SCORE_OUTPUT[1]
    # Logically adjacent blocks are not physically adjacent.
    ids = frames[-1].block_ids
    assert all(b - a > 1 for a, b in zip(ids, ids[1:], strict=False))
    # The pool outside this sequence is untouched: others keep their blocks.
    assert frames[-1].pool.used == frozenset({*FOUR_SCORE_TAKEN, 1, 4, 7})


def test_frame_labels_say_what_each_step_did():
    labels = [f.label for f in four_score_frames(2)]
    assert labels[0] == "Prefill: 7 prompt tokens → allocates blocks 1, 4"
    assert labels[1] == "Decode step 1: “fathers” → fills a free slot, no new block"
    assert labels[2] == "Decode step 2: “brought” → allocates block 7"


def test_other_prompts_pools_and_block_sizes():
    frames = block_table_frames(["a", "b", "c"], ["d"], block_size=2, num_blocks=4, taken=[0])
    assert [f.block_ids for f in frames] == [(1, 2), (1, 2)]
    assert frames[-1].wasted_slots == 0 and frames[-1].new_tokens == 1
    assert len(four_score_frames(0)) == 1 and len(four_score_frames(5)) == 6


def test_pool_state_is_a_frozen_picture():
    pool = BlockPool(4, 2, taken=[3])
    state = PoolState.of(pool)
    pool.allocate()
    assert state == PoolState(4, 2, frozenset({3}))
    with pytest.raises(TypeError):
        PoolState.of("pool")


def test_block_table_frames_validates_and_runs_out():
    with pytest.raises(ValueError):
        block_table_frames([])
    with pytest.raises(TypeError):
        block_table_frames("Four score")
    with pytest.raises(TypeError):
        block_table_frames(["a"], "b")
    with pytest.raises(MemoryError):  # OutOfBlocksError: 3 free blocks of 4 cannot hold 13
        block_table_frames(["w"] * 13)
    with pytest.raises(ValueError):
        four_score_frames(99)
    with pytest.raises(ValueError):
        four_score_frames(-1)
    with pytest.raises(TypeError):
        four_score_frames("2")


def test_check_frames():
    frames = four_score_frames(1)
    assert check_frames(iter(frames)) == frames
    with pytest.raises(ValueError, match="non-empty"):
        check_frames([])
    with pytest.raises(ValueError, match="BlockTableFrame"):
        check_frames([*frames, "x"])
