"""§6's scheduler drawn (kvcourse.viz.preemption), headless: the frames record the real
scheduler's pool and queue, the victim is the latest-arrived and goes back to the queue's front,
and the drawing marks the blocks it gave back."""

import pytest

from kvcourse.serving import PreemptEarliest
from kvcourse.viz import (
    PREEMPTION_DEMO,
    draw_preemption_frame,
    frame_note,
    preemption_frames,
    preemption_frames_figure,
)
from kvcourse.workloads import Request


def test_the_demo_preempts_the_latest_once_and_every_request_finishes():
    frames = preemption_frames()
    assert len(frames) == 11
    hit = [f for f in frames if f.victims]
    assert len(hit) == 1
    step = hit[0]
    assert step.iteration == 4 and step.needy == "A"
    (victim,) = step.victims
    assert victim.name == "C" and victim.blocks == (4, 5) and victim.tokens == 6
    # Requeued at the front, ahead of D, to recompute its 4 prompt + 2 generated tokens.
    assert [w.name for w in step.waiting] == ["C", "D"] and step.waiting[0].recompute
    assert step.admitted == () and frame_note(step).startswith("A needs a block")
    assert "C (latest) preempted, 2 blocks freed" in frame_note(step)
    finished = [f.name for fr in frames for f in fr.finished]
    assert sorted(finished) == ["A", "B", "C", "D"]
    # D waits at step 3 because its prompt does not fit: admission only when it fits.
    assert frames[2].refused == "D" and frames[2].free_at_admission == 0


def test_frames_never_hand_out_a_block_twice():
    for f in preemption_frames():
        held = [b for r in f.running for b in r.blocks]
        assert len(held) == len(set(held)) <= f.num_blocks
        for r in f.running:
            assert len(r.blocks) == -(-r.tokens // f.block_size)


def test_preempting_the_earliest_takes_the_oldest():
    frames = preemption_frames(scheduler=PreemptEarliest)
    victims = [v.name for f in frames for v in f.victims]
    assert victims == ["A"]
    assert "(earliest)" in frame_note(next(f for f in frames if f.victims))


def test_the_figure_marks_the_freed_blocks_and_the_queue(new_axes, render):
    frames = preemption_frames()
    fig = preemption_frames_figure(frames)
    render(fig)
    fig, ax = new_axes((9.0, 2.0))
    drawn = draw_preemption_frame(ax, frames[3])
    assert sorted(b for b, r in drawn.blocks.items() if r in drawn.freed) == [4, 5]
    assert len(drawn.queue) == 2 and drawn.note.get_text() == frame_note(frames[3])
    assert drawn.label.get_text() == "step 4"
    render(fig)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="non-empty"):
        preemption_frames_figure([])
    small = preemption_frames([Request(0, 0.0, 2, 2)], num_blocks=2)
    with pytest.raises(ValueError, match="same pool"):
        preemption_frames_figure(preemption_frames()[:1] + small)
    with pytest.raises(TypeError, match="VllmPaperScheduler"):
        preemption_frames(PREEMPTION_DEMO, scheduler=object)


def test_swap_plot_draws_three_curves_and_the_crossover(render):
    from kvcourse.serving import ex6, swap_crossover_block_size
    from kvcourse.viz import swap_vs_recompute_plot

    rows = [ex6(b) for b in (8, 16, 32, 64)]
    ax = swap_vs_recompute_plot(rows, crossover=swap_crossover_block_size())
    assert len(ax.lines) == 4  # three curves and the crossover line
    flat = ax.lines[2].get_ydata()
    assert len(set(flat)) == 1  # recompute does not depend on the block size
    render(ax.figure)
    with pytest.raises(ValueError, match="non-empty"):
        swap_vs_recompute_plot([])
