"""`kvcourse-grade similarity`: each submission's code against the library's reference and the other
submissions, with copydetect (kvcourse_grader.similarity). Sample notebooks are built from the
release; no nbgrader runs."""

from __future__ import annotations

import csv
import json
import re
import shutil

import nbformat
import pytest
from grading_course import ASSIGNMENTS, ROOT

from kvcourse_grader import similarity
from kvcourse_grader.cli import main
from kvcourse_grader.course import Course
from kvcourse_grader.samples import build_sample, load_samples
from kvcourse_grader.similarity import (
    REFERENCES,
    compare,
    read_cells,
    reference_code,
    stubs,
    submission_code,
)

A7 = "a7_radix_cache"


def release_cells(assignment: str) -> list[dict]:
    return read_cells(ROOT / "notebooks" / assignment / f"{assignment}.ipynb")


def sample_notebook(assignment: str, student: str):
    return build_sample(ROOT, assignment, load_samples(ROOT, assignment)[student])


def code_of(assignment: str, notebook) -> str:
    return submission_code(notebook.cells, release_cells(assignment))


def renamed(source: str) -> str:
    """``source`` with every class, function and parameter-free attribute renamed, as a student
    who pastes code and disguises it would."""
    names = set(re.findall(r"^\s*(?:def|class) (\w+)", source, re.M))
    names |= set(re.findall(r"self\.(\w+) *[:=]", source))
    for name in sorted(names - {"__init__"}, key=len, reverse=True):
        source = re.sub(rf"\b{name}\b", f"my_{name.strip('_')}", source)
    return source


def pasted_radix_cache() -> str:
    """The library's radix tree pasted into a7's cell: its node and cache classes, renamed, the
    cache under the name the tests read."""
    text = (ROOT / REFERENCES[A7][0]).read_text(encoding="utf-8")
    start, end = text.index("class _Node:"), text.index("\ndef _check_request_id")
    code = renamed(text[start:end]).replace("class my_RadixCache", "class MyRadixCache")
    return "import heapq\nfrom collections.abc import Hashable, Sequence\n\n" + code


def with_cell(notebook, grade_id: str, source: str):
    for cell in notebook.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id:
            cell.source = source
            return notebook
    raise KeyError(grade_id)


def by_student(rows) -> dict:
    return {row.student: row for row in rows}


# ----------------------------------------------------------------------------- the reference map
def test_every_assignment_has_a_reference_that_exists():
    assert set(REFERENCES) == set(ASSIGNMENTS), (
        "REFERENCES must name every assignment in solutions/"
    )
    for assignment, paths in REFERENCES.items():
        assert paths, assignment
        for path in paths:
            assert path.startswith("lib/kvcourse/") and path.endswith(".py"), path
            assert (ROOT / path).is_file(), f"{assignment}: {path} does not exist"


def test_each_reference_is_a_library_package_the_assignment_names():
    """A reference module, or its package, is named in the assignment's source notebook (its
    tests switch it off), except a5's Ex 7, whose reference lives in kvcourse.generation."""
    for assignment, paths in REFERENCES.items():
        source = (ROOT / "solutions" / assignment / f"{assignment}.ipynb").read_text()
        for path in paths:
            module = path.removeprefix("lib/").removesuffix(".py").replace("/", ".")
            package = module.rsplit(".", 1)[0] if module.count(".") > 1 else module
            if (assignment, path) == ("a5_prefix_cache", "lib/kvcourse/generation/prefix_reuse.py"):
                continue
            assert module in source or package in source, f"{assignment}: {module}"


# ------------------------------------------------------------------------------------ the scores
def test_pasted_reference_scores_high_and_the_instructors_solution_lower():
    notebook = with_cell(sample_notebook(A7, "untouched"), "MyRadixCache", pasted_radix_cache())
    pasted = code_of(A7, notebook)
    rows = by_student(
        compare(
            {
                "pasted": pasted,
                "correct": code_of(A7, sample_notebook(A7, "correct")),
                "scan_tree": code_of(A7, sample_notebook(A7, "scan_tree")),
            },
            reference_code(ROOT, A7),
            stubs(release_cells(A7)),
        )
    )
    assert rows["pasted"].reference >= 0.9, rows["pasted"]
    assert rows["pasted"].reference_file == "kvcourse/blocks/radix_cache.py"
    assert any("library" in flag for flag in rows["pasted"].flags)
    assert rows["correct"].reference < similarity.DEFAULT_THRESHOLD, rows["correct"]
    assert rows["scan_tree"].reference < rows["correct"].reference < rows["pasted"].reference
    for student in ("correct", "scan_tree"):
        assert not any("library" in flag for flag in rows[student].flags), rows[student]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_reference_pasted_whole_is_flagged_and_the_solution_is_not(assignment):
    references = reference_code(ROOT, assignment)
    rows = by_student(
        compare(
            {
                "pasted": renamed(references[0].text),
                "correct": code_of(assignment, sample_notebook(assignment, "correct")),
            },
            references,
            stubs(release_cells(assignment)),
        )
    )
    assert rows["pasted"].reference >= 0.9, rows["pasted"]
    assert rows["correct"].tokens >= similarity.MIN_TOKENS
    assert rows["correct"].reference < similarity.DEFAULT_THRESHOLD, rows["correct"]


def test_renaming_self_or_reformatting_hides_nothing():
    """copydetect keeps ``self`` as written and sees layout; the report makes both plain."""
    disguised = re.sub(r"\bself\b", "me", pasted_radix_cache())
    disguised = disguised.replace("(", "(\n    ").replace(", ", ",\n    ")
    rows = compare({"dee": disguised}, reference_code(ROOT, A7), stubs(release_cells(A7)))
    assert "me.my_root" in disguised and rows[0].reference >= 0.9, rows[0]


