"""The book builds with warnings as errors, and every page in the table of contents is built."""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def toc_pages() -> list[str]:
    """Every document named in _toc.yml (root first), as paths without suffix."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = [toc["root"]]
    for part in toc.get("parts", []):
        for chapter in part.get("chapters", []):
            pages.append(chapter["file"])
            pages.extend(section["file"] for section in chapter.get("sections", []))
    return pages


@pytest.mark.slow  # builds the whole book
def test_every_toc_page_is_written_and_built(built_book):
    for page in toc_pages():
        source = ROOT / f"{page}.md"
        assert source.exists(), f"{page} is in _toc.yml but {source} does not exist"
        html = built_book / f"{page}.html"
        assert html.exists(), f"{page} is in _toc.yml but was not built to {html}"
        text = html.read_text(encoding="utf-8")
        assert "<h1>" in text or "<h1 " in text, f"{html} has no title"


@pytest.mark.slow  # builds the whole book
def test_index_leads_to_the_root_page(built_book):
    index = (built_book / "index.html").read_text(encoding="utf-8")
    root = toc_pages()[0]
    assert f"{root}.html" in index


@pytest.mark.slow  # builds the whole book
def test_pages_show_no_errors(built_book):
    # A missing glue key is already a build warning, and warnings are errors.
    for page in toc_pages():
        text = (built_book / f"{page}.html").read_text(encoding="utf-8")
        assert "Traceback (most recent call last)" not in text, f"{page} shows a traceback"
        assert "output traceback" not in text, f"{page} shows an error output"


@pytest.mark.slow  # builds the whole book
def test_bilingual_titles(built_book):
    """Chapter titles follow the lecture's style: English · Chinese."""
    for page in toc_pages():
        first_heading = next(
            line
            for line in (ROOT / f"{page}.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("# ")
        )
        assert " · " in first_heading, f"{page}: title {first_heading!r} is not bilingual"


#: Characters of code the theme's code box shows at 1280 px (measured in Chromium: a 652 px box
#: of 8.4 px characters holds 77), less one for fonts that run a little wider.
CODE_BOX_CHARS = 76


def test_code_cells_fit_the_page():
    """Code lines longer than the code box scroll sideways at 1280 px: keep them inside it."""
    for page in toc_pages():
        source = (ROOT / f"{page}.md").read_text(encoding="utf-8")
        for cell in re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", source, re.S):
            for line in cell.splitlines():
                assert len(line) <= CODE_BOX_CHARS, (
                    f"{page}: code line of {len(line)} characters (the code box shows "
                    f"{CODE_BOX_CHARS}): {line!r}"
                )
