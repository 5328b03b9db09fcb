"""The sample students of grading/samples/, built from the current release and, in the slow tests,
graded by the real nbgrader: every test cell scores as the sample says, broken students cost only
their own grade, tricks are flagged, the feedback never shows a hidden test, the export is right."""

from __future__ import annotations

import base64
import csv
import re

import nbformat
import pytest
from grading_course import (
    A0,
    ASSIGNMENTS,
    CASE_SEED,
    LINUX,
    ROOT,
    SAMPLED,
    autograde_line,
    below_package_level,
    cell_scores,
    expected_for,
    hidden_cells,
    hidden_lines,
    html_text,
    library_names,
    notebook,
    point_split,
    sample_students,
    specific,
)

from kvcourse_grader import leaks, samples
from kvcourse_grader.leak_samples import read_traced
from kvcourse_grader.review import review_notebook, review_source
from kvcourse_grader.samples import build_sample, load_samples
from kvcourse_grader.sandbox import sandbox_problem


def graded_by_nbgrader(test):
    """Marks a test that reads every sample student graded by real nbgrader: slow, and one of the
    end-to-end tests (``make test-e2e``)."""
    return pytest.mark.e2e(pytest.mark.slow(test))


# ------------------------------------------------------------------ building (no nbgrader here)
@pytest.mark.parametrize("assignment", SAMPLED)
def test_samples_are_built_from_the_current_release(tmp_path, assignment):
    samples_ = load_samples(ROOT, assignment)
    assert {"correct", "untouched", "partial", "raises", "syntax_error", "hostile"} <= set(samples_)
    release = notebook(ROOT, "notebooks", assignment)
    for student, sample in samples_.items():
        built = build_sample(ROOT, assignment, sample)
        nbformat.validate(built)
        kept = [
            c
            for c in release.cells
            if c.metadata.get("nbgrader", {}).get("grade_id") not in sample.drop
        ]
        assert len(built.cells) == len(kept) + len(sample.appended), student
        added = built.cells[len(kept) :]  # the cells a student appended come last
        assert [c.source for c in added] == [a.strip("\n") for a in sample.appended], student
        for ours, theirs in zip(built.cells[: len(kept)], kept, strict=True):
            if not ours.get("metadata", {}).get("nbgrader", {}).get("solution"):
                assert ours.source == theirs.source, student  # only answers differ
            elif ours.source.strip():
                # A sample student, too, names the library at package level only.
                try:
                    deep = [n for n in library_names(ours.source) if below_package_level(n)]
                except SyntaxError:
                    continue  # the student whose cell does not parse
                assert not deep, (student, deep)
        text = nbformat.writes(built)
        assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    assert review_notebook(tmp_path / "missing.ipynb")[0].startswith("unreadable")


@pytest.mark.parametrize("assignment", SAMPLED)
def test_samples_hold_realistic_wrong_solutions(assignment):
    """At least five samples make one mistake in one solution cell, and lose some test cells but
    not all (which ones, exactly, the slow tests check against nbgrader)."""
    samples_ = load_samples(ROOT, assignment)
    one_mistake = [
        student
        for student, sample in samples_.items()
        if student not in ("raises", "syntax_error", "hostile", "copycat")
        and len(sample.cells) == 1
        and not sample.drop
        and sample.passes not in (samples.ALL, ())
    ]
    assert len(one_mistake) >= 5, (assignment, one_mistake)


@pytest.mark.parametrize("assignment", ["a2_block_tables", "a3_cow_fork"])
def test_a_free_in_any_order_scores_full_marks(assignment):
    """The pool hands released blocks out again in the order they were released: a student whose
    free releases a table's blocks in reverse must not lose a point for it."""
    sample = load_samples(ROOT, assignment)["reverse_free"]
    assert sample.passes == samples.ALL
    built = build_sample(ROOT, assignment, sample)
    (code,) = [c.source for c in built.cells if "def free(self" in c.source]
    assert "reversed(" in code


