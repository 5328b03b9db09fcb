"""The §9 timing drawings (kvcourse.viz.mooncake_timelines)."""

from __future__ import annotations

import pytest
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from kvcourse.cluster.chunked_pipeline import chunked_pipeline
from kvcourse.cluster.layerwise import layerwise_prefill
from kvcourse.viz.mooncake_timelines import layerwise_gantt, pipeline_schedule_figure


def three_schedules():
    return {
        "no cache": layerwise_prefill(8700),
        "half hit, serial": layerwise_prefill(8700, 4350, schedule="serial"),
        "half hit, overlapped": layerwise_prefill(8700, 4350),
    }


def test_layerwise_gantt_draws_every_layer_and_the_totals(render):
    fig = layerwise_gantt(three_schedules())
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    bars = [c for c in ax.collections if isinstance(c, PolyCollection)]
    # no cache: compute and store; the half hits: load, compute and store; two shades each.
    assert len(bars) == 2 * (2 + 3 + 3)
    assert sum(len(c.get_paths()) for c in bars) == 80 * (2 + 3 + 3)
    texts = [t.get_text() for t in ax.texts]
    assert {"no cache", "half hit, serial", "half hit, overlapped"} <= set(texts)
    assert {"865 ms", "508 ms", "450 ms"} <= set(texts)
    assert " nothing to move" in texts  # the no-cache request loads nothing
    assert [t.get_text() for t in ax.get_yticklabels()][:3] == ["link in", "GPUs", "link out"]
    assert "ms" in ax.get_xlabel()
    assert fig.get_figwidth() <= 10
    render(fig)


def test_layerwise_gantt_checks_its_input():
    with pytest.raises(ValueError, match="at least one"):
        layerwise_gantt({})
    with pytest.raises(TypeError, match="LayerwiseTimeline"):
        layerwise_gantt({"oops": 0.45})


def test_pipeline_schedule_figure_has_a_box_per_slot(render):
    schedule = chunked_pipeline(131_072, 4, 8192)
    fig = pipeline_schedule_figure(schedule)
    ax = fig.axes[0]
    boxes = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(boxes) == 16 * 4
    labels = {t.get_text() for t in ax.texts}
    assert {"16", "10"} <= labels and labels <= {str(c) for c in range(1, 17)}
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"stage {i}" for i in (4, 3, 2, 1)]
    assert "8.70 s" in ax.get_title(loc="left") and "3.11×" in ax.get_title(loc="left")
    render(fig)
    short = pipeline_schedule_figure(chunked_pipeline(2000))
    assert {t.get_text() for t in short.axes[0].texts} == {"1"}
    assert "1 chunk on" in short.axes[0].get_title(loc="left")
    with pytest.raises(TypeError, match="PipelineSchedule"):
        pipeline_schedule_figure([])
