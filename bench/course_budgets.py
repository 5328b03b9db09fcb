"""Measure the course's CPU budgets (CONTRIBUTING.md, Budgets) and print them beside their targets.

* every book page executes in ≤ 30 s and the whole book, both editions, builds cold in ≤ 8 min
  (the Chinese edition re-reads the English execution cache: its share is printed too);
* every solution notebook executes in ≤ 60 s;
* autograding one student's full set of assignments takes ≤ 3 min.

Run from the repository root with the course environment: ``.venv/bin/python
bench/course_budgets.py``. It works in temporary directories and leaves the repository as it was.
The figures depend on the machine; the budgets are set for a 2-core CPU.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PAGE_BUDGET_S, BOOK_BUDGET_S = 30.0, 8 * 60.0
SOLUTION_BUDGET_S, AUTOGRADE_BUDGET_S = 60.0, 3 * 60.0


def verdict(seconds: float, budget: float) -> str:
    return "ok" if seconds <= budget else "OVER BUDGET"


def book_times(work: Path) -> tuple[float, float, dict[str, float]]:
    """Build both editions cold into ``work`` as ``make book`` does; return the wall time, the
    Chinese edition's share of it and each page's execution time."""
    start = time.perf_counter()
    result = subprocess.run(
        [
            str(BIN / "python"),
            str(ROOT / "book" / "editions.py"),
            "build",
            "--path-output",
            str(work),
            "--cache-home",  # an empty cache of its own: every page executes
            str(work / "cache"),
        ],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"book build failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    log = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)
    pages = {
        Path(path).stem: float(seconds)
        for path, seconds in re.findall(r"(\S+\.md): Executed notebook in ([\d.]+) seconds", log)
    }
    chinese = float(re.search(r"Chinese ([\d.]+) s more", log).group(1))
    return wall, chinese, pages


def solution_time(notebook: Path) -> float:
    """Execute a solution notebook top to bottom in a fresh kernel; return the wall time."""
    nb = nbformat.read(notebook, as_version=4)
    start = time.perf_counter()
    NotebookClient(
        nb, timeout=600, resources={"metadata": {"path": str(notebook.parent)}}
    ).execute()
    return time.perf_counter() - start


def autograde_time(work: Path, assignments: list[str]) -> float:
    """Autograde one student who submitted every solution; return the wall time of the command."""
    course = work / "course"
    (course / "grading").mkdir(parents=True)
    shutil.copy2(ROOT / "grading" / "nbgrader_config.py", course / "grading")
    shutil.copytree(ROOT / "solutions", course / "solutions")
    shutil.copytree(ROOT / "notebooks", course / "notebooks")
    grade = [sys.executable, "-m", "kvcourse_grader.cli", "--course-root", str(course)]
    subprocess.run([*grade, "release"], check=True, capture_output=True)
    for assignment in assignments:
        target = course / "grading" / "submitted" / "student" / assignment
        target.mkdir(parents=True)
        shutil.copy2(course / "solutions" / assignment / f"{assignment}.ipynb", target)
    from kvcourse_grader.sandbox import sandbox_problem

    flags = ["--unsandboxed"] if sandbox_problem() else []  # sandboxed wherever it can be
    start = time.perf_counter()
    result = subprocess.run([*grade, "autograde", *flags], capture_output=True, text=True)
    wall = time.perf_counter() - start
    print(result.stdout.strip())
    if result.returncode != 0:
        sys.exit(f"autograde failed:\n{result.stderr[-3000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-book", action="store_true", help="skip the cold book build")
    parser.add_argument("--book-only", action="store_true", help="only the cold book build")
    args = parser.parse_args()
    assignments = sorted(p.parent.name for p in (ROOT / "solutions").glob("*/*.ipynb"))
    with tempfile.TemporaryDirectory(prefix="kvcourse-budgets-") as tmp:
        work = Path(tmp)
        if not args.skip_book:
            wall, chinese, pages = book_times(work / "book")
            print(f"{'book page':<32} {'executes in':>12}   budget {PAGE_BUDGET_S:.0f} s")
            for page, seconds in pages.items():
                print(f"{page:<32} {seconds:>10.1f} s   {verdict(seconds, PAGE_BUDGET_S)}")
            print(
                f"{'whole book, cold build':<32} {wall:>10.1f} s   budget {BOOK_BUDGET_S:.0f} s: "
                f"{verdict(wall, BOOK_BUDGET_S)}"
            )
            print(f"{'  of which the Chinese edition':<32} {chinese:>10.1f} s\n")
        if args.book_only:
            return
        print(f"{'solution notebook':<32} {'executes in':>12}   budget {SOLUTION_BUDGET_S:.0f} s")
        for assignment in assignments:
            seconds = solution_time(ROOT / "solutions" / assignment / f"{assignment}.ipynb")
            print(f"{assignment:<32} {seconds:>10.1f} s   {verdict(seconds, SOLUTION_BUDGET_S)}")
        wall = autograde_time(work, assignments)
        print(
            f"\n{'autograde one full set':<32} {wall:>10.1f} s   budget "
            f"{AUTOGRADE_BUDGET_S:.0f} s: {verdict(wall, AUTOGRADE_BUDGET_S)}"
        )


if __name__ == "__main__":
    main()