def test_shared_sample_parts():
    assert samples.tests_of("a", "b") == ("test_a", "hidden_a", "test_b", "hidden_b")
    basic = samples.basic_samples()
    assert basic["correct"].passes == samples.ALL and basic["untouched"].passes == ()
    assert samples.raises_first("x = 1").startswith("import kvcourse.no_such_module")
    assert samples.replaced("+ 1", "+ 2")("return x + 1") == "return x + 2"
    with pytest.raises(ValueError, match="update the sample"):
        samples.replaced("- 1", "+ 2")("return x + 1")
    snippets = samples.ANYTHING + samples.WHATEVER + samples.AGREEABLE
    found = review_source(snippets, set())
    for name in ("Anything", "Whatever", "Agreeable"):
        assert any(f"class {name} defines __eq__" in f for f in found), found
    assert "calls numbers.Real.register (claims to be a number)" in found
    namespace: dict = {}
    exec(snippets, namespace)
    assert namespace["Anything"](0) == 5 and namespace["Agreeable"]("a") == "b"
    for line in (samples.FORGE_SCORE, samples.SWALLOW_ERRORS):
        assert review_source(f"import sys\n{line}\n", set()), line
    definition = "def f(x: int) -> int:"
    for build, flag in [(samples.loops_forever, "catches"), (samples.kills_kernel, "os._exit")]:
        code = build(definition)
        compile(code, "<sample>", "exec")
        assert any(flag in f for f in review_source(code, set())), (build, code)
    solution = 'def f(x):\n    """Doc,\n    on two lines.\n    """\n    return x\n'
    grabbed = samples.grabs_memory(solution, gib=1)
    assert "bytearray(1 * 2**30)" in grabbed and grabbed.endswith("return x\n")
    with pytest.raises(ValueError):
        samples.grabs_memory("def f(x):\n    return x\n")


# -------------------------------------------------------------------------- graded by nbgrader
@graded_by_nbgrader
@pytest.mark.parametrize("assignment", SAMPLED)
def test_autograde_reports_every_student(graded, assignment):
    root, steps = graded(assignment)
    result = steps["autograde"]
    assert result.returncode == 0, result.stdout + result.stderr
    students = load_samples(ROOT, assignment)
    full = sum(point_split(assignment))
    for student in students:
        total = sum(expected_for(student, assignment).values())
        assert re.search(
            rf"^{student}\s+{assignment}\s+{total:g} / {full:g} ", result.stdout, re.M
        ), f"{student}: no line with {total:g} / {full:g} in\n{result.stdout}"
    assert f"graded {len(students)} submission(s); 0 could not be graded" in result.stdout
    assert f"random cases: seed {CASE_SEED} (--seed {CASE_SEED} tries them again)" in result.stdout


@graded_by_nbgrader
@pytest.mark.parametrize("assignment", SAMPLED)
def test_solution_gets_full_marks(graded, assignment):
    scores = cell_scores(graded(assignment)[0], "correct", assignment)
    assert sum(scores.values()) == sum(point_split(assignment))


@graded_by_nbgrader
@pytest.mark.parametrize("assignment", SAMPLED)
def test_untouched_release_gets_zero(graded, assignment):
    scores = cell_scores(graded(assignment)[0], "untouched", assignment)
    assert scores and all(score == 0 for score in scores.values())


@graded_by_nbgrader
@pytest.mark.parametrize(("assignment", "student"), sample_students(skip=("correct", "untouched")))
def test_each_cell_scores_as_the_sample_says(graded, assignment, student):
    root = graded(assignment)[0]
    assert cell_scores(root, student, assignment) == expected_for(student, assignment)


