"""The dashboard of vLLM's metrics (kvcourse.viz.metrics_dashboard)."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from kvcourse.serving import PagedV1Scheme, serve_with_metrics
from kvcourse.viz import metrics_dashboard
from kvcourse.workloads import Request


@pytest.fixture(scope="module")
def runs():
    requests = [Request(i, 0.05 * i, 40, 6) for i in range(12)]
    on = serve_with_metrics(requests, PagedV1Scheme(4, shared_prefix=32), num_slots=256)
    off = serve_with_metrics(
        requests, PagedV1Scheme(4, shared_prefix=32, prefix_caching=False), num_slots=256
    )
    return [("on", on), ("off", off)]


def test_five_panels_one_line_per_run(runs):
    fig = metrics_dashboard(runs)
    assert isinstance(fig, Figure)
    running, usage, hits, ttft, itl = fig.axes[:5]
    assert len(running.lines) == 4  # running and waiting, per run
    assert len(usage.lines) == 2
    assert len(hits.lines) == 1  # the run without prefix caching counts no queries
    assert "no queries counted" in hits.texts[0].get_text()
    assert ttft.get_xscale() == "log" and itl.get_xscale() == "log"
    fig.canvas.draw()


def test_argument_checks(runs):
    with pytest.raises(ValueError, match="non-empty"):
        metrics_dashboard([])
    with pytest.raises(TypeError, match="MetricsRun"):
        metrics_dashboard([("a", 1)])
    with pytest.raises(ValueError, match="at most"):
        metrics_dashboard(runs * 3)
