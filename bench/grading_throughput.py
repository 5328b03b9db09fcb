"""How many students autograde grades per minute, at one worker and at all of them.

A synthetic class of N students is made from an assignment's sample submissions
(``grading/samples/<A>.py``), in four kinds dealt round-robin: the solution, the untouched
release, the one-mistake wrong solutions, and the hostile suite (tricks on the grader, a loop
that ignores interrupts, a kernel that kills itself, an 8 GiB allocation, a 64 MiB flood, deleted
tests, and, with the sandbox, reading the solutions or the gradebook and writing outside), plus
one file that is not a notebook at all. The same class is graded twice, from the same collected
state, by ``kvcourse-grade autograde --workers 1`` and ``--workers <all>`` (sandboxed where
bubblewrap works), and the script prints students per minute for both, checks that both runs gave
every student the same score, and writes the table to ``bench/results/``.

Run from the repository root: ``.venv/bin/python bench/grading_throughput.py`` (about 3 minutes
for 24 students of a0 on 2 cores). It works in a temporary directory.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from kvcourse_grader.fanout import default_workers  # noqa: E402
from kvcourse_grader.samples import load_samples  # noqa: E402
from kvcourse_grader.sandbox import sandbox_problem  # noqa: E402

#: Which kind each sample student is, by name; the samples not named are one-mistake solutions.
HOSTILE = {
    "hostile",
    "deletes_tests",
    "loops",
    "crashes",
    "hog",
    "floods",
    "raises",
    "syntax_error",
    "reads_solutions",
    "reads_gradebook",
    "writes_outside",
}
SCORE = re.compile(r"^(\S+)\s+\S+\s+(?:([\d.]+) / ([\d.]+)|(NOT GRADED))", re.M)


def grade(course: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "kvcourse_grader.cli", "--course-root", str(course), *args]
    return subprocess.run(command, capture_output=True, text=True)


def make_class(work: Path, assignment: str, students: int) -> tuple[Path, dict[str, str]]:
    """A released course copy with ``students`` synthetic submissions collected; their kinds."""
    course = work / "course"
    (course / "grading").mkdir(parents=True)
    shutil.copy2(ROOT / "grading" / "nbgrader_config.py", course / "grading")
    shutil.copytree(ROOT / "grading" / "samples", course / "grading" / "samples")
    for folder in ("solutions", "notebooks"):
        shutil.copytree(ROOT / folder / assignment, course / folder / assignment)
    for step in (("release", assignment), ("samples", assignment, "--out", str(work / "s"))):
        done = grade(course, *step)
        if done.returncode:
            sys.exit(f"{step[0]} failed:\n{done.stdout}{done.stderr}")
    names = sorted(load_samples(course, assignment))
    pools = {
        "solution": ["correct"],
        "release": ["untouched"],
        "wrong": [n for n in names if n not in HOSTILE | {"correct", "untouched"}],
        "hostile": [n for n in names if n in HOSTILE],
    }
    inbox, kinds = work / "inbox", {}
    inbox.mkdir()
    turn = {kind: 0 for kind in pools}
    for i in range(students):
        kind = list(pools)[i % len(pools)]
        sample = pools[kind][turn[kind] % len(pools[kind])]
        turn[kind] += 1
        student = f"s{i:03d}_{sample}"
        shutil.copy2(work / "s" / f"{sample}.ipynb", inbox / f"{student}.ipynb")
        kinds[student] = kind
    done = grade(course, "collect", str(inbox), "--assignment", assignment)
    if done.returncode:
        sys.exit(f"collect failed:\n{done.stdout}{done.stderr}")
    garbled = course / "grading" / "submitted" / "s999_garbled" / assignment
    garbled.mkdir(parents=True)
    (garbled / f"{assignment}.ipynb").write_bytes(b"\x00{this is not a notebook")
    kinds["s999_garbled"] = "hostile"
    return course, kinds


def run(course: Path, assignment: str, workers: int, flags: list[str]) -> tuple[float, dict]:
    start = time.perf_counter()
    done = grade(course, "autograde", assignment, "--workers", str(workers), *flags)
    wall = time.perf_counter() - start
    scores = {m[0]: (m[3] or f"{m[1]} / {m[2]}") for m in SCORE.findall(done.stdout)}
    if not scores:
        sys.exit(f"autograde printed no student lines:\n{done.stdout}{done.stderr}")
    return wall, scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="a0_kv_sizing")
    parser.add_argument("--students", type=int, default=24, help="class size (default 24)")
    parser.add_argument("--workers", type=int, default=default_workers(), help="'all' workers")
    parser.add_argument(
        "--cell-timeout", type=int, default=10, help="seconds per cell (the looping students)"
    )
    parser.add_argument("--out", help="results file (default bench/results/<date>-cpu-...)")
    args = parser.parse_args()
    flags = ["--cell-timeout", str(args.cell_timeout)]
    sandboxed = sandbox_problem() is None
    if not sandboxed:
        flags.append("--unsandboxed")
    lines = []
    with tempfile.TemporaryDirectory(prefix="kvcourse-throughput-") as tmp:
        work = Path(tmp)
        course, kinds = make_class(work / "class", args.assignment, args.students)
        runs = {}
        for workers in sorted({1, args.workers}):
            copy = work / f"w{workers}" / "course"
            shutil.copytree(course, copy)
            runs[workers] = run(copy, args.assignment, workers, flags)
    counts = {k: sum(1 for v in kinds.values() if v == k) for k in dict.fromkeys(kinds.values())}
    first = runs[1][1]
    same = all(scores == first for _, scores in runs.values())
    ungraded = sum(1 for s in first.values() if s == "NOT GRADED")
    today = datetime.date.today().isoformat()
    lines.append(
        f"# autograde throughput, {today}, {platform.node()} ({platform.machine()}, "
        f"{default_workers()} worker(s) by default), Python {platform.python_version()}"
    )
    lines.append(
        f"# {args.assignment}: {len(kinds)} students ("
        + ", ".join(f"{n} {k}" for k, n in counts.items())
        + f"), cell timeout {args.cell_timeout} s, "
        + ("sandboxed (bubblewrap)" if sandboxed else "UNSANDBOXED (no bubblewrap)")
    )
    lines.append(f"{'workers':>8} {'wall s':>8} {'students/min':>13} {'s/student':>10}")
    for workers, (wall, scores) in runs.items():
        lines.append(
            f"{workers:>8} {wall:>8.1f} {len(scores) / wall * 60:>13.1f} "
            f"{wall / len(scores):>10.2f}"
        )
    speedup = runs[1][0] / runs[max(runs)][0]
    lines.append(
        f"speed-up at {max(runs)} workers: {speedup:.2f}x; {ungraded} student(s) NOT GRADED "
        f"(the non-notebook); same score for every student in every run: {'yes' if same else 'NO'}"
    )
    text = "\n".join(lines)
    print(text)
    out = Path(args.out) if args.out else ROOT / "bench" / "results" / f"{today}-cpu-grading.txt"
    out.write_text(text + "\n")
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    if not same:
        sys.exit("the runs disagree: grading depends on the number of workers")


if __name__ == "__main__":
    main()