@graded_by_nbgrader
def test_broken_students_do_not_stop_the_run(graded):
    out = graded(A0)[1]["autograde"].stdout
    # The cells after the last test cell (the plug-in cell) are not run at autograde at all.
    assert "[the kernel died; 1 later cell(s) not run]" in out
    assert "[1 cell(s) timed out; 4 later cell(s) not run]" in out
    if LINUX:
        assert "MemoryError in 2 cell(s)" in out


@graded_by_nbgrader
@pytest.mark.parametrize("assignment", SAMPLED)
def test_hostile_is_flagged_for_review(graded, assignment):
    out = graded(assignment)[1]["autograde"].stdout
    if "hostile" in load_samples(ROOT, assignment):
        line = autograde_line(out, "hostile")
        assert "review:" in line, line
        for finding in specific(assignment).hostile_flags:
            assert finding in line, line
    assert "review" not in autograde_line(out, "correct")
    for student in load_samples(ROOT, assignment):
        if student.startswith("leaks_"):  # full marks, nothing leaked, and a person looks
            line = autograde_line(out, student)
            assert "review:" in line, line
            # No hidden cell ran in the kernel: nothing of the tests was there to print.
            assert "printed text of a hidden test" not in line, line
    if assignment == A0:
        deleter = autograde_line(out, "deletes_tests")
        assert "missing locked cells: hidden_kv_bytes_per_flop" in deleter


def _read_stash(text: str) -> str:
    """What ``leaks_callers`` stashed, from its printed output."""
    found = re.search(r"stash: (\S+)", text)
    return base64.b64decode(found.group(1)).decode("utf-8", "replace") if found else ""


READERS = {"leaks_tracer": read_traced, "leaks_callers": _read_stash}


@graded_by_nbgrader
@pytest.mark.parametrize(
    "assignment", [a for a in SAMPLED if set(READERS) & set(load_samples(ROOT, a))]
)
def test_students_who_trace_the_hidden_tests_find_nothing_of_them(graded, assignment):
    """A trace function and a frame-reading function installed by the student record everything
    their kernel ran, and print it scrambled (no output search could recognise it): none of it
    comes from a hidden test, which never runs in that kernel."""
    root = graded(assignment)[0]
    secret = leaks.hidden_text(notebook(ROOT, "solutions", assignment))
    students = [s for s in READERS if s in load_samples(ROOT, assignment)]
    for student, read in [(s, READERS[s]) for s in students]:
        graded_nb = notebook(root / "grading" / "autograded" / student, "", assignment)
        # One stream may come back in several outputs, split wherever the kernel flushed.
        printed = "\n".join(
            "".join(str(output.get("text", "")) for output in cell.get("outputs", []))
            for cell in graded_nb.cells
        )
        record = read(printed)
        assert len(record) > 1000, f"{student} recorded nothing: the sample no longer works"
        for literal in specific(assignment).hidden_literals:
            assert literal not in record, f"{student}: {literal}"
        assert not secret.found_in(record), f"{student}: {secret.found_in(record)[:3]}"


@graded_by_nbgrader
@pytest.mark.parametrize("assignment", SAMPLED)
def test_feedback_hides_hidden_tests(graded, assignment):
    root, steps = graded(assignment)
    source = notebook(ROOT, "solutions", assignment)
    secret = hidden_lines(source)
    assert len(secret) > 20
    first_comment = re.match(r"# (Part .*?hidden tests \([^)]*\))", hidden_cells(source)[0].source)
    assert first_comment, "a hidden-test cell starts with a comment saying what it checks"
    samples_ = load_samples(ROOT, assignment)
    feedback = root / "grading" / "feedback"
    pages = sorted(feedback.glob(f"*/{assignment}/{assignment}.html"))
    assert len(pages) == len(samples_)
    for page in pages:
        student = page.parent.parent.name
        raw, text = page.read_text(), html_text(page)
        assert "HIDDEN TESTS" not in raw
        lines = {line.strip() for line in text.splitlines()}
        # A line of the student's own code may happen to equal a hidden one ("if not fits:").
        built = build_sample(ROOT, assignment, samples_[student])
        own = {line.strip() for cell in built.cells for line in cell.source.splitlines()}
        leaked = [line for line in secret if line in lines and line not in own]
        assert not leaked, f"{student}: {leaked[:3]}"
        for literal in specific(assignment).hidden_literals:
            assert literal not in text, f"{student}: {literal}"
        if not samples_[student].drop:
            assert first_comment.group(1) in text  # the visible comment stays
    partial = html_text(feedback / "partial" / assignment / f"{assignment}.html")
    # "Hidden tests: failed." or, where the failed property has a name, "... failed: <name>."
    assert re.search(r"Hidden tests: failed(: [^\n]+)?\.", partial)
    if specific(assignment).partial_message:  # visible failures keep their message
        assert specific(assignment).partial_message in partial
    correct = html_text(feedback / "correct" / assignment / f"{assignment}.html")
    assert correct.count("Hidden tests: passed.") == len(hidden_cells(source))


