"""How much of each submission's code matches the library's reference or another student's:
``kvcourse-grade similarity A``.

The student bundle ships the course library, and the library holds the reference implementation
of what each assignment asks (:data:`REFERENCES`: ``lib/kvcourse/blocks/radix_cache.py`` is a7's
answer). The hidden tests switch the reference off while a student's code runs and watch for calls
into it or into copies of its code compiled anywhere; this report looks at the text instead. With
`copydetect <https://github.com/blingenf/copydetect>`_ (fingerprints of the code's k-grams, names
and strings replaced, as MOSS does; every k-gram kept, no winnowing, see :data:`GUARANTEE_T`) it
scores every submission of an assignment against the
reference modules and against every other submission of the same assignment.

A submission's code is the source of its solution cells (nbgrader's ``solution: true``) and of the
code cells the student added, each cell re-written by Python's unparser (:func:`canonical`); the
release's solution-cell stubs are copydetect's *boilerplate*, so the given code everyone shares
matches nobody. A score is the share of the submission's own tokens (copydetect's tokens:
characters of the filtered code, after the boilerplate is taken out) that lie in a run of at
least :data:`NOISE_T` tokens also found in the other code.

A high score is a flag for a person to read the two notebooks side by side, never a grade: short
answers to a precise question converge, and the instructor's own solution shares idioms with the
library. The report only reads notebooks; it never changes the gradebook.
"""

from __future__ import annotations

import argparse
import ast
import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from kvcourse_grader.course import CommandError, Course

#: The library's reference for each assignment: the modules (from the repository root) that
#: implement what it asks, read from the ``switched_off(...)`` calls and ``REFERENCE`` strings of
#: its test cells. ``tests/grading/test_similarity.py`` checks that every assignment in
#: ``solutions/`` has an entry and that every file exists.
REFERENCES: dict[str, tuple[str, ...]] = {
    # kv_bytes_per_token ... kv_bytes_per_flop (the visible tests compare with kvcourse.sizing)
    "a0_kv_sizing": ("lib/kvcourse/sizing.py",),
    # "buddy allocator (kvcourse.blocks.buddy)"
    "a1_buddy_allocator": ("lib/kvcourse/blocks/buddy.py",),
    # "reference (kvcourse.blocks.table or kvcourse.attention.blockwise)"
    "a2_block_tables": ("lib/kvcourse/blocks/table.py", "lib/kvcourse/attention/blockwise.py"),
    # "reference (kvcourse.blocks.sharing.SharedBlockManager or kvcourse.generation)"; Part 2's
    # full_copy_tokens is kvcourse.generation.beam_counts's
    "a3_cow_fork": ("lib/kvcourse/blocks/sharing.py", "lib/kvcourse/generation/beam_counts.py"),
    # "reference (kvcourse.serving.VllmPaperScheduler or kvcourse.serving.swap_cost)"
    "a4_preemption": ("lib/kvcourse/serving/preemption.py", "lib/kvcourse/serving/swap_cost.py"),
    # "reference (kvcourse.blocks.hashing, kvcourse.blocks.PrefixCache or kvcourse.cluster)";
    # Ex 7's saved share is kvcourse.generation.prefix_reuse's
    "a5_prefix_cache": (
        "lib/kvcourse/blocks/hashing.py",
        "lib/kvcourse/blocks/prefix_cache.py",
        "lib/kvcourse/blocks/hash_index.py",
        "lib/kvcourse/generation/prefix_reuse.py",
    ),
    # "reference (kvcourse.sizing or the Conductor of kvcourse.cluster)"
    "a6_conductor": ("lib/kvcourse/sizing.py", "lib/kvcourse/cluster/conductor.py"),
    # "reference (kvcourse.blocks.RadixCache)"
    "a7_radix_cache": ("lib/kvcourse/blocks/radix_cache.py",),
}

