"""Latency against request rate (kvcourse.viz.latency), headless: curves merged from several
sweeps, the highest sustainable rate marked where the curve crosses the target, the ratio plot's
marks, and clear errors for bad input."""

import math

import pytest
from matplotlib.figure import Figure

from kvcourse.serving import (
    OracleScheme,
    PagedScheme,
    ReserveMaxScheme,
    latency_rate_sweep,
    sustainable_rate,
)
from kvcourse.viz import (
    SCHEME_COLORS,
    LatencyCurve,
    batch_rate_plot,
    latency_curves,
    latency_rate_plot,
    sustainable_ratio_plot,
)
from kvcourse.workloads import LengthDistribution

# Short requests on a small arena: the three knees fall within a few dozen requests per second,
# and a sweep takes well under a second.
SMALL = LengthDistribution("small", mean_prompt=20, mean_output=60, max_total=256)
SLOTS = 1500
RATES = (2.0, 6.0, 10.0, 20.0, 40.0)


def schemes():
    return [ReserveMaxScheme(max_len=256), OracleScheme(), PagedScheme()]


@pytest.fixture(scope="module")
def sweep():
    return latency_rate_sweep(
        RATES, schemes(), workload=SMALL, num_requests=150, num_slots=SLOTS, progress=False
    )


def test_curves_follow_the_sweep(sweep):
    curves = latency_curves(sweep)
    assert list(curves) == ["Max", "Oracle", "Paged"]
    for name, curve in curves.items():
        assert isinstance(curve, LatencyCurve)
        assert curve.rates == sweep.rates
        assert list(curve.latency_s) == sweep.latencies(name)
        # The same interpolated rate the sweep reports.
        assert curve.max_rate == pytest.approx(sweep.max_rates[name], nan_ok=True)
        assert len(curve.batch_size) == len(RATES)


def test_curves_merge_sweeps_on_their_own_grids(sweep):
    # Each scheme on its own grid: the same seed gives the same runs, so the merged curve holds
    # exactly the points of one sweep over the union of the grids.
    a = latency_rate_sweep(
        RATES[:3], schemes()[2:], workload=SMALL, num_requests=150, num_slots=SLOTS,
        progress=False,
    )  # fmt: skip
    b = latency_rate_sweep(
        RATES[3:], schemes()[2:], workload=SMALL, num_requests=150, num_slots=SLOTS,
        progress=False,
    )  # fmt: skip
    merged = latency_curves([b, a])["Paged"]
    assert merged.rates == RATES
    assert list(merged.latency_s) == sweep.latencies("Paged")
    with pytest.raises(ValueError, match="twice"):
        latency_curves([a, a])


def test_tail_statistic_gives_its_own_rate(sweep):
    p90 = latency_curves(sweep, statistic="p90")
    for name, curve in p90.items():
        tails = [r.normalized_latency_p90_s for r in sweep.results[name]]
        assert list(curve.latency_s) == tails
        assert curve.max_rate == pytest.approx(sustainable_rate(RATES, tails), nan_ok=True)
        mean = sweep.max_rates[name]
        if math.isfinite(curve.max_rate) and math.isfinite(mean):
            assert curve.max_rate <= mean + 1e-9  # the tail misses the target first


def test_latency_plot_marks_target_and_each_crossing(sweep, render):
    curves = latency_curves(sweep)
    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.add_subplot()
    latency_rate_plot(curves, ax=ax)
    render(fig)
    labels = ax.get_legend_handles_labels()[1]
    target = [t for t in labels if t.startswith("target")]
    assert target == ["target: 50 ms/token"]
    for curve in curves.values():
        if not math.isfinite(curve.max_rate):
            continue
        # The legend names the scheme's highest rate, and a hollow marker sits on the crossing.
        assert any(curve.label in t and f"{curve.max_rate:.2f}" in t for t in labels)
        hollow = [
            line
            for line in ax.lines
            if line.get_markerfacecolor() == "white"
            and line.get_markeredgecolor() == SCHEME_COLORS[curve.scheme]
        ]
        assert len(hollow) == 1
        x, y = hollow[0].get_data()
        assert x[0] == pytest.approx(curve.max_rate)
        assert y[0] == pytest.approx(50.0)
    assert ax.get_ylim() == (0.0, 200.0)  # four times the target
    assert ax.get_legend() is not None


def test_latency_plot_takes_sweeps_and_legend_places(sweep, render):
    for loc in ("below", None):
        ax = latency_rate_plot(sweep, legend_loc=loc, statistic="p90")
        render(ax.figure)
        assert (ax.get_legend() is None) == (loc is None)
        assert "90th-percentile" in ax.get_ylabel()


def test_batch_plot_one_curve_per_scheme(sweep, new_axes, render):
    fig, ax = new_axes()
    batch_rate_plot(latency_curves(sweep), ax=ax, legend=True)
    render(fig)
    solid = [line for line in ax.lines if line.get_markerfacecolor() != "white"]
    assert len(solid) == 3
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [p.label for p in schemes()]


def test_open_ended_and_missed_curves_say_so():
    curve = LatencyCurve("Paged", "Paged", "mean", 0.05, (1.0, 2.0), (0.03, 0.04), (1, 2), 2.0)
    missed = LatencyCurve("Max", "Max", "mean", 0.05, (1.0, 2.0), (0.3, 0.4), (1, 2), math.nan)
    assert curve.open_ended and not missed.open_ended
    ax = latency_rate_plot([curve, missed])
    labels = ax.get_legend_handles_labels()[1]
    assert "Paged: ≥ 2.00 req/s" in labels
    assert "Max: misses it at every rate" in labels


def test_ratio_plot_draws_ours_spread_and_references(render):
    ax = sustainable_ratio_plot(
        {"paged/oracle": 2.1, "paged/max": 3.7},
        spread={"paged/oracle": (2.0, 2.2), "paged/max": (3.6, 3.9)},
        references={
            "lecture": {"paged/oracle": 2.0, "paged/max": (3.0, math.inf)},
            "paper": {"paged/oracle": (1.7, 2.7), "paged/max": (2.7, 8.0)},
        },
    )
    render(ax.figure)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["Paged ÷ Oracle", "Paged ÷ Max"]
    assert ax.get_xscale() == "log"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["this page", "lecture", "paper (range)"]
    # Our two dots, in the colours of their rows.
    dots = [line for line in ax.lines if line.get_marker() == "o" and line.get_xdata().size]
    assert {line.get_color() for line in dots} == {SCHEME_COLORS["Oracle"], SCHEME_COLORS["Max"]}
    assert sorted(float(line.get_xdata()[0]) for line in dots) == [2.1, 3.7]
    # "More than 3×": a triangle pointing right at 3.
    more = [line for line in ax.lines if line.get_marker() == ">"]
    assert len(more) == 1 and float(more[0].get_xdata()[0]) == 3.0


def test_bad_input_is_refused(sweep):
    with pytest.raises(ValueError, match="statistic"):
        latency_curves(sweep, statistic="p99")
    with pytest.raises(ValueError, match="RateSweep"):
        latency_curves([])
    with pytest.raises(TypeError):
        latency_curves([sweep, "junk"])
    with pytest.raises(ValueError):
        latency_rate_plot([])
    with pytest.raises(ValueError, match="ymax_ms"):
        latency_rate_plot(sweep, ymax_ms=0)
    with pytest.raises(ValueError, match="ours"):
        sustainable_ratio_plot({"other": 2.0})
    with pytest.raises(ValueError, match="xlim"):
        sustainable_ratio_plot({"paged/max": 2.0}, xlim=(3.0, 1.0))
