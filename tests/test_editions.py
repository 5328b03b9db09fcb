"""The two built editions side by side: every page exists in both and links to its twin, the
Chinese page shows the same glued numbers, figures, links and sections as the English one, no
MyST markup leaks into its text, no glued value puts English words into a Chinese sentence, and
its interface (sidebar, search box, buttons) is Chinese. (The book tests build both; the browser
tests click the switch and search the Chinese edition.)"""

import html
import json
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
from book_pages import toc_pages
from catalogs import CJK, GLUE, read_catalog

pytestmark = pytest.mark.slow

PAGES = toc_pages()
#: MyST that was not parsed: a role, a link, bold markers, a directive fence.
RAW_MARKUP = re.compile(r"\{(?:glue|term|ref|doc|numref)[^}]*\}`|\]\(|\*\*|```")
#: English words that a glued value must not bring into a Chinese sentence.
ENGLISH_PROSE = re.compile(
    r"\b(?:and|or|to|at|fewer|more|exactly|within|offset|blocks?|yes|no|not|sandboxed)\b"
    r"|\d(?:st|nd|rd|th)\b"
)


VOID = {"img", "source", "br", "hr", "meta", "link", "input", "wbr", "col", "area"}


class _Article(HTMLParser):
    """The parts of a page's article that both editions must share, and its prose (the text
    outside code and outside what code cells printed)."""

    def __init__(self):
        super().__init__()
        self.depth = 0  # inside <article>
        self.pasted: list[str] = []
        self.images: list[str] = []
        self.links: list[str] = []
        self.ids: list[str] = []
        self.text: list[str] = []
        self._pasting = 0
        self._open: list[str] = []  # the tags open inside the article
        self._skip_from: int | None = None  # where code, or what a cell printed, began

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "article":
            self.depth += 1
        if not self.depth:
            return
        if tag not in VOID:
            self._open.append(tag)
            computed = "cell_output" in (attrs.get("class") or "")
            if self._skip_from is None and (tag in ("script", "style", "pre", "code") or computed):
                self._skip_from = len(self._open)
        if tag == "span" and "pasted-text" in (attrs.get("class") or ""):
            self._pasting += 1
            self.pasted.append("")
        if tag in ("img", "source"):
            self.images.append(attrs.get("src") or attrs.get("srcset") or "")
        if tag == "a" and attrs.get("href") and not attrs.get("hreflang"):  # not the switch
            self.links.append(attrs["href"])
        if tag == "section" and attrs.get("id"):
            self.ids.append(attrs["id"])

    def handle_endtag(self, tag):
        if tag == "article":
            self.depth -= 1
        if self.depth and tag not in VOID and self._open:
            self._open.pop()
            if self._skip_from is not None and len(self._open) < self._skip_from:
                self._skip_from = None
        if tag == "span" and self._pasting:
            self._pasting -= 1

    def handle_data(self, data):
        if not self.depth:
            return
        if self._pasting:
            self.pasted[-1] += data
        if self._skip_from is None:
            self.text.append(data)


def article(path: Path) -> _Article:
    parser = _Article()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def _numbers_only(values: list[str]) -> Counter:
    """Glued values with no words in them (numbers, units, symbols): the same in both editions."""
    return Counter(v for v in values if not re.search(r"[A-Za-z\u3400-\u9fff]", v))


@pytest.mark.parametrize("page", PAGES)
def test_each_page_links_to_its_twin_both_ways(built_book, page):
    english, chinese = built_book / f"{page}.html", built_book / "zh" / f"{page}.html"
    assert english.exists() and chinese.exists(), f"{page}: missing from one edition"
    for source, target, lang in ((english, chinese, "zh-CN"), (chinese, english, "en")):
        text = source.read_text(encoding="utf-8")
        switch = re.search(r'<p class="edition-switch"><a href="([^"]+)" hreflang="([^"]+)"', text)
        assert switch, f"{source.relative_to(built_book)}: no link to the other edition"
        assert switch.group(2) == lang
        assert (source.parent / switch.group(1)).resolve() == target.resolve(), (
            f"{source.relative_to(built_book)} links to {switch.group(1)}, not to its twin"
        )
    assert '<html lang="zh-CN"' in chinese.read_text(encoding="utf-8")