#: copydetect's noise threshold (its default): the shortest run of matching tokens that counts. A
#: filtered line such as ``V=V.V(V,V)`` is about 10 tokens. On the sample students, 25 keeps the
#: instructor's solutions (written by the library's author) at 11-43 % of the reference while a
#: pasted reference scores 100 %; 15 or 20 push the solutions of a6 and a7 past 50 %.
NOISE_T = 25
#: copydetect's guarantee threshold: a run this long is always found. Equal to the noise threshold,
#: so every k-gram is a fingerprint (no winnowing): the code is short enough, and the scores do not
#: change between runs (copydetect hashes with Python's ``hash``, salted per process, and winnowing
#: keeps the smallest hash of each window, so with a wider window each run keeps other k-grams).
GUARANTEE_T = NOISE_T
#: The share of a submission's own tokens from which a score is flagged for a person to read.
DEFAULT_THRESHOLD = 0.5
#: Fewer own tokens than this and a submission is not scored: there is too little to compare.
MIN_TOKENS = 2 * NOISE_T


@dataclass
class Code:
    """One piece of Python to compare: its name (a student, a library file) and its text."""

    name: str
    text: str


@dataclass
class Row:
    """One student's line of the report. ``problem`` says why the submission could not be read
    (then no score); ``tokens`` counts its own tokens, boilerplate taken out."""

    student: str
    tokens: int = 0
    reference: float = 0.0
    reference_file: str = ""
    peer: float = 0.0
    peer_student: str = ""
    flags: list[str] = field(default_factory=list)
    problem: str = ""


# ------------------------------------------------------------------------------ the notebooks
def _cell_text(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _is_solution(cell: dict) -> bool:
    meta = cell.get("metadata", {})
    return isinstance(meta, dict) and bool(meta.get("nbgrader", {}).get("solution"))


def read_cells(path: Path) -> list[dict]:
    """The cells of a notebook file, read as plain JSON (no schema check, so a notebook nbgrader
    would reject still shows its code); raises :class:`ValueError` saying what is wrong."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ValueError(f"cannot read {path.name}: {err.strerror or err}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path.name} is not UTF-8 text (byte {err.start})") from None
    try:
        notebook = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{path.name} is not a notebook: broken JSON at line {err.lineno}"
        ) from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise ValueError(f"{path.name} is not a notebook: it has no list of cells")
    return [cell for cell in cells if isinstance(cell, dict)]


def canonical(code: str) -> str:
    """``code`` as Python's own unparser writes it (one layout, no comments, no line breaks inside
    brackets, no trailing commas), so re-formatting code hides nothing; code that does not parse
    (a syntax error, an IPython magic) stays as written."""
    try:
        return ast.unparse(ast.parse(code))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return code


def stubs(release_cells: list[dict]) -> list[str]:
    """The release's solution-cell stubs: the given code every student starts from."""
    return [canonical(_cell_text(cell)) for cell in release_cells if _is_solution(cell)]


def submission_code(cells: list[dict], release_cells: list[dict]) -> str:
    """A submission's own code: its solution cells and the code cells the student added (cells
    without nbgrader metadata whose text the release does not hold), in notebook order."""
    given = {_cell_text(cell).strip() for cell in release_cells}
    parts = []
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        text = _cell_text(cell)
        added = "nbgrader" not in cell.get("metadata", {}) and text.strip() not in given
        if _is_solution(cell) or (added and text.strip()):
            parts.append(canonical(text))
    return "\n\n".join(parts)


# ---------------------------------------------------------------------------- the fingerprints
#: Names copydetect's filter keeps as they are (Pygments calls them pseudo-builtins), though they
#: are only a convention: a student who retyped the reference with ``self`` renamed would escape.
_PSEUDO_NAMES = re.compile(r"\b(?:self|cls)\b")


def _fingerprint(code: Code, boilerplate, k: int, window: int):
    from copydetect import CodeFingerprint

    text = _PSEUDO_NAMES.sub("obj", code.text)  # a plain name: filtered to V like the others
    return CodeFingerprint(
        f"{code.name}.py", k, window, boilerplate, language="python", fp=io.StringIO(text)
    )


def boilerplate_hashes(texts: list[str], k: int = NOISE_T):
    """Every k-gram hash of the given code (copydetect's own treatment of boilerplate files:
    all k-grams, no winnowing), to be left out of every fingerprint."""
    import numpy as np

    hashes = [h for text in texts for h in _fingerprint(Code("boilerplate", text), [], k, 1).hashes]
    return np.unique(np.array(hashes, dtype=np.int64))


