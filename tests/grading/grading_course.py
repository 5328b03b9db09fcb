"""What the grading tests share: the course's assignments and what is known about each, a copy of
the course to run nbgrader in, and readers of the notebooks, the gradebook and the feedback.

Not a test module; ``conftest.py`` puts this folder on ``sys.path`` so the tests import it.
"""

from __future__ import annotations

import ast
import contextlib
import html
import importlib
import os
import re
import shutil
import signal
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import nbformat

from kvcourse_grader.samples import ALL, expected_scores, grade_points, load_samples

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = sorted(p.parent.name for p in (ROOT / "solutions").glob("*/*.ipynb"))
#: Assignments with sample students: each is graded end to end.
SAMPLED = sorted(
    p.stem for p in (ROOT / "grading" / "samples").glob("*.py") if p.stem in ASSIGNMENTS
)
A0 = "a0_kv_sizing"
A2 = "a2_block_tables"
LINUX = sys.platform.startswith("linux")


@dataclass(frozen=True)
class Specific:
    """What the tests know about one assignment beyond the generic rules."""

    #: (visible, hidden) points, as `release` reports them.
    points: tuple[float, float] | None = None
    #: kvcourse modules its test cells may name (to build inputs, never for expected values).
    library: tuple[str, ...] = ()
    #: `--cell-timeout` for the test's autograde run (None: the configured 60 s).
    cell_timeout: int | None = None
    #: values that occur only in hidden tests: no feedback page may show them.
    hidden_literals: tuple[str, ...] = ()
    #: a visible test's failure message that the partial student's feedback keeps.
    partial_message: str | None = None
    #: findings the review must list for the hostile student.
    hostile_flags: tuple[str, ...] = ()


