"""§5's recorded sharing frames (kvcourse.viz.sharing_frames): block tables, reference counts
and copy-on-writes taken from a block manager, as in Exercise 4 and Fig. 8 of the vLLM paper."""

import pytest

from kvcourse.blocks import BlockPool, SharedBlockManager
from kvcourse.viz import (
    FORK_SAMPLE_WORDS,
    SYSTEM_PROMPT,
    SYSTEM_QUESTIONS,
    fork_cow_frames,
    shared_prefix_frame,
    sharing_frame,
)
from kvcourse.viz.style import SEQUENCE_COLORS


def test_fork_frames_follow_exercise_4():
    frames = fork_cow_frames()
    n = len(FORK_SAMPLE_WORDS)
    assert len(frames) == n + 1
    first = frames[0]
    # 7 prompt tokens in blocks of 4: blocks 0 and 1, each listed by all three samples.
    assert [s.block_ids for s in first.sequences] == [(0, 1)] * n
    assert first.ref_counts[:2] == (n, n) and first.copies == ()
    # The first n - 1 writers copy block 1; the last writes in place.
    assert [f.copies for f in frames[1:]] == [((1, 2),), ((1, 3),), ()]
    assert frames[-1].ref_counts == (3, 1, 1, 1, 0)
    assert frames[1].changed_refs == (1, 2)
    assert "copy it to block 2" in frames[1].label and "in place" in frames[-1].label
    assert frames[-1].num_used == 4 and frames[-1].blocks_unshared == 6


def test_frame_contents_and_new_slots():
    frames = fork_cow_frames()
    after = frames[1]  # sample 1 wrote "fathers" into its copy, block 2
    assert after.block_tokens(2) == ("years", "ago", "our", "fathers")
    assert after.block_is_new(2) == (False, False, False, True)
    assert after.block_tokens(1) == ("years", "ago", "our")
    assert after.block_tokens(4) == ()  # free
    assert after.sequences[0].new_tokens == 1 and after.sequences[1].new_tokens == 0


def test_prompt_filling_its_last_block_copies_nothing():
    frames = fork_cow_frames(["a", "b", "c", "d"], ["x", "y"], num_blocks=4)
    assert all(f.copies == () for f in frames)
    assert "full" in frames[1].label and "new block" in frames[1].label


def test_fork_frames_accept_another_manager():
    made = []

    def factory(pool):
        made.append(SharedBlockManager(pool))
        return made[-1]

    frames = fork_cow_frames(manager_factory=factory)
    assert len(made) == 1 and made[0].cow_count == 2
    assert frames[-1].ref_counts == (3, 1, 1, 1, 0)


def test_sharing_frame_checks_token_counts():
    manager = SharedBlockManager(BlockPool(4, 4))
    manager.add_sequence("a")
    manager.append("a", 5)
    with pytest.raises(ValueError, match="5 tokens|2 blocks"):
        sharing_frame(manager, {"a": ["t"] * 9}, "wrong")
    frame = sharing_frame(manager, {"a": ["t"] * 5}, "right", names={"a": "seq A"})
    assert frame.sequences[0].name == "seq A" and frame.sequences[0].block_ids == (0, 1)
    with pytest.raises(TypeError):
        sharing_frame(object(), {}, "not a manager")


def test_shared_prefix_frame():
    frame = shared_prefix_frame()
    requests = len(SYSTEM_QUESTIONS)
    assert len(frame.sequences) == requests + 1
    assert frame.ref_counts[0] == frame.ref_counts[1] == requests + 1
    assert frame.copies == ()
    prefix_blocks = len(SYSTEM_PROMPT) // 4
    assert frame.num_used == prefix_blocks + requests
    assert frame.num_blocks == frame.num_used + 1  # one free block to show the pool
    assert (
        frame.blocks_unshared
        == sum(-(-(len(SYSTEM_PROMPT) + len(q)) // 4) for q in SYSTEM_QUESTIONS) + prefix_blocks
    )


def test_each_sequence_gets_its_own_colour():
    frame = shared_prefix_frame()
    assert [s.color for s in frame.sequences] == list(SEQUENCE_COLORS[: len(frame.sequences)])
    assert frame.sequences[0].name == "system\nprompt"


def test_demos_reject_empty_input():
    with pytest.raises(ValueError):
        fork_cow_frames([], ["x"])
    with pytest.raises(ValueError):
        fork_cow_frames(["a"], [])
    with pytest.raises(ValueError):
        shared_prefix_frame([], [("q",)])
