"""Workload generators, the block-table drawings and the JupyterLab stepper (all headless)."""

import io
import math

import pytest
from matplotlib.figure import Figure

from kvcourse.blocks import (
    BlockPool,
    BlockTable,
)
from kvcourse.viz import (
    FOUR_SCORE_PROMPT,
    BlockTableStepper,
    PoolState,
    block_size_waste,
    block_size_waste_plot,
    block_table_animation,
    block_table_frames,
    block_table_frames_figure,
    block_table_stepper,
    draw_block_table,
    draw_system_overview,
    four_score_frames,
)
from kvcourse.workloads import (
    ALPACA,
    SHAREGPT,
    LengthDistribution,
    Request,
    alpaca_like,
    generate_requests,
    poisson_arrivals,
    sample_lengths,
    sharegpt_like,
    summarize,
)

# ------------------------------------------------------------------------------ workloads

# Realised means the workloads module documents (100,000 requests, seed 0), and the tolerance a
# 20,000-request sample must meet for any seed we try.
DOCUMENTED = {"ShareGPT-like": (160.8, 335.0, 495.8), "Alpaca-like": (19.0, 58.1, 77.1)}
PAPER = {"ShareGPT-like": (161, 338), "Alpaca-like": (19, 58)}
TOLERANCE = 0.03


def test_same_seed_same_workload_other_seed_other_workload():
    assert sharegpt_like(500, rate=2.0, seed=7) == sharegpt_like(500, rate=2.0, seed=7)
    assert sharegpt_like(500, seed=7) != sharegpt_like(500, seed=8)
    assert sample_lengths(300, ALPACA, seed=1) == sample_lengths(300, ALPACA, seed=1)


def test_the_rate_moves_arrivals_but_keeps_lengths():
    slow = sharegpt_like(200, rate=1.0, seed=4)
    fast = sharegpt_like(200, rate=10.0, seed=4)
    assert [(r.prompt_len, r.output_len) for r in slow] == [
        (r.prompt_len, r.output_len) for r in fast
    ]
    assert fast[-1].arrival_s < slow[-1].arrival_s


@pytest.mark.parametrize("dist", [SHAREGPT, ALPACA], ids=lambda d: d.name)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_means_match_the_documented_and_the_paper_means(dist, seed):
    stats = summarize(generate_requests(20_000, dist, seed=seed))
    prompt, output, total = DOCUMENTED[dist.name]
    for got, want, what in (
        (stats.mean_prompt, prompt, "prompt"),
        (stats.mean_output, output, "output"),
        (stats.mean_total, total, "total"),
    ):
        assert abs(got - want) <= TOLERANCE * want, f"{dist.name} seed {seed}: mean {what}"
    paper_prompt, paper_output = PAPER[dist.name]
    assert abs(stats.mean_prompt - paper_prompt) <= TOLERANCE * paper_prompt
    assert abs(stats.mean_output - paper_output) <= TOLERANCE * paper_output


TIGHT = LengthDistribution("tight", 50, 60, 1.5, 1.5, 64)


@pytest.mark.parametrize("dist", [SHAREGPT, ALPACA, TIGHT], ids=lambda d: d.name)
def test_lengths_stay_within_bounds(dist):
    requests = generate_requests(5_000, dist, seed=3)
    assert all(isinstance(r, Request) for r in requests)
    assert all(r.prompt_len >= 1 and r.output_len >= 1 for r in requests)
    assert all(r.total_len <= dist.max_total for r in requests)
    assert all(isinstance(r.prompt_len, int) and isinstance(r.output_len, int) for r in requests)
    assert [r.request_id for r in requests] == list(range(5_000))


def test_clipping_hits_the_limit_for_a_small_context():
    requests = generate_requests(2_000, TIGHT, seed=0)
    assert max(r.total_len for r in requests) == 64


def test_offline_batch_arrives_at_time_zero():
    assert {r.arrival_s for r in alpaca_like(50)} == {0.0}


