"""The book builds with warnings as errors, and every page in the table of contents is built."""

import json
import re
from pathlib import Path

import pytest
from book_pages import toc_pages

ROOT = Path(__file__).resolve().parents[1]


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


def search_terms(built_book: Path) -> set[str]:
    """The words the built book's search index finds on some page (as stemmed), in prose and in
    titles. (An incremental build keeps words no page has any more, with no page: not counted.)"""
    text = (built_book / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(text[text.index("(") + 1 : text.rindex(")")])
    return {
        word
        for words in (index["terms"], index["titleterms"])
        for word, pages in words.items()
        if pages != []
    }


@pytest.mark.slow  # builds the whole book
def test_the_search_indexes_prose_not_code_or_tex(built_book):
    """book/_ext/search_prose.py keeps code cells, their outputs and formulas out of the index:
    a name only code uses and a TeX command only formulas use are not there, prose words are."""
    terms = search_terms(built_book)
    assert {"goodput", "conductor", "块表"} <= terms
    for code_or_tex in ("set_matplotlib_format", "rcparam", "lceil", "frac"):
        assert code_or_tex not in terms, f"the search index holds {code_or_tex!r}"


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


# Section references. The book's chapter N is the lecture's §N and its numbered sections are the
# lecture's N.M: a page links "§N.M" as {ref}`§N.M <sec-N-M>` to the "(sec-N-M)=" label above the
# heading "## N.M English · 中文", and links a chapter "§N" to its page at least once. These tests
# read the Markdown sources only, so they run without building the book.

#: What comes right before a section of a *paper*, which is not the book's: "paper §4.5", "the
#: paper's §5.2", "(vLLM paper, §4.1–4.2)", "The vLLM paper (its §8)", "Mooncake §7".
PAPER_BEFORE = re.compile(
    r"(?:paper|paper's|Mooncake|Mooncake's|arXiv v\d|v\d's|FAST ['’]25)[\s,(]*(?:its\s+)?$"
)
SECTION_CITED = re.compile(r"§(\d+)\.(\d+)")
CHAPTER_CITED = re.compile(r"(?<![\w`<.])§(\d+)(?![\d.]\d)")
LABEL_LINE = re.compile(r"^\(([\w-]+)\)=\s*$", re.M)
SECTION_HEADING = re.compile(r"^## (\d+)\.(\d+) (.+?) · ")
SECTION_REF = re.compile(r"\{ref\}`§(\d+)\.(\d+) <(sec-[\w-]+)>`")
ROLE = re.compile(r"\{(?:ref|numref|doc)\}`(?:[^`<]*<)?([^`<>]+)>?`")

#: The labels of the lecture's 9.1–9.7. Page 09 (book/09_mooncake.md) defines them above its
#: numbered sections; until it does, they count as defined so that other pages may link them.
PAGE_09_LABELS = {f"sec-9-{m}" for m in range(1, 8)}


def prose(source: str) -> str:
    """A page's Markdown without its code cells (a code cell cannot hold a link)."""
    return re.sub(r"```\{code-cell\}[^\n]*\n.*?```", "", source, flags=re.S)


def page_number(page: str) -> int | None:
    """The chapter a page is (book/06_scheduling_and_preemption → 6); None for unnumbered pages,
    including a companion page filed after a chapter (book/08b_reading_vllm_v1), which keeps the
    lecture's chapter numbers as they are and numbers no sections."""
    number = re.match(r"(\d\d)_", Path(page).name)
    return int(number.group(1)) if number else None


def paper_section(text: str, start: int) -> bool:
    """Whether the § at ``start`` of ``text`` is a paper's section, by the words just before it."""
    return bool(PAPER_BEFORE.search(text[max(0, start - 40) : start]))


def book_sections() -> dict[str, tuple[str, str]]:
    """Every "sec-N-M" label of the book: its page and the English title of its heading."""
    sections = {}
    for page in toc_pages():
        lines = (ROOT / f"{page}.md").read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            label = LABEL_LINE.match(line)
            if label and label.group(1).startswith("sec-"):
                below = lines[number + 1] if number + 1 < len(lines) else ""
                heading = SECTION_HEADING.match(below)
                assert heading, f"{page}: {label.group(1)} is not above a '## N.M ...' heading"
                name = f"sec-{heading.group(1)}-{heading.group(2)}"
                assert label.group(1) == name, f"{page}: {label.group(1)} labels section {name}"
                sections[name] = (page, heading.group(3))
    return sections


def page_targets() -> dict[str, int]:
    """Every label, figure name and page name of a numbered page, and the chapter it is on."""
    targets = {}
    for page in toc_pages():
        chapter = page_number(page)
        if chapter is None:
            continue
        source = (ROOT / f"{page}.md").read_text(encoding="utf-8")
        names = LABEL_LINE.findall(source) + re.findall(r"^:name: ([\w-]+)", source, re.M)
        targets.update({name: chapter for name in names + [Path(page).name]})
    return targets


def test_numbered_sections_follow_the_lecture():
    """Each chapter's sections are numbered 1, 2, ... in page order, as the lecture's are."""
    by_chapter: dict[int, list[int]] = {}
    for name in book_sections():
        chapter, section = map(int, name.split("-")[1:])
        by_chapter.setdefault(chapter, []).append(section)
    for chapter, sections in by_chapter.items():
        assert sections == list(range(1, len(sections) + 1)), f"§{chapter}: sections {sections}"


def test_pages_link_every_section_they_cite():
    """Every §N.M of a page is a link to a section that exists, unless it is a paper's."""
    defined = set(book_sections()) | PAGE_09_LABELS
    for page in toc_pages():
        text = prose((ROOT / f"{page}.md").read_text(encoding="utf-8"))
        for target in ROLE.findall(text):
            assert not target.startswith("sec-") or target in defined, (
                f"{page}: a link to {target}, which no page defines"
            )
        for ref in SECTION_REF.finditer(text):
            label = f"sec-{ref.group(1)}-{ref.group(2)}"
            assert ref.group(3) == label, f"{page}: {ref.group(0)} links another section's label"
            assert label in defined, f"{page}: {ref.group(0)} links a label no page defines"
        bare = SECTION_REF.sub("", text)
        for cited in SECTION_CITED.finditer(bare):
            assert paper_section(bare, cited.start()), (
                f"{page}: {cited.group(0)} is plain text: write "
                f"{{ref}}`{cited.group(0)} <sec-{cited.group(1)}-{cited.group(2)}>`, or name the "
                f"paper before it ('paper §N.M') if it is a paper's section; near "
                f"{bare[max(0, cited.start() - 60) : cited.end() + 20]!r}"
            )


@pytest.mark.parametrize("page", toc_pages())
def test_pages_link_the_chapters_they_cite(page):
    """A page that mentions §N links page N somewhere: its first mention is a link."""
    targets = page_targets()
    text = prose((ROOT / f"{page}.md").read_text(encoding="utf-8"))
    linked = {targets[t] for t in ROLE.findall(text) if t in targets}
    cited = {
        int(m.group(1))
        for m in CHAPTER_CITED.finditer(text)
        if not text[: m.start()].endswith(("{doc}`", "{ref}`"))
        and not paper_section(text, m.start())
    }
    unlinked = sorted(cited - linked - {page_number(page)})
    assert not unlinked, f"{page} mentions §{unlinked} but never links those pages"


def test_the_module_table_of_the_contributors_page_cites_sections_that_exist():
    """The contributors page shows each module's first docstring sentence with its § numbers
    linked to sections."""
    from kvcourse.layers import module_summaries

    defined = set(book_sections()) | PAGE_09_LABELS
    for row in module_summaries():
        for cited in SECTION_CITED.finditer(row.summary):
            if not paper_section(row.summary, cited.start()):
                label = f"sec-{cited.group(1)}-{cited.group(2)}"
                assert label in defined, f"{row.name}'s summary cites {cited.group(0)}: no section"


def markdown_of(notebook: Path) -> str:
    """A notebook's Markdown cells, with runs of white space made single spaces."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return " ".join(text.split())


def test_assignments_name_the_sections_they_cite():
    """Notebooks are read in JupyterLab, where a {ref} is not a link: a notebook that cites §N.M
    names it once as the book does ("§6.2 *Swap or recompute*") and names the page it is on."""
    sections = book_sections()
    titles = {
        page_number(page): re.search(r"^# (.+?) · ", (ROOT / f"{page}.md").read_text(), re.M)[1]
        for page in toc_pages()
        if page_number(page) is not None
    }
    for notebook in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        text = markdown_of(notebook)
        for cited in SECTION_CITED.finditer(text):
            if paper_section(text, cited.start()):
                continue
            label = f"sec-{cited.group(1)}-{cited.group(2)}"
            assert label in sections or label in PAGE_09_LABELS, (
                f"{notebook.name} cites {cited.group(0)}: the book has no such section"
            )
            if label not in sections:  # one of page 09's labels, not written yet: no title to check
                continue
            page, title = sections[label]
            named = f"{cited.group(0)} *{title}*"
            assert named in text, f"{notebook.name} cites {cited.group(0)}, never writes {named!r}"
            page_title = titles[page_number(page)]
            assert f"*{page_title}*" in text, (
                f"{notebook.name} cites {cited.group(0)} but never names its page *{page_title}*"
            )


def test_section_0_opens_with_a_short_map_and_leaves_the_module_list_to_contributors():
    """§0's first screen is a map of parts, chapters, library packages and assignments; the list
    of every module (a hundred rows) is on the contributors page, not on the reader's first page."""
    zero = (ROOT / "book" / "00_how_to_use.md").read_text(encoding="utf-8")
    before_goals = zero[: zero.index("(sec-0-1)=")]
    parts = [line for line in before_goals.splitlines() if line.startswith("* **")]
    assert 2 <= len(parts) <= 8, f"§0's opening map has {len(parts)} parts"
    assert "module_summaries" not in zero, (
        "§0 lists the modules again: that list is for contributors"
    )
    contributors = (ROOT / "book" / "contributors.md").read_text(encoding="utf-8")
    assert "module_summaries()" in contributors
    assert "book/contributors" in toc_pages()