@graded_by_nbgrader
@pytest.mark.parametrize("assignment", SAMPLED)
def test_feedback_reads_offline_and_names_each_test(graded, assignment):
    root, steps = graded(assignment)
    out = steps["feedback"].stdout
    for other in ASSIGNMENTS:
        if other != assignment:  # nobody was graded on it in this course
            assert f"{other}: nobody graded yet, no feedback" in out, out
    source = notebook(ROOT, "solutions", assignment)
    tests = [c for c in source.cells if c.metadata.get("nbgrader", {}).get("grade")]
    page = root / "grading" / "feedback" / "correct" / assignment / f"{assignment}.html"
    raw = page.read_text()
    assert 'name="viewport"' in raw and "Test cell" not in raw
    assert not re.search(r"<script[^>]+src=", raw), "the page loads a script"
    assert "cdnjs" not in raw and "mathjax" not in raw.lower()
    for cell in tests:
        grade_id = cell.metadata.nbgrader.grade_id
        part = cell.source.split("\n")[0].lstrip("# ").split(",")[0]
        kind = "hidden tests" if grade_id.startswith("hidden") else "visible tests"
        link = re.search(rf'<a href="#{grade_id}">([^<]*)<code>([^<]*)</code></a>', raw)
        assert link, f"no link named for {grade_id}"
        assert link.group(1) == f"{part} · {kind} · ", link.group(0)


@graded_by_nbgrader
@pytest.mark.parametrize("assignment", SAMPLED)
def test_export_has_each_students_score(graded, assignment):
    root, steps = graded(assignment)
    with open(root / "grades.csv", newline="") as handle:
        rows = {
            row["student_id"]: row
            for row in csv.DictReader(handle)
            if row["assignment"] == assignment
        }
    for student in load_samples(ROOT, assignment):
        expected = sum(expected_for(student, assignment).values())
        assert float(rows[student]["score"]) == expected, student
        assert float(rows[student]["max_score"]) == sum(point_split(assignment))


@graded_by_nbgrader
@pytest.mark.skipif(sandbox_problem() is not None, reason="the sandbox samples need bubblewrap")
def test_a_search_of_the_whole_disk_finds_no_solutions(graded):
    """searches_disk walks every folder but the system's own for a solutions tree: with other
    copies of the course on this machine (the checkout that runs the tests is one), the walk ends
    in time and finds nothing, so the student scores zero for the right reason."""
    root, _ = graded(A0)
    graded_nb = notebook(root / "grading" / "autograded" / "searches_disk", "", A0)
    answers = [c for c in graded_nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    errors = [o for c in answers for o in c.get("outputs", []) if o.output_type == "error"]
    assert len(errors) == len(answers), "every answer cell ends in an error"
    assert all(o.ename == "FileNotFoundError" for o in errors), errors[:2]
    assert "no solutions anywhere on this disk" in errors[0].evalue
    assert (ROOT / "solutions" / A0).is_dir()  # while the tests' own checkout holds them