@pytest.mark.parametrize("rate", [0.5, 3.0, 40.0])
def test_poisson_gaps_have_mean_one_over_rate(rate):
    times = poisson_arrivals(20_000, rate, seed=5)
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    assert all(g > 0 for g in gaps), "arrival times must increase"
    assert abs(sum(gaps) / len(gaps) - 1 / rate) <= 0.03 / rate
    assert abs(summarize(sharegpt_like(20_000, rate=rate, seed=5)).rate - rate) <= 0.03 * rate


def test_poisson_start_and_empty():
    assert poisson_arrivals(0, 1.0) == []
    assert min(poisson_arrivals(10, 1.0, start_s=100.0)) > 100.0
    assert sharegpt_like(0) == []


@pytest.mark.parametrize(
    "call",
    [
        lambda: sharegpt_like(-1),
        lambda: sharegpt_like(2.5),
        lambda: sharegpt_like(True),
        lambda: sharegpt_like(10, rate=0),
        lambda: sharegpt_like(10, rate=-3.0),
        lambda: sharegpt_like(10, rate=math.inf),
        lambda: sharegpt_like(10, rate=math.nan),
        lambda: sharegpt_like(10, rate="fast"),
        lambda: sharegpt_like(10, seed=-1),
        lambda: sharegpt_like(10, seed=1.5),
        lambda: poisson_arrivals(10, 1.0, start_s=math.nan),
        lambda: LengthDistribution("bad", 0, 10),
        lambda: LengthDistribution("bad", 10, 10, sigma_prompt=-0.1),
        lambda: LengthDistribution("bad", 10, 10, max_total=1),
        lambda: summarize([]),
    ],
)
def test_bad_arguments_raise_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_bad_types_raise_type_error():
    with pytest.raises(TypeError):
        sample_lengths(10, dist="sharegpt")
    with pytest.raises(TypeError):
        summarize([(1, 2)])


# ------------------------------------------------------------------------------ plots


def new_axes(size=(8.0, 3.5)):
    fig = Figure(figsize=size)
    return fig, fig.add_subplot()


def test_four_score_frames_follow_the_lecture():
    frames = four_score_frames(2)
    assert [f.block_ids for f in frames] == [(1, 4), (1, 4), (1, 4, 7)]
    assert [f.new_blocks for f in frames] == [(1, 4), (), (7,)]
    assert [f.wasted_slots for f in frames] == [1, 0, 3]
    assert [len(f.tokens) for f in frames] == [7, 8, 9]
    assert frames[0].tokens == FOUR_SCORE_PROMPT
    # Logically adjacent blocks are not physically adjacent.
    ids = frames[-1].block_ids
    assert all(b - a > 1 for a, b in zip(ids, ids[1:], strict=False))
    # The pool outside this sequence is untouched: others keep their blocks.
    assert frames[-1].pool.used == frozenset({0, 2, 3, 5, 6, 1, 4, 7})


@pytest.mark.parametrize("index, logical_slots, arrows", [(0, 8, 2), (1, 8, 2), (2, 12, 3)])
def test_draw_block_table_draws_one_slot_per_cell_and_one_arrow_per_row(
    index, logical_slots, arrows
):
    frame = four_score_frames(2)[index]
    fig, ax = new_axes()
    drawn = draw_block_table(ax, frame.entries, frame.pool, tokens=frame.tokens, title=frame.label)
    assert len(drawn.logical_slots) == logical_slots
    assert len(drawn.physical_slots) == 8 * 4  # the whole pool
    assert len(drawn.arrows) == arrows
    texts = {t.get_text() for t in ax.texts}
    assert set(frame.tokens) <= texts
    fig.savefig(io.BytesIO(), format="png")


def test_draw_block_table_takes_a_live_table_and_pool():
    pool = BlockPool(num_blocks=6, block_size=2, taken=[1])
    table = BlockTable(pool)
    table.append(3)
    fig, ax = new_axes()
    drawn = draw_block_table(ax, table, pool, legend=True)
    assert len(drawn.logical_slots) == 4 and len(drawn.arrows) == 2
    assert len(drawn.physical_slots) == 12
    fig.savefig(io.BytesIO(), format="svg")


