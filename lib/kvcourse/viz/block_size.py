"""§4's choice of block size: the share of allocated KV slots left empty in each sequence's last
block, measured and plotted against the block size.

* :func:`block_size_waste` measures it, memory-weighted, for a list of sequence lengths;
* :func:`block_size_waste_plot` draws it on log–log axes, with the "half a block per sequence"
  estimate and published values to compare with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from kvcourse._checks import ceil_div, check_positive_int
from kvcourse.viz.style import FONT_SIZE, SERIES_COLORS, despine, percent_formatter

__all__ = ["block_size_waste", "block_size_waste_plot"]


def block_size_waste(lengths: Sequence[int], block_sizes: Iterable[int]) -> dict[int, float]:
    """For each block size ``B``, the share of allocated KV slots that hold no token when every
    sequence of ``lengths`` tokens has ``ceil(length / B)`` blocks: ``Σ (allocated − length) /
    Σ allocated`` (memory-weighted, not a mean of per-sequence shares)."""
    lengths = [int(n) for n in lengths]
    if not lengths or any(n < 1 for n in lengths):
        raise ValueError("lengths must be a non-empty list of positive token counts")
    result = {}
    total = sum(lengths)
    for b in block_sizes:
        b = check_positive_int("block size", b)
        allocated = sum(ceil_div(n, b) * b for n in lengths)
        result[b] = (allocated - total) / allocated
    if not result:
        raise ValueError("block_sizes is empty")
    return result


def block_size_waste_plot(
    lengths: Sequence[int] | Mapping[str, Sequence[int]],
    block_sizes: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256),
    *,
    ax: Axes | None = None,
    mark: Iterable[int] = (16, 256),
    half_block_estimate: bool = True,
    reference_points: Mapping[int, float] | None = None,
    reference_label: str = "lecture",
    title: str | None = None,
) -> Axes:
    """Memory-weighted waste (:func:`block_size_waste`) against block size, log–log.

    ``lengths`` is one list of final sequence lengths or a mapping name → lengths (one curve
    each). With ``half_block_estimate`` a dashed line shows the estimate "the last block is half
    empty", ``(B / 2) / mean length``, per workload; ``mark`` labels the first workload's values
    at those block sizes; ``reference_points`` (block size → fraction) adds other published
    values as crosses; ``title`` goes above the axes. Block sizes whose waste is exactly 0
    (``B = 1``) cannot sit on a log axis and are left out. Returns the axes (a new figure's
    when ``ax`` is None).
    """
    workloads = dict(lengths) if isinstance(lengths, Mapping) else {"": lengths}
    if ax is None:
        ax = Figure(figsize=(8.0, 4.6), layout="constrained").add_subplot()
    sizes = sorted(int(b) for b in block_sizes)
    mark = set(mark)
    for k, (name, lens) in enumerate(workloads.items()):
        color = SERIES_COLORS[k % len(SERIES_COLORS)]
        waste = block_size_waste(lens, sizes)
        mean = sum(lens) / len(lens)
        shown = [b for b in sizes if waste[b] > 0]
        label = f"{name} (mean length {mean:.0f} tokens)" if name else "measured"
        ax.plot(shown, [100 * waste[b] for b in shown], "o-", color=color, lw=2, ms=5, label=label)
        if half_block_estimate:
            estimate = [100 * (b / 2) / mean for b in shown]
            ax.plot(
                shown,
                [min(e, 100) for e in estimate],
                "--",
                color=color,
                lw=1.3,
                alpha=0.8,
                label=f"half-block estimate (B/2) / {mean:.0f}",
            )
        if k == 0:
            for b in sorted(mark & set(shown)):
                ax.annotate(
                    f"{100 * waste[b]:.2f} %",
                    xy=(b, 100 * waste[b]),
                    xytext=(8, -14),
                    textcoords="offset points",
                    fontsize=FONT_SIZE,
                    color=color,
                    weight="bold",
                )
    if reference_points:
        pts = sorted(reference_points.items())
        ax.plot(
            [b for b, _ in pts],
            [100 * v for _, v in pts],
            "x",
            color="black",
            ms=9,
            mew=2,
            label=reference_label,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = sizes[1:] if sizes and sizes[0] == 1 else sizes
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(b) for b in ticks])
    ax.yaxis.set_major_formatter(percent_formatter())
    ax.set_ylim(top=100)
    ax.set_xlabel("block size B (tokens per block)")
    ax.set_ylabel("allocated KV slots left empty (%)")
    ax.grid(True, which="major", alpha=0.3)
    despine(ax)
    ax.legend(loc="upper left", frameon=False, fontsize=FONT_SIZE)
    if title:
        ax.set_title(title, loc="left", fontsize=FONT_SIZE + 1)
    return ax
