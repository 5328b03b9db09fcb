"""The §9.4 drawings: the Conductor's placements side by side, and TTFT against load."""

import math

import pytest

from kvcourse.cluster import ConductorRun
from kvcourse.viz import placement_comparison_figure, ttft_load_plot


def run(name, hit, ttfts):
    return ConductorRun(name, len(ttfts), 0, hit, 10, 1_000_000 * (10 - hit), 0, 0, ttfts, (1,))


RUNS = {
    "random": run("random", 1, (2.0, 30.0)),
    "cache-aware": run("cache-aware", 4, (0.5, 1.5)),
}


def test_comparison_writes_every_value(render):
    fig = placement_comparison_figure(RUNS, reference_ttft_s={"random": 19.65, "other": 1.0})
    render(fig)
    hit, tokens, ttft = fig.axes
    assert [t.get_text() for t in hit.texts] == ["10%", "40%"]
    assert [t.get_text() for t in tokens.texts] == ["9", "6"]
    assert [t.get_text() for t in ttft.texts] == ["16", "1.00"]
    assert ttft.get_yscale() == "log"
    diamonds = [line for line in ttft.lines if line.get_marker() == "D"]
    assert len(diamonds) == 1 and list(diamonds[0].get_ydata()) == [19.65]
    assert [t.get_text() for t in hit.get_xticklabels()] == ["random", "cache-\naware"]


def test_load_plot_has_a_line_per_placement(render):
    ax = ttft_load_plot({1.0: RUNS, 2.0: RUNS}, statistic="p90")
    render(ax.figure)
    assert [line.get_label() for line in ax.lines] == ["random", "cache-aware"]
    assert math.isclose(ax.lines[1].get_ydata()[0], RUNS["cache-aware"].p90_ttft_s)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="non-empty"):
        placement_comparison_figure({})
    with pytest.raises(TypeError, match="runs\\['x'\\] must be a ConductorRun"):
        placement_comparison_figure({"x": 3})
    with pytest.raises(ValueError, match="no run for placement 'cache-aware'"):
        ttft_load_plot({1.0: RUNS, 2.0: {"random": RUNS["random"]}})
    with pytest.raises(ValueError, match="statistic"):
        ttft_load_plot({1.0: RUNS}, statistic="max")
