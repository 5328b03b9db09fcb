"""The book builds with warnings as errors, and every page in the table of contents is built."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")


def toc_pages() -> list[str]:
    """Every document named in _toc.yml (root first), as paths without suffix."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = [toc["root"]]
    for part in toc.get("parts", []):
        for chapter in part.get("chapters", []):
            pages.append(chapter["file"])
            pages.extend(section["file"] for section in chapter.get("sections", []))
    return pages


@pytest.fixture(scope="module")
def built_html(tmp_path_factory) -> Path:
    if not JUPYTER_BOOK.exists():
        pytest.fail(f"jupyter-book is not installed next to {sys.executable}; run `make test`")
    out = tmp_path_factory.mktemp("book")
    result = subprocess.run(
        [
            str(JUPYTER_BOOK),
            "build",
            str(ROOT),
            "--path-output",
            str(out),
            "-W",
            "-n",
            "--keep-going",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    log = result.stdout[-6000:] + result.stderr[-6000:]
    assert result.returncode == 0, f"book build failed (warnings are errors):\n{log}"
    html = out / "_build" / "html"
    yield html
    shutil.rmtree(out, ignore_errors=True)


@pytest.mark.slow  # builds the whole book
def test_every_toc_page_is_written_and_built(built_html):
    for page in toc_pages():
        source = ROOT / f"{page}.md"
        assert source.exists(), f"{page} is in _toc.yml but {source} does not exist"
        html = built_html / f"{page}.html"
        assert html.exists(), f"{page} is in _toc.yml but was not built to {html}"
        text = html.read_text(encoding="utf-8")
        assert "<h1>" in text or "<h1 " in text, f"{html} has no title"


@pytest.mark.slow  # builds the whole book
def test_index_leads_to_the_root_page(built_html):
    index = (built_html / "index.html").read_text(encoding="utf-8")
    root = toc_pages()[0]
    assert f"{root}.html" in index


@pytest.mark.slow  # builds the whole book
def test_pages_show_no_errors(built_html):
    # A missing glue key is already a build warning, and warnings are errors.
    for page in toc_pages():
        text = (built_html / f"{page}.html").read_text(encoding="utf-8")
        assert "Traceback (most recent call last)" not in text, f"{page} shows a traceback"
        assert "output traceback" not in text, f"{page} shows an error output"


@pytest.mark.slow  # builds the whole book
def test_bilingual_titles(built_html):
    """Chapter titles follow the lecture's style: English · Chinese."""
    for page in toc_pages():
        first_heading = next(
            line
            for line in (ROOT / f"{page}.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("# ")
        )
        assert " · " in first_heading, f"{page}: title {first_heading!r} is not bilingual"


def test_code_cells_fit_the_page():
    """The theme's code box shows about 80 characters; longer lines scroll sideways."""
    for page in toc_pages():
        source = (ROOT / f"{page}.md").read_text(encoding="utf-8")
        for cell in re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", source, re.S):
            for line in cell.splitlines():
                assert len(line) <= 80, f"{page}: code line of {len(line)} characters: {line!r}"
