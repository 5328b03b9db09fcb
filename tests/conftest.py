"""Shared test set-up: figures are drawn headless (no display on CI), and the book is built once
per test run for every test that needs it (tests/test_book.py and the browser tests)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the tests' shared helpers (book_pages)
JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")
EDITIONS = ROOT / "book" / "editions.py"
PAGE_INPUTS = ROOT / "book" / "_ext" / "page_inputs.py"


#: Where the tests build the book, kept between runs: ``make test-e2e`` right after ``make test``
#: (as CI runs them) reads the book ``make test`` built instead of rendering both editions again.
TESTS_BOOK = ROOT / "_build" / "tests-book"

#: What the book is made of beyond what its pages read (``book/_ext/page_inputs.py``: the
#: library, the grader, the samples, the notebooks ...): its pages, translations, configuration and
#: static files.
BOOK_SOURCES = ("book", "locale", "_static", "_config.yml", "_toc.yml")


def book_fingerprint() -> str:
    """A fingerprint of everything a build of the book reads: a book built from other inputs is
    never reused."""
    import hashlib
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("kvcourse_page_inputs", PAGE_INPUTS)
    page_inputs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(page_inputs)
    pages = json.dumps(page_inputs.page_fingerprints(ROOT), sort_keys=True)
    digest = hashlib.sha256(pages.encode())
    for top in BOOK_SOURCES:
        path = ROOT / top
        for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if file.is_file() and "__pycache__" not in file.parts and file.suffix != ".mo":
                digest.update(str(file.relative_to(ROOT)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="session")
def built_book() -> Path:
    """The book built from this checkout with warnings as errors, both editions (as ``make book``
    builds them: English in ``_build/html``, Chinese in its ``zh/`` folder); that folder.

    It is built under :data:`TESTS_BOOK` and reused by a later test run while nothing it is made
    of has changed (:func:`book_fingerprint`). ``KVCOURSE_BUILT_BOOK=_build/html`` reuses a book
    already built (by ``make book``) instead, for a quick rerun of the tests that only read it."""
    reuse = os.environ.get("KVCOURSE_BUILT_BOOK")
    if reuse:
        return Path(reuse).resolve()
    html, stamp = TESTS_BOOK / "_build" / "html", TESTS_BOOK / "fingerprint"
    fingerprint = book_fingerprint()
    if html.is_dir() and stamp.is_file() and stamp.read_text().strip() == fingerprint:
        return html
    if not JUPYTER_BOOK.exists():
        pytest.fail(f"jupyter-book is not installed next to {sys.executable}; run `make test`")
    shutil.rmtree(TESTS_BOOK, ignore_errors=True)
    TESTS_BOOK.mkdir(parents=True)
    command = [sys.executable, str(EDITIONS), "build", "--path-output", str(TESTS_BOOK)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    log = result.stdout[-6000:] + result.stderr[-6000:]
    assert result.returncode == 0, f"book build failed (warnings are errors):\n{log}"
    assert book_fingerprint() == fingerprint, "the book's sources changed while it was built"
    stamp.write_text(fingerprint + "\n")
    return html


#: Rough seconds that a group of tests sharing a fixture (or one slow test) takes on two busy
#: cores, measured on a fresh clone on 2026-12-07. pytest-xdist hands each worker the next group
#: in the order of the collection (``--no-loadscope-reorder``), and they are sorted heaviest first
#: (:func:`pytest_collection_modifyitems`): otherwise a long group that comes last keeps one
#: worker busy for minutes while the other has nothing left to do. Unlisted groups and tests
#: come last, in their own order, and fill the gaps.
SECONDS = {
    "book": 600,  # make test: both editions built; test-e2e: Chromium over every page, 360 s
    "graded-a2_block_tables": 600,
    "graded-a3_cow_fork": 370,
    "graded-a1_buddy_allocator": 350,
    "graded-a6_conductor": 350,
    "graded-a4_preemption": 320,
    "graded-a5_prefix_cache": 260,
    "lab": 250,
    "graded-a0_kv_sizing": 230,
    "graded-a7_radix_cache": 190,
    "test_postgres_gradebook_and_a_dask_cluster_grade_like_sqlite": 135,
    "test_parallel_grades_equal_serial_ones_in_one_consistent_sqlite_gradebook": 80,
}


#: Fixtures whose users are end-to-end tests (``make test-e2e``): every sample student of an
#: assignment graded by nbgrader, the book in Chromium, JupyterLab.
E2E_FIXTURES = ("graded", "book_url", "lab")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the marks into node ids
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``make test`` runs two workers), tests that share an expensive
    session fixture run on one worker, so it is built once: the book (``built_book``), one
    assignment's graded samples (``graded``, keyed by the assignment) and JupyterLab (``lab``).
    Everything else is spread over the workers. The groups and tests of :data:`SECONDS` come
    first, heaviest first.

    A test that uses an end-to-end fixture must be marked ``e2e``, or ``make test`` would
    quietly grade a whole class or start a browser."""
    unmarked, cost = [], {}
    for item in items:
        cost[item.nodeid] = SECONDS.get(getattr(item, "originalname", item.name), 0)
        names = getattr(item, "fixturenames", ())
        if any(name in names for name in E2E_FIXTURES) and not item.get_closest_marker("e2e"):
            unmarked.append(item.nodeid)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "graded" in names:
            group = f"graded-{params.get('assignment', 'a0_kv_sizing')}"
        elif "built_book" in names or "book_url" in names:
            group = "book"
        elif "lab" in names:
            group = "lab"
        else:
            continue
        item.add_marker(pytest.mark.xdist_group(group))
        cost[item.nodeid] = SECONDS.get(group, 0)
    items.sort(key=lambda item: -cost[item.nodeid])  # stable: each group stays together
    if unmarked:
        raise pytest.UsageError(
            f"mark these tests @pytest.mark.e2e (they use one of {E2E_FIXTURES}): "
            + ", ".join(unmarked[:5])
        )
