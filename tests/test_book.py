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


def glossary_entries() -> list[list[str]]:
    """The glossary's entries, each as its names (English, Chinese, aliases), lower-cased."""
    text = (ROOT / "book" / "glossary.md").read_text()
    block = text[text.index("```{glossary}") :]
    block = block[: block.index("\n```", 10)]
    entries: list[list[str]] = []
    names: list[str] | None = None
    for line in block.splitlines()[1:]:
        if not line.strip():
            names = None
        elif not line.startswith((" ", ":")):
            if names is None:
                names = []
                entries.append(names)
            names.append(line.strip().lower())
    return entries


def term_links() -> dict[str, set[str]]:
    """Every {term} target the pages (not the glossary) link, and the pages that link it."""
    links: dict[str, set[str]] = {}
    for page in toc_pages():
        if page.endswith("glossary"):
            continue
        for match in re.finditer(r"\{term\}`([^`]+)`", (ROOT / f"{page}.md").read_text()):
            target = re.sub(r"(?s).*<(.+)>$", r"\1", match.group(1))
            target = re.sub(r"\s+", " ", target).strip().lower()
            links.setdefault(target, set()).add(Path(page).stem)
    return links


def test_the_glossary_defines_every_term_the_pages_link_and_each_is_linked():
    entries = glossary_entries()
    defined = {name for names in entries for name in names}
    links = term_links()
    undefined = {t: sorted(pages) for t, pages in links.items() if t not in defined}
    assert not undefined, f"terms linked but not in book/glossary.md: {undefined}"
    unlinked = [names[0] for names in entries if not set(names) & set(links)]
    assert not unlinked, f"glossary entries no page links with {{term}}: {unlinked}"


def test_no_page_is_announced_as_coming():
    for page in toc_pages():
        text = (ROOT / f"{page}.md").read_text()
        assert "(coming)" not in text and "| coming |" not in text, page