SPECIFIC = {
    A0: Specific(
        points=(5, 5),
        # Only the hidden cells' harness (kvcourse.assignment_checks.harness), for checking().
        library=("assignment_checks",),
        # A short cell timeout keeps the looping student quick; the others never come near it.
        cell_timeout=3,
        hidden_literals=("140544", "426788", "8.738133333333334e-06", "4.3288675429726996e-05"),
        partial_message="expected 12596, got 17479",
        hostile_flags=(
            "defines __eq__",
            "assigns kvcourse.sizing",
            "sys.displayhook",
            "set_custom_exc",
        ),
    ),
    "a1_buddy_allocator": Specific(
        points=(10, 10),
        # The reference allocator, only to switch it off while student code runs; the simulator
        # of Part 6 and the workloads that build its requests, run as fresh private copies; the
        # visible cells' helpers (kvcourse.assignment_checks).
        library=("blocks", "serving", "workloads", "assignment_checks"),
        hidden_literals=(
            "0.39285714285714285",
            "0.49951171875",
            "(2992, 8)",
            "0.35479540143694194",
            "(0, 4, 12, 8)",
        ),
        partial_message="expected the share 0.4420 (212 + 424 + 948 = 1584 of 3584 slots), "
        "got 0.792",
        hostile_flags=(
            "defines __eq__",
            "assigns kvcourse.serving.simulate",
            "sys.displayhook",
            "set_custom_exc",
        ),
    ),
    A2: Specific(
        points=(10, 10),
        # The pool the student's table runs on; the reference table and attention, only to
        # switch them off while student code runs; the caches and model of Part 4, run as fresh
        # private copies; the visible cells' helpers.
        library=("blocks", "attention", "kv", "model", "assignment_checks"),
        hidden_literals=(
            "0.609375",
            "2.077079107505071",
            "1.3678794411714423",
            "(2, (1, 4, 9))",
            "2.6385500076446675",
        ),
        partial_message="half_block_waste_estimate(16, 493): expected about 0.0162, got 1.62",
        hostile_flags=(
            "defines __eq__",
            "assigns kvcourse.kv.PagedKVCache",
            "sys.displayhook",
            "set_custom_exc",
        ),
    ),
    "a3_cow_fork": Specific(
        points=(10, 10),
        # The pool the student's manager runs on; the reference manager (blocks) and decoding
        # drivers (generation), only to switch them off while student code runs; the sharing
        # cache and the model of Part 6, run as fresh private copies; the visible cells' helpers.
        library=("blocks", "generation", "kv", "model", "assignment_checks"),
        hidden_literals=(
            "4004000",
            "(15, 16, 12, 11)",
            "(5, 48, 40, 16, 11)",
            "[26, 39, 109, 38, 111, 80, 40, 126, 83]",
            "[[0], [6, 2, 4]]",
        ),
        partial_message="full_copy_tokens(4, 64, 32): expected 10176 (4 x [64 + sum over s = "
        "1..31 of (64 + s)] = 4 x 2544), got 9920",
        hostile_flags=(
            "defines __eq__",
            "assigns kvcourse.generation.full_copy_tokens",
            "sys.displayhook",
            "set_custom_exc",
        ),
    ),
    "a4_preemption": Specific(
        points=(10, 10),
        # The reference hooks (serving.Scheduler) and Ex 6 (serving.swap_cost), only to switch
        # them off while student code runs; the serving loop, policies and requests the tests
        # build; the visible cells' helpers.
        library=("serving", "workloads", "assignment_checks"),
        hidden_literals=(
            "0.0610030080",
            "(132, 445, 132)",
            "(102, 13, 126, 0)",
            "(86, 7, 14, 6)",
            "bandwidth=64.0",
        ),
        partial_message="swap_out_seconds(1024, 32): expected 59.154 ms (2,560 copies of "
        "327,680 B), got 29.577 ms",
        hostile_flags=("defines __eq__", "sys.displayhook", "set_custom_exc"),
    ),
    "a5_prefix_cache": Specific(
        points=(10, 10),
        # The reference hashing and caches (blocks, cluster), only to switch them off while
        # student code runs; the Mooncake traces of Part 5; the visible cells' helpers.
        library=("blocks", "cluster", "traces", "assignment_checks"),
        hidden_literals=(
            "[3259, 7059, 22417, 25332]",
            "(51614, 60209)",
            "((10, 4, 1), 6)",
            "[[9, 5], [7], [1]]",
        ),
        # the failing check's message: the second block hashed without its parent
        partial_message="'a1458139c046b30bfceddc27cec9d278954774e53eaf9210606f457c12c2664e']. "
        "Hint: two full blocks",
        hostile_flags=("defines __eq__", "sys.displayhook", "set_custom_exc"),
    ),
    "a6_conductor": Specific(
        points=(10, 10),
        # The reference Conductor (cluster) and Ex 8 (sizing), only to switch them off while
        # student code runs; the prefill pool and the Mooncake traces of Part 5; the visible
        # cells' helpers.
        library=("cluster", "sizing", "traces", "assignment_checks"),
        hidden_literals=(
            "(64712, 28105695, 0, 0)",
            "(45812, 18373038, 352, 5548850)",
            "15_360",
            "2.0**51 / 2.496e15",
        ),
        # the failing check's message: Ex 8's KV bytes without the factor 2 of K and V
        partial_message="Ex 8a: kv_bytes_per_token(80, 8, 128, 2): expected 327680",
        hostile_flags=("defines __eq__", "sys.displayhook", "set_custom_exc"),
    ),
    "a7_radix_cache": Specific(
        points=(10, 10),
        # The reference radix tree (blocks), only to switch it off while student code runs; the
        # visible cells' helpers (kvcourse.assignment_checks).
        library=("blocks", "assignment_checks"),
        hidden_literals=(
            "[0, 1, 2, 5, 6]",
            "((6, 6), (0, 1), 2)",
            "((1, 1), (6, 7), 0)",
            "(1, [[2, 3], [8], [4]])",
        ),
        # the failing check's message: the split left the old node's children on the upper part
        partial_message="after insert([1, 3]): expected the edges (tokens, slots, refs) = "
        "[((1,), (0,), 0)",
        hostile_flags=("defines __eq__", "sys.displayhook", "set_custom_exc"),
    ),
}


def specific(assignment: str) -> Specific:
    return SPECIFIC.get(assignment, Specific())


#: The seed of the hidden tests' own random cases in the tests' grading runs: one fixed seed, so
#: that every sample's expected grades hold run after run (a real run draws a new one).
CASE_SEED = 20261207


