"""The §10 drawings (kvcourse.viz.kv_formats)."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from kvcourse.viz.kv_formats import window_blocks_figure, window_memory_plot


def test_window_memory_plot_draws_full_and_windowed_memory(render):
    fig = window_memory_plot(131_072.0, 32_768, windows=(1024, 4096))
    assert isinstance(fig, Figure)
    left, right = fig.axes
    full, w1, w2 = left.lines
    assert [line.get_label() for line in left.lines] == [
        "full cache",
        "4 sinks + window 1,024",
        "4 sinks + window 4,096",
    ]
    # Full grows linearly to 32K × 131,072 B; the windows level off at their blocks' memory.
    assert full.get_ydata()[-1] == pytest.approx(32_768 * 131_072 / 1e9)
    assert w1.get_ydata()[-1] == pytest.approx(65 * 16 * 131_072 / 1e9)  # 1 + 64 blocks
    assert max(w2.get_ydata()) <= (1 + 257) * 16 * 131_072 / 1e9
    texts = [t.get_text() for t in left.texts]
    assert texts == ["0.14 GB", "0.54 GB", "4.3 GB"]
    slots, tokens, _ = right.lines
    assert max(tokens.get_ydata()) == 4 + 1024
    assert all(s >= t for s, t in zip(slots.get_ydata(), tokens.get_ydata(), strict=True))
    render(fig)
    with pytest.raises(ValueError, match="at least one window"):
        window_memory_plot(1.0, windows=())
    with pytest.raises(ValueError, match="bytes_per_token must be a positive"):
        window_memory_plot(0.0)


def test_window_blocks_figure_frees_middle_blocks_whole(render):
    fig = window_blocks_figure((10, 18), sinks=2, window=8, block_size=4)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("freed") == 1  # after 18 tokens block 1 (tokens 4..7) has left
    dashed = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_linestyle() == "--"]
    assert len(dashed) == 1
    # 3 + 5 block outlines, 4 slots in each held block (3 + 4 of them), one freed block.
    assert len(ax.patches) == (3 + 4) + 4 * (3 + 4) + 1
    assert [t.get_text() for t in fig.legends[0].get_texts()][-1] == "freed block"
    render(fig)
    with pytest.raises(ValueError, match="at least one sequence length"):
        window_blocks_figure(())