def test_draw_block_table_rejects_mismatched_tokens():
    frame = four_score_frames(0)[0]
    _, ax = new_axes()
    with pytest.raises(ValueError, match="tokens"):
        draw_block_table(ax, frame.entries, frame.pool, tokens=["only", "two"])
    with pytest.raises(TypeError):
        draw_block_table(ax, frame.entries, "pool")
    small = PoolState(num_blocks=2, block_size=4, used=frozenset())
    with pytest.raises(ValueError, match="outside"):
        draw_block_table(ax, frame.entries, small)


def test_frames_figure_and_animation_render():
    frames = four_score_frames(2)
    fig = block_table_frames_figure(frames)
    assert len([ax for ax in fig.axes if ax.patches]) == 3
    fig.savefig(io.BytesIO(), format="svg")
    html = block_table_animation(frames[:2]).to_jshtml()
    assert "<img" in html or "img" in html


def test_block_table_frames_validates_and_runs_out():
    with pytest.raises(ValueError):
        block_table_frames([])
    with pytest.raises(TypeError):
        block_table_frames("Four score")
    with pytest.raises(MemoryError):  # OutOfBlocksError: 3 free blocks of 4 cannot hold 13
        block_table_frames(["w"] * 13)
    with pytest.raises(ValueError):
        four_score_frames(99)


def test_block_size_waste_is_memory_weighted():
    # Blocks of 16: 1 → 16 slots, 16 → 16, 17 → 32; 64 allocated, 34 used.
    assert block_size_waste([1, 16, 17], [1, 16]) == {1: 0.0, 16: 30 / 64}
    with pytest.raises(ValueError):
        block_size_waste([], [16])
    with pytest.raises(ValueError):
        block_size_waste([5], [0])


def test_block_size_waste_plot_and_overview_draw():
    lengths = [r.total_len for r in sharegpt_like(2_000)]
    ax = block_size_waste_plot(
        {"ShareGPT-like": lengths}, reference_points={16: 0.0148, 256: 0.2011}
    )
    assert ax.get_xlabel() and ax.get_ylabel()
    assert len(ax.lines) == 3  # measured, half-block estimate, reference crosses
    ax.figure.savefig(io.BytesIO(), format="svg")
    fig, ax = new_axes((8.0, 3.4))
    draw_system_overview(ax, num_workers=2, num_heads=40)
    assert any("block tables" in t.get_text() for t in ax.texts)
    with pytest.raises(ValueError):
        draw_system_overview(ax, num_workers=3, num_heads=40)


# ------------------------------------------------------------------------------ widget


def test_stepper_constructs_and_steps():
    stepper = block_table_stepper()
    assert stepper.index == 0 and stepper.num_frames == 6
    first_image, first_caption = bytes(stepper.image.value), stepper.caption.value
    assert first_image.startswith(b"\x89PNG")
    assert stepper.back_button.disabled and not stepper.next_button.disabled

    stepper.next_button.click()
    assert stepper.index == 1
    assert bytes(stepper.image.value) != first_image
    assert "fathers" in stepper.caption.value and stepper.caption.value != first_caption

    stepper.slider.value = 2  # what dragging the slider does
    assert "brought" in stepper.caption.value
    stepper.show(99)  # clamped to the last frame
    assert stepper.index == 5 and stepper.next_button.disabled
    stepper.back_button.click()
    assert stepper.index == 4
    stepper.show(0)
    assert bytes(stepper.image.value) == first_image  # cached frames are reused


def test_stepper_rejects_bad_frames():
    with pytest.raises(ValueError):
        BlockTableStepper([])
    with pytest.raises(ValueError):
        BlockTableStepper(["not a frame"])
    with pytest.raises(TypeError):
        block_table_stepper().show("1")
