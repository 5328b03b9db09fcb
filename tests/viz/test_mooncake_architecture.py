"""§9.2's map of a Mooncake cluster (kvcourse.viz.mooncake_architecture)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from kvcourse.blocks.hashing import chained_block_hashes, short_hash
from kvcourse.viz.mooncake_architecture import (
    DECODE_GID,
    MAX_INSTANCES,
    PREFILL_GID,
    mooncake_architecture_figure,
)
from kvcourse.viz.style import BLUE

COMPONENTS = ("Conductor: global scheduler", "Prefill pool", "Decode pool", "Distributed KV pool")


def instance_boxes(fig, gid):
    return [p for p in fig.axes[0].patches if p.get_gid() == gid]


def texts(fig):
    return [t.get_text() for t in fig.axes[0].texts]


def test_default_figure_draws_every_component_and_the_four_steps(render):
    fig = mooncake_architecture_figure()
    assert isinstance(fig, Figure)
    assert len(instance_boxes(fig, PREFILL_GID)) == 3
    assert len(instance_boxes(fig, DECODE_GID)) == 3
    labels = texts(fig)
    for name in COMPONENTS:
        assert name in labels
    assert any(t.startswith("Messenger: RDMA") for t in labels)
    assert [labels.count(str(step)) for step in (1, 2, 3, 4)] == [1, 1, 1, 1]
    assert {"requests", "tokens", "DRAM", "SSD"} <= set(labels)
    names = [t for t in labels if re.fullmatch(r"(prefill|decode) \d", t)]
    assert names == ["prefill 1", "prefill 2", "prefill 3", "decode 1", "decode 2", "decode 3"]
    # The request's chain in the KV pool: its five block hashes, as §8 computes them.
    chain = [short_hash(h, 4) for h in chained_block_hashes(list(range(100, 120)), 4)]
    assert [t for t in labels if t in chain] == chain
    width, height = fig.get_size_inches()
    assert 9 <= width <= 10 and 5 <= height <= 6.5
    assert min(t.get_fontsize() for t in fig.axes[0].texts) >= 9
    render(fig)
    render(fig, "png")


def test_only_the_chosen_pair_is_outlined_in_blue():
    fig = mooncake_architecture_figure(num_prefill=2, num_decode=4)
    for gid, n in ((PREFILL_GID, 2), (DECODE_GID, 4)):
        boxes = instance_boxes(fig, gid)
        outlined = [b for b in boxes if b.get_linewidth() > 1.5]
        assert len(boxes) == n and outlined == [boxes[-1]]
        assert outlined[0].get_edgecolor()[:3] == pytest.approx(to_rgb(BLUE))


@settings(max_examples=12, deadline=None)
@given(
    st.integers(1, MAX_INSTANCES),
    st.integers(1, MAX_INSTANCES),
)
def test_every_size_draws_its_instances_without_overlapping_labels(num_prefill, num_decode):
    fig = mooncake_architecture_figure(num_prefill=num_prefill, num_decode=num_decode)
    assert len(instance_boxes(fig, PREFILL_GID)) == num_prefill
    assert len(instance_boxes(fig, DECODE_GID)) == num_decode
    labels = texts(fig)
    assert [labels.count(str(step)) for step in (1, 2, 3, 4)] == [1, 1, 1, 1]
    # No two labels overlap on the page, and every label lies inside the figure.
    renderer = FigureCanvasAgg(fig).get_renderer()
    boxes = [t.get_window_extent(renderer) for t in fig.axes[0].texts]
    page = Bbox.from_bounds(0, 0, *fig.canvas.get_width_height())
    assert all(page.containsx(b.x0) and page.containsx(b.x1) for b in boxes)
    assert all(page.containsy(b.y0) and page.containsy(b.y1) for b in boxes)
    overlapping = [
        (labels[i], labels[j])
        for i, a in enumerate(boxes)
        for j in range(i + 1, len(boxes))
        if a.overlaps(boxes[j])
    ]
    assert overlapping == []


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"num_prefill": 0}, ValueError, "num_prefill must be positive, got 0"),
        ({"num_decode": -2}, ValueError, "num_decode must be positive"),
        ({"num_prefill": 7}, ValueError, "num_prefill must be at most 6.*got 7"),
        ({"num_decode": 12}, ValueError, "num_decode must be at most 6.*from 1 to 6"),
        ({"num_prefill": 2.5}, TypeError, "num_prefill must be an int"),
        ({"num_decode": True}, TypeError, "num_decode must be an int"),
    ],
)
def test_bad_instance_counts_are_refused(kwargs, error, message):
    with pytest.raises(error, match=message):
        mooncake_architecture_figure(**kwargs)


def test_arguments_are_keyword_only():
    with pytest.raises(TypeError):
        mooncake_architecture_figure(3, 3)  # type: ignore[misc]