def _shares(a, b) -> tuple[float, float]:
    """The share of ``a``'s own tokens that match ``b``, and of ``b``'s that match ``a``
    (copydetect's ``compare_files``)."""
    from copydetect import compare_files

    if not a.hashes or not b.hashes or not a.token_coverage or not b.token_coverage:
        return 0.0, 0.0
    _, (share_a, share_b), _ = compare_files(a, b)
    return float(min(share_a, 1.0)), float(min(share_b, 1.0))


def compare(
    submissions: dict[str, str],
    references: list[Code],
    boilerplate: list[str],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    min_tokens: int = MIN_TOKENS,
    noise_t: int = NOISE_T,
    guarantee_t: int = GUARANTEE_T,
) -> list[Row]:
    """One :class:`Row` per student of ``submissions`` (student -> code): the highest share of
    its own tokens that matches a reference module (each alone, and all of them together) and
    that matches another student; each flagged from ``threshold`` on. A submission with fewer
    than ``min_tokens`` own tokens is not scored (its row says so)."""
    if not 0 < noise_t <= guarantee_t:
        raise ValueError(f"need 0 < noise_t <= guarantee_t, got {noise_t} and {guarantee_t}")
    skip = boilerplate_hashes(boilerplate, noise_t)

    def fingerprint(code: Code):
        return _fingerprint(code, skip, noise_t, guarantee_t - noise_t + 1)

    reference_prints = [(r.name, fingerprint(r)) for r in references]
    if len(references) > 1:
        together = Code("all", "\n\n".join(r.text for r in references))
        reference_prints.append((" + ".join(r.name for r in references), fingerprint(together)))
    prints = {s: fingerprint(Code(s, code)) for s, code in submissions.items()}
    rows = {s: Row(s, tokens=int(p.token_coverage)) for s, p in prints.items()}
    scored = [s for s, row in rows.items() if row.tokens >= min_tokens]
    for student in scored:
        row = rows[student]
        for name, reference in reference_prints:
            share, _ = _shares(prints[student], reference)
            if share > row.reference:
                row.reference, row.reference_file = share, name
    for i, one in enumerate(scored):
        for other in scored[i + 1 :]:
            share_one, share_other = _shares(prints[one], prints[other])
            if share_one > rows[one].peer:
                rows[one].peer, rows[one].peer_student = share_one, other
            if share_other > rows[other].peer:
                rows[other].peer, rows[other].peer_student = share_other, one
    for row in rows.values():
        if row.tokens < min_tokens:
            row.flags.append(f"too little code of its own to compare ({row.tokens} tokens)")
            continue
        if row.reference >= threshold:
            row.flags.append(f"{row.reference:.0%} matches the library's {row.reference_file}")
        if row.peer >= threshold:
            row.flags.append(f"{row.peer:.0%} matches {row.peer_student}")
    return list(rows.values())


# ------------------------------------------------------------------------------ the assignment
def reference_code(root: Path, assignment: str) -> list[Code]:
    """The reference modules of ``assignment`` (:data:`REFERENCES`), read from ``root``."""
    if assignment not in REFERENCES:
        raise CommandError(
            f"no library reference is named for {assignment}: add its modules to REFERENCES in "
            "grading/kvcourse_grader/similarity.py"
        )
    found = []
    for name in REFERENCES[assignment]:
        path = root / name
        if not path.is_file():
            raise CommandError(f"{assignment}'s reference {name} is missing; fix REFERENCES")
        text = canonical(path.read_text(encoding="utf-8"))
        found.append(Code(name.removeprefix("lib/"), text))
    return found


