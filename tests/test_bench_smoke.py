"""The paged-attention benchmark's smoke mode, as CI runs it (bench/paged_attention.py --smoke).

On a machine without a GPU the smoke mode runs tiny float32 problems through Triton's interpreter:
every contender is checked against the reference and timed, and the table is printed; our kernel is
also checked with head sizes that are not powers of two (80, 96, 112, 192). It also checks that the
benchmark survives a contender that fails, hangs or kills its worker process. Each test starts
Python processes and runs the interpreter for several seconds, so all are marked slow.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "bench" / "paged_attention.py"


def run_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--quiet", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )


def table_rows(stdout: str) -> dict[tuple[str, str], str]:
    """(shape, contender) -> status, read off the final table."""
    rows = {}
    for line in stdout.splitlines():
        cells = line.split()
        if len(cells) >= 3 and "×" in cells[0] and cells[0] != "batch×ctx":
            status = next((c for c in cells if c in ("ok", "WRONG", "failed", "timeout",
                                                      "crashed", "skipped")), "?")  # fmt: skip
            rows[(cells[0], cells[1])] = status
    return rows


@pytest.mark.slow
def test_smoke_run_checks_every_contender_and_prints_the_table():
    result = run_bench()
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for header in ("Paged decode attention benchmark", "device copy bandwidth", "batch×ctx"):
        assert header in out, f"missing {header!r} in:\n{out}"
    rows = table_rows(out)
    for shape in ("1×256", "3×96"):
        for contender in ("ours", "ours:t16-s3-w4-st1", "sdpa", "gather-sdpa"):
            assert rows.get((shape, contender)) == "ok", f"{shape} {contender}:\n{out}"
        # FlexAttention needs torch >= 2.5; where it is missing the row says "failed".
        assert rows.get((shape, "flex")) in ("ok", "failed"), out
    for head_dim in (80, 96, 112, 192):  # padded inside the kernel, on the first shape
        assert rows.get(("1×256", f"ours:d{head_dim}")) == "ok", out
    assert "head_dim 80 padded to 128 in the kernel" in out


@pytest.mark.slow
def test_failing_hanging_and_crashing_contenders_are_reported_not_fatal():
    # 30 s per item: the interpreter compiles each of our variants, slowly on a busy machine.
    peers = "ours,bogus,_hang,_crash,sdpa"
    result = run_bench("--shapes", "0", "--peers", peers, "--item-timeout", "30")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = table_rows(result.stdout)
    expected = {"ours": "ok", "bogus": "failed", "_hang": "timeout", "_crash": "crashed"}
    expected["sdpa"] = "ok"  # measured by a fresh worker after the crash
    for contender, status in expected.items():
        assert rows.get(("1×256", contender)) == status, result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("head_dim", ["128", "80"])
def test_compile_report_builds_the_gpu_kernel_without_a_gpu(head_dim):
    """The kernel compiles for sm_90 (H100/H200) on this machine, pipelined and without spills,
    for the benchmark's head size and for one it pads (80, computed as 128)."""
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--compile-report", "--head-dim", head_dim],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    if "unavailable" in result.stdout:
        pytest.skip(result.stdout.strip())
    assert f"head_dim {head_dim}," in result.stdout
    rows = [line.split() for line in result.stdout.splitlines() if line[:1].isdigit()]
    assert len(rows) == 5, result.stdout
    for shape, config, regs, spill, smem, async_copies, mma in rows:
        assert int(regs) <= 255, result.stdout
        assert int(spill) == 0, f"{shape} {config} spills registers:\n{result.stdout}"
        assert int(async_copies) > 0, f"{shape} {config}: K/V loads not pipelined:\n{result.stdout}"
        assert int(mma) > 0 and float(smem) < 200, result.stdout
