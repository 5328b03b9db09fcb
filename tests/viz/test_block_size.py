"""§4's waste against block size (kvcourse.viz.block_size): memory-weighted, and plotted."""

import pytest

from kvcourse.viz import block_size_waste, block_size_waste_plot
from kvcourse.workloads import alpaca_like, sharegpt_like


def test_block_size_waste_is_memory_weighted():
    # Blocks of 16: 1 → 16 slots, 16 → 16, 17 → 32; 64 allocated, 34 used.
    assert block_size_waste([1, 16, 17], [1, 16]) == {1: 0.0, 16: 30 / 64}
    with pytest.raises(ValueError):
        block_size_waste([], [16])
    with pytest.raises(ValueError):
        block_size_waste([0, 5], [16])
    with pytest.raises(ValueError):
        block_size_waste([5], [0])
    with pytest.raises(ValueError):
        block_size_waste([5], [])
    with pytest.raises(TypeError):
        block_size_waste([5], [2.5])


def test_block_size_waste_plot(render):
    lengths = [r.total_len for r in sharegpt_like(2_000)]
    ax = block_size_waste_plot(
        {"ShareGPT-like": lengths}, reference_points={16: 0.0148, 256: 0.2011}, title="waste"
    )
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title(loc="left") == "waste"
    assert len(ax.lines) == 3  # measured, half-block estimate, reference crosses
    # B = 1 wastes nothing and cannot sit on a log axis.
    assert 1 not in ax.lines[0].get_xdata()
    assert [t.get_text() for t in ax.texts if t.get_text().endswith("%")]  # marked 16, 256
    render(ax.figure)


def test_block_size_waste_plot_one_curve_per_workload():
    workloads = {
        "ShareGPT-like": [r.total_len for r in sharegpt_like(500)],
        "Alpaca-like": [r.total_len for r in alpaca_like(500)],
    }
    ax = block_size_waste_plot(workloads, half_block_estimate=False)
    assert len(ax.lines) == 2
    assert ax.lines[0].get_color() != ax.lines[1].get_color()
    plain = block_size_waste_plot([10, 20, 30])
    assert [t.get_text() for t in plain.get_legend().get_texts()][0] == "measured"