def assignment_report(
    course: Course,
    assignment: str,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    min_tokens: int = MIN_TOKENS,
) -> list[Row]:
    """Every submission of ``assignment`` under ``grading/submitted/``, scored by
    :func:`compare`; a submission that cannot be read gets a row with its ``problem``."""
    release = course.release / assignment / f"{assignment}.ipynb"
    if not release.is_file():
        raise CommandError(f"{assignment} has no student version yet; run `release` first")
    try:
        release_cells = read_cells(release)
    except ValueError as err:
        raise CommandError(f"the release of {assignment}: {err}") from None
    references = reference_code(course.root, assignment)
    submissions: dict[str, str] = {}
    broken: list[Row] = []
    for student in course.students(assignment):
        folder = course.submitted / student / assignment
        path = folder / f"{assignment}.ipynb"
        if not path.is_file():
            found = sorted(folder.glob("*.ipynb"))
            if len(found) != 1:
                broken.append(
                    Row(student, problem=f"no {assignment}.ipynb in {course.rel(folder)}")
                )
                continue
            path = found[0]
        try:
            cells = read_cells(path)
        except ValueError as err:
            broken.append(Row(student, problem=str(err)))
            continue
        if not any(_is_solution(cell) for cell in cells):
            broken.append(Row(student, problem="no solution cells (nbgrader metadata lost?)"))
            continue
        submissions[student] = submission_code(cells, release_cells)
    rows = compare(
        submissions, references, stubs(release_cells), threshold=threshold, min_tokens=min_tokens
    )
    return sorted(rows + broken, key=lambda row: row.student)


COLUMNS = (
    "student",
    "own_tokens",
    "reference_share",
    "reference_file",
    "peer_share",
    "peer_student",
    "flagged",
    "note",
)


def write_csv(rows: list[Row], path: Path) -> Path:
    """The report as CSV (:data:`COLUMNS`), shares as fractions with three decimals."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for r in rows:
            scored = not r.problem
            writer.writerow(
                [
                    r.student,
                    r.tokens if scored else "",
                    f"{r.reference:.3f}" if scored else "",
                    r.reference_file,
                    f"{r.peer:.3f}" if scored else "",
                    r.peer_student,
                    "not read"
                    if r.problem
                    else ("yes" if any("matches" in f for f in r.flags) else "no"),
                    r.problem or "; ".join(r.flags),
                ]
            )
    return path


def _line(row: Row, assignment: str) -> str:
    head = f"{row.student:<16} {assignment:<20}"
    if row.problem:
        return f"{head}  NOT COMPARED  {row.problem}"
    peer = f"{row.peer:4.0%} {row.peer_student or '-'}"
    line = f"{head}  {row.tokens:6d}  {row.reference:9.0%}  {peer:<24}"
    marked = [f for f in row.flags if "matches" in f]
    if marked:
        return f"{line}  FLAG: {'; '.join(marked)}"
    return f"{line}  {'; '.join(row.flags)}".rstrip()


# ---------------------------------------------------------------------------------- the command
def cmd_similarity(course: Course, args: argparse.Namespace) -> int:
    """``kvcourse-grade similarity A [--out CSV] [--threshold T]``: a line per student and the CSV;
    0 when every submission was read (flags do not fail the command: they are for a person)."""
    (assignment,) = course.assignments([args.assignment])
    if not 0 < args.threshold <= 1:
        raise CommandError(f"--threshold is a share between 0 and 1, not {args.threshold:g}")
    rows = assignment_report(course, assignment, threshold=args.threshold)
    if not rows:
        print(f"{assignment}: no submissions under {course.rel(course.submitted)}/")
        return 0
    print(
        f"{'student':<16} {'assignment':<20}  {'tokens':>6}  {'reference':>9}  "
        f"{'nearest student':<24}  (copydetect, noise {NOISE_T} tokens; flag from "
        f"{args.threshold:.0%})"
    )
    for row in rows:
        print(_line(row, assignment))
    default = course.grading / f"similarity-{assignment}.csv"
    target = write_csv(rows, Path(args.out).resolve() if args.out else default)
    flagged = sum(any("matches" in f for f in r.flags) for r in rows)
    problems = sum(bool(r.problem) for r in rows)
    print(
        f"wrote {course.rel(target)}: {len(rows)} submission(s), {flagged} flagged for a person "
        f"to read (a flag is not a grade), {problems} not compared; reference: "
        f"{', '.join(REFERENCES[assignment])}"
    )
    return 1 if problems else 0


def add_similarity_parser(steps: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``similarity`` on ``kvcourse-grade``'s subcommands and return its parser."""
    p = steps.add_parser(
        "similarity",
        help="each submission's code similarity to the library's reference and to the others",
    )
    p.add_argument("assignment")
    p.add_argument("--out", help="CSV path (default: grading/similarity-A.csv)")
    p.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help=f"share of a submission's own tokens from which it is flagged "
        f"(default {DEFAULT_THRESHOLD:g})",
    )
    p.set_defaults(run=cmd_similarity)
    return p