def cli(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``kvcourse-grade`` as an instructor of the course would: a fresh process in ``cwd``.

    Past ``timeout`` seconds the command and everything it started (graders, kernels) are killed,
    so a command that overran does not keep grading beside the tests that follow."""
    with subprocess.Popen(
        [sys.executable, "-m", "kvcourse_grader.cli", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def copy_course(target: Path) -> Path:
    """A copy of what grading needs (config, samples, solutions, notebooks) at ``target``."""
    (target / "grading").mkdir(parents=True)
    shutil.copy2(ROOT / "grading" / "nbgrader_config.py", target / "grading")
    shutil.copytree(ROOT / "grading" / "samples", target / "grading" / "samples")
    shutil.copytree(ROOT / "solutions", target / "solutions")
    if (ROOT / "notebooks").is_dir():
        shutil.copytree(ROOT / "notebooks", target / "notebooks")
    return target


def notebook(root: Path, directory: str, assignment: str = A0):
    return nbformat.read(root / directory / assignment / f"{assignment}.ipynb", as_version=4)


def graded_cells(source_nb, *, hidden: bool) -> list:
    """The visible (or the hidden) test cells of a source notebook."""
    return [
        cell
        for cell in source_nb.cells
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade")
        and not cell.metadata["nbgrader"].get("solution")
        and ("BEGIN HIDDEN TESTS" in cell.source) == hidden
    ]


def hidden_lines(source_nb) -> list[str]:
    """Distinctive lines found only inside hidden-test regions (not elsewhere in the notebook),
    import lines aside."""
    inside, hidden, elsewhere = False, set(), set()
    for cell in source_nb.cells:
        for line in cell.source.split("\n"):
            if "BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "END HIDDEN TESTS" in line:
                inside = False
            elif line.strip():
                (hidden if inside else elsewhere).add(line.strip())
    # An import line tells nothing about the tests, and a student's own code may hold it too.
    secret = [line for line in hidden - elsewhere if not line.startswith(("import ", "from "))]
    return sorted(line for line in secret if len(line) >= 12)


def hidden_cells(source_nb) -> list:
    return [cell for cell in source_nb.cells if "BEGIN HIDDEN TESTS" in cell.source]


def html_text(path: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text()))


def point_split(assignment: str) -> tuple[float, float]:
    """(visible, hidden) points of an assignment's source notebook."""
    points = grade_points(notebook(ROOT, "solutions", assignment))
    hidden = sum(p for g, p in points.items() if g.startswith("hidden_"))
    return sum(points.values()) - hidden, hidden


def cell_scores(root: Path, student: str, assignment: str = A0) -> dict[str, float]:
    """What the gradebook of the course copy at ``root`` holds for each test cell."""
    from nbgrader.api import Gradebook

    points = grade_points(notebook(root, "solutions", assignment))
    url = f"sqlite:///{root / 'grading' / 'gradebook.db'}"
    with Gradebook(url, "kvcourse") as gb:
        return {
            grade_id: float(gb.find_grade(grade_id, assignment, assignment, student).score)
            for grade_id in points
        }


def expected_for(student: str, assignment: str = A0) -> dict[str, float]:
    sample = load_samples(ROOT, assignment)[student]
    expected = expected_scores(ROOT, assignment, sample)
    if student == "hog" and not LINUX:  # no memory limit, so the 8 GiB grab succeeds
        expected = expected_scores(ROOT, assignment, type(sample)(about=sample.about, passes=ALL))
    return expected


def sample_students(*, skip: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(assignment, student) for every sample student, for parametrize."""
    return [
        (assignment, student)
        for assignment in SAMPLED
        for student in load_samples(ROOT, assignment)
        if student not in skip
    ]


def autograde_line(output: str, student: str) -> str:
    return next(s for s in output.splitlines() if re.match(rf"{re.escape(student)}\s", s))


LIBRARY = ROOT / "lib" / "kvcourse"


def library_names(source: str) -> list[str]:
    """Dotted ``kvcourse...`` names a cell's code uses: imports, and attribute chains."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Attribute):
            parts = []
            while isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            if isinstance(node, ast.Name):
                found.append(".".join([node.id, *reversed(parts)]))
    return [name for name in found if name.split(".")[0] == "kvcourse"]


def below_package_level(name: str, library: Path = LIBRARY) -> bool:
    """Whether ``kvcourse.<package>.<module>...`` names a module inside a library package, which
    may move while the package's public names stay (kvcourse.assignment_checks is the course's
    own)."""
    parts = name.split(".")
    if len(parts) < 3 or parts[1] == "assignment_checks" or not (library / parts[1]).is_dir():
        return False
    inside = library / parts[1] / parts[2]
    if not (inside.is_dir() or inside.with_suffix(".py").is_file()):
        return False
    if library == LIBRARY:  # a public name of the package that shadows its module is public
        package = importlib.import_module(f"kvcourse.{parts[1]}")
        public = getattr(package, parts[2], None)
        if public is not None and not isinstance(public, types.ModuleType):
            return False
    return True
