"""§4.5's system overview (kvcourse.viz.overview): the scheduler and its GPU workers."""

import pytest

from kvcourse.viz import draw_system_overview


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_draw_system_overview(workers, new_axes, render):
    fig, ax = new_axes((8.0, 3.4))
    draw_system_overview(ax, num_workers=workers, num_heads=40)
    texts = [t.get_text() for t in ax.texts]
    assert any("block tables" in t for t in texts)
    assert sum(t.startswith("GPU worker") for t in texts) == workers
    assert ("all-reduce" in texts) == (workers > 1)
    assert f"model shard: heads 0–{40 // workers - 1}" in texts
    render(fig)


def test_draw_system_overview_rejects_uneven_shards(new_axes):
    _, ax = new_axes()
    with pytest.raises(ValueError):
        draw_system_overview(ax, num_workers=3, num_heads=40)
    with pytest.raises(ValueError):
        draw_system_overview(ax, num_workers=0)
    with pytest.raises(TypeError):
        draw_system_overview(ax, num_workers=2.0)