def test_two_identical_students_flag_each_other_and_nobody_else():
    correct = code_of(A7, sample_notebook(A7, "correct"))
    rows = by_student(
        compare(
            {
                "ann": correct,
                "bob": correct,
                "cy": code_of(A7, sample_notebook(A7, "leaf_index")),
            },
            reference_code(ROOT, A7),
            stubs(release_cells(A7)),
        )
    )
    assert (rows["ann"].peer, rows["ann"].peer_student) == (1.0, "bob")
    assert (rows["bob"].peer, rows["bob"].peer_student) == (1.0, "ann")
    assert "100% matches bob" in rows["ann"].flags
    assert rows["cy"].peer < similarity.DEFAULT_THRESHOLD and not rows["cy"].flags


def test_the_given_code_matches_nobody():
    """Students who only touched the release share its stubs, which are boilerplate: nothing of
    their own is left to compare, and they are not flagged."""
    untouched = code_of(A7, sample_notebook(A7, "untouched"))
    assert "class MyRadixCache" in untouched  # the stub's given code is there...
    rows = compare(
        {"ann": untouched, "bob": untouched + "\n# mine\n"},
        reference_code(ROOT, A7),
        stubs(release_cells(A7)),
    )
    for row in rows:  # ... but none of it counts
        assert row.tokens < similarity.MIN_TOKENS and row.peer == 0 and row.reference == 0
        assert row.flags == [f"too little code of its own to compare ({row.tokens} tokens)"]


def test_added_cells_count_as_the_students_code():
    notebook = sample_notebook(A7, "untouched")
    notebook.cells.append(nbformat.v4.new_code_cell(pasted_radix_cache()))
    code = code_of(A7, notebook)
    assert "class MyRadixCache" in code and "my_walk" in code


# ------------------------------------------------------------------------------------ the command
@pytest.fixture
def course(tmp_path):
    """A course with a7's source, release and reference, and a class of students, some of whose
    notebooks are broken."""
    root = tmp_path / "course"
    (root / "grading").mkdir(parents=True)
    shutil.copy2(ROOT / "grading" / "nbgrader_config.py", root / "grading")
    for folder in ("solutions", "notebooks"):
        shutil.copytree(ROOT / folder / A7, root / folder / A7)
    for path in REFERENCES[A7]:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, root / path)
    submitted = Course.load(root).submitted

    def hand_in(student: str, data: bytes | None):
        folder = submitted / student / A7
        folder.mkdir(parents=True)
        if data is not None:
            (folder / f"{A7}.ipynb").write_bytes(data)

    correct = nbformat.writes(sample_notebook(A7, "correct")).encode()
    pasted = with_cell(sample_notebook(A7, "untouched"), "MyRadixCache", pasted_radix_cache())
    no_metadata = sample_notebook(A7, "correct")
    for cell in no_metadata.cells:
        cell.metadata.pop("nbgrader", None)
    hand_in("ann", correct)
    hand_in("bob", correct)
    hand_in("cy", nbformat.writes(sample_notebook(A7, "scan_tree")).encode())
    hand_in("dee", nbformat.writes(pasted).encode())
    hand_in("eve", nbformat.writes(sample_notebook(A7, "untouched")).encode())
    hand_in("broken_json", correct[: len(correct) // 2])
    hand_in("latin1", '{"cells": [], "note": "caf\u00e9"}'.encode("latin-1"))
    hand_in("no_cells", json.dumps({"nbformat": 4}).encode())
    hand_in("no_metadata", nbformat.writes(no_metadata).encode())
    hand_in("nothing", None)
    return root


def test_the_command_prints_a_line_per_student_and_writes_the_csv(course, capsys):
    out = course / "report.csv"
    status = main(["--course-root", str(course), "similarity", A7, "--out", str(out)])
    printed = capsys.readouterr().out
    assert status == 1  # some submissions could not be read
    lines = {line.split()[0]: line for line in printed.splitlines()[1:-1]}
    assert "FLAG: 100% matches bob" in lines["ann"] and "FLAG: 100% matches ann" in lines["bob"]
    assert "FLAG" in lines["dee"] and "library's kvcourse/blocks/radix_cache.py" in lines["dee"]
    assert "FLAG" not in lines["cy"] and "FLAG" not in lines["eve"]
    assert "too little code of its own" in lines["eve"]
    problems = {
        "broken_json": "broken JSON",
        "latin1": "not UTF-8",
        "no_cells": "no list of cells",
        "no_metadata": "no solution cells",
        "nothing": f"no {A7}.ipynb",
    }
    for student, words in problems.items():
        assert "NOT COMPARED" in lines[student] and words in lines[student], lines[student]
    assert "5 not compared" in printed and "3 flagged" in printed

    with open(out, newline="", encoding="utf-8") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert list(rows) == sorted(rows) and len(rows) == 10
    assert rows["ann"]["peer_student"] == "bob" and rows["ann"]["peer_share"] == "1.000"
    assert float(rows["dee"]["reference_share"]) >= 0.9 and rows["dee"]["flagged"] == "yes"
    assert rows["cy"]["flagged"] == "no" and rows["latin1"]["reference_share"] == ""
    assert "not UTF-8" in rows["latin1"]["note"]


def test_the_command_refuses_a_threshold_outside_zero_to_one(course, capsys):
    assert main(["--course-root", str(course), "similarity", A7, "--threshold", "50"]) == 2
    assert "--threshold is a share between 0 and 1" in capsys.readouterr().err