@pytest.mark.parametrize("page", PAGES)
def test_the_chinese_page_shows_the_same_values_figures_links_and_sections(built_book, page):
    english = article(built_book / f"{page}.html")
    chinese = article(built_book / "zh" / f"{page}.html")
    where = f"zh/{page}.html"
    assert len(chinese.pasted) == len(english.pasted), (
        f"{where}: {len(chinese.pasted)} glued values, the English page {len(english.pasted)}"
    )
    lost = _numbers_only(english.pasted) - _numbers_only(chinese.pasted)
    assert not lost, f"{where}: glued numbers missing: {sorted(lost.elements())}"
    assert Counter(chinese.images) == Counter(english.images), f"{where}: figures differ"
    assert Counter(chinese.links) == Counter(english.links), (
        f"{where}: links differ: missing {sorted(Counter(english.links) - Counter(chinese.links))}"
        f", extra {sorted(Counter(chinese.links) - Counter(english.links))}"
    )
    assert chinese.ids == english.ids, f"{where}: sections (anchors) differ"


@pytest.mark.parametrize("page", PAGES)
def test_no_markup_leaks_and_the_text_is_chinese(built_book, page):
    source = (built_book / "zh" / f"{page}.html").read_text(encoding="utf-8")
    folds = re.findall(r'<p class="(?:collapsed|expanded) admonition-title">([^<]*)</p>', source)
    english = sorted({label for label in folds if not CJK.search(label)})
    assert not english, f"zh/{page}.html: folded cells labelled in English: {english}"
    chinese = article(built_book / "zh" / f"{page}.html")
    text = html.unescape(" ".join(chinese.text))
    leaked = RAW_MARKUP.findall(text)
    assert not leaked, f"zh/{page}.html shows unparsed MyST: {sorted(set(leaked))}"
    share = len(CJK.findall(text)) / max(1, len(re.findall(r"[A-Za-z\u3400-\u9fff]", text)))
    assert share > 0.3, f"zh/{page}.html: only {share:.0%} of its letters are Chinese"


def _glued_values(built_book: Path, page: str) -> dict[str, str]:
    """The values a page glued (from its executed notebook's glue data), by key."""
    found = built_book.parent / "jupyter_execute" / f"{page}.glue.json"
    if not found.exists():
        return {}
    values = {}
    for key, item in json.loads(found.read_text(encoding="utf-8")).items():
        data = item["data"]
        values[key] = data.get("text/markdown") or data.get("text/plain") or ""
    return values


@pytest.mark.parametrize("page", PAGES)
def test_no_glued_value_puts_english_words_into_chinese(built_book, page):
    """A value with words in it (``1, 4 and 7``) has a Chinese twin (``key_zh``) that the
    Chinese catalog uses; names, code and a model's quoted output are not prose."""
    values = _glued_values(built_book, page)
    problems = []
    for message in read_catalog(page):
        for role in GLUE.findall(message.string):
            key = role.split("`")[1].split(":")[0]
            value = re.sub(r"`[^`]*`|“[^”]*”", "", values.get(key, ""))
            if ENGLISH_PROSE.search(value):
                problems.append(f"{key} = {values[key]!r} (glue a Chinese {key}_zh and use it)")
    assert not problems, f"{page}: " + "\n".join(problems)


NAMES = re.compile(r"PagedAttention|RadixAttention|Mooncake|vLLM")


def test_the_chinese_interface_is_chinese(built_book):
    page = (built_book / "zh" / "book" / "04_paged_attention.html").read_text(encoding="utf-8")
    captions = re.findall(
        r'class="caption" role="heading"><span class="caption-text">([^<]*)', page
    )
    # Names stay names in the Chinese edition, as in the lecture (tests/test_lecture_terms.py).
    words = [NAMES.sub("", caption).strip() for caption in captions]
    assert captions and all(
        (CJK.search(w) or not w) and not re.search("[A-Za-z]{3}", w) for w in words
    ), f"sidebar part captions not in Chinese: {captions}"
    english_labels = {
        label
        for label in re.findall(r'(?:aria-label|title|placeholder)="([^"]*)"', page)
        if re.search("[A-Za-z]{3}", label) and not CJK.search(label)
    }
    assert not english_labels, f"interface words left in English: {sorted(english_labels)}"


FIGURE_ALT = re.compile(r'<picture class="kv-figure">.*?<img [^>]*?alt="([^"]*)"', re.S)


@pytest.mark.parametrize("page", PAGES)
def test_every_figure_says_what_it_shows_in_its_editions_language(built_book, page):
    """A figure's alt text (its caption's first sentence, book/_ext/figure_files.py) is there for
    screen readers and search engines, in the page's own language."""
    for edition in ("", "zh/"):
        where = f"{edition}{page}.html"
        for alt in FIGURE_ALT.findall((built_book / where).read_text(encoding="utf-8")):
            assert alt.strip(), f"{where}: a figure with empty alt text"
            if edition:
                assert CJK.search(alt), f"{where}: alt text in English: {alt!r}"
