"""The paged-attention kernel's GPU measurements that §4 may show, read from bench/results/.

A page shows a measurement only from the run that measured that very thing: here, a JSON record
written by ``bench/paged_attention.py`` on a GPU, with the compiled Triton backend and the table of
the kernel budget (CONTRIBUTING.md, "Budgets"; not the launch-constant sweep). CPU timing records,
interpreter smoke runs and sweeps in the same folder are never taken for kernel measurements.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KernelRun", "gpu_kernel_runs", "kernel_run_rows", "latest_gpu_kernel_run"]

#: What ``bench/paged_attention.py`` writes in its records' ``benchmark`` field.
BENCHMARK = "paged_decode_attention"


@dataclass(frozen=True)
class KernelRun:
    """One recorded GPU run of the paged-attention benchmark: where and with what it ran, and one
    row per (batch × context, contender) it measured."""

    path: Path
    date: str
    device: str
    driver: str | None
    torch: str
    triton: str
    copy_bandwidth: float
    problem: dict
    rows: tuple[dict, ...]

    @property
    def label(self) -> str:
        """One line naming the run: its date, device and software."""
        driver = f", driver {self.driver}" if self.driver else ""
        return (
            f"{self.date[:10]} on {self.device}{driver}, torch {self.torch}, triton {self.triton}"
        )

    @property
    def label_zh(self) -> str:
        """:attr:`label` for the Chinese edition: ``2026-12-01 在 NVIDIA H200 上（驱动 570.1，
        torch 2.11.0，triton 3.5.0）``."""
        driver = f"驱动 {self.driver}，" if self.driver else ""
        return (
            f"{self.date[:10]} 在 {self.device} 上（{driver}torch {self.torch}，"
            f"triton {self.triton}）"
        )


def _as_gpu_run(path: Path) -> KernelRun | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (
        isinstance(record, dict)
        and record.get("benchmark") == BENCHMARK
        and record.get("backend") == "triton-gpu"
        and record.get("suite") == "gpu"
        and not record.get("sweep")
        and isinstance(record.get("rows"), list)
    ):
        return None
    return KernelRun(
        path=path,
        date=str(record.get("date", "")),
        device=str(record.get("device", "?")),
        driver=record.get("driver"),
        torch=str(record.get("torch", "?")),
        triton=str(record.get("triton", "?")),
        copy_bandwidth=float(record.get("copy_bandwidth_bytes_per_s") or float("nan")),
        problem=dict(record.get("problem") or {}),
        rows=tuple(row for row in record["rows"] if isinstance(row, dict)),
    )


def gpu_kernel_runs(results_dir: str | Path) -> list[KernelRun]:
    """Every GPU run of the kernel benchmark recorded in ``results_dir``, oldest first; an empty
    list when there is none (or the folder does not exist)."""
    folder = Path(results_dir)
    if not folder.is_dir():
        return []
    runs = [run for path in sorted(folder.glob("*.json")) if (run := _as_gpu_run(path))]
    return sorted(runs, key=lambda run: run.date)


def latest_gpu_kernel_run(results_dir: str | Path) -> KernelRun | None:
    """The newest GPU run of the kernel benchmark in ``results_dir``, or None."""
    runs = gpu_kernel_runs(results_dir)
    return runs[-1] if runs else None


def kernel_run_rows(run: KernelRun) -> list[list[str]]:
    """The run as table rows: batch × context, contender, time (µs), share of the device's copy
    bandwidth, error against the float32 reference, and status."""
    rows = []
    for row in run.rows:
        measured = isinstance(row.get("time_us"), (int, float))
        share = row.get("copy_share")
        rows.append(
            [
                f"{row.get('batch')} × {row.get('context')}",
                str(row.get("contender", "?")),
                f"{row['time_us']:.1f}" if measured else "—",
                f"{share:.0%}" if measured and isinstance(share, (int, float)) else "—",
                f"{row['rel_err']:.1e}" if measured else "—",
                str(row.get("status", "?")),
            ]
        )
    return rows
