"""The built book in a real browser, at a laptop's and a phone's width: every page loads clean,
equations are typeset, nothing is wider than the screen, every figure fits the screen with its
caption under it and its text at least 9 px high, the phone menu opens the contents, and search
finds English and Chinese terms, lists the page about a term first and quotes prose. A
screenshot of every page at both widths is kept under ``_build/test-artifacts/book/``."""

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

WIDTHS = (1280, 390)
#: LaTeX that MathJax would have typeset: seen in a page's text, it was not.
RAW_TEX = re.compile(r"\\\(|\\\[|\$\$|\\frac|\\lceil|\\times|\\mathrm|\\text\{")
#: MyST that was not parsed (a translation can break a role or a link): seen in a page's text.
RAW_MYST = re.compile(r"\{(?:glue|term|ref|doc|numref)[^}]*\}`|\]\(http")


def pages(html_root: Path) -> list[str]:
    """Every page of both editions: English under book/, Chinese under zh/book/."""
    found = [*html_root.glob("book/*.html"), *html_root.glob("zh/book/*.html")]
    return sorted(str(p.relative_to(html_root)) for p in found)


@pytest.fixture(scope="module")
def book_pages(built_book):
    found = pages(built_book)
    assert len(found) >= 14, f"expected both editions under {built_book}, found {found}"
    return found


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_loads_clean_and_fits(browser, book_url, book_pages, width, watch, shoot):
    failures = []
    for name in book_pages:
        page = browser.new_page(viewport={"width": width, "height": 900})
        problems = watch(page)
        page.goto(f"{book_url}/{name}", wait_until="networkidle")
        page.wait_for_function("() => !window.MathJax || MathJax.startup?.promise", timeout=20000)
        page.evaluate("() => window.MathJax?.startup?.promise")
        state = page.evaluate(
            """() => ({
                width: document.documentElement.scrollWidth,
                text: document.querySelector('article')?.innerText ?? '',
                math: document.querySelectorAll('.math').length,
                typeset: document.querySelectorAll('mjx-container').length,
                broken: [...document.images].filter(i => !i.complete || i.naturalWidth === 0)
                    .map(i => i.getAttribute('src')),
                widgets: document.querySelectorAll(
                    'script[type="application/vnd.jupyter.widget-view+json"]').length,
                widgetViews: document.querySelectorAll('.jupyter-widgets, .widget-area').length,
            })"""
        )
        shoot(page, f"book/{name.removesuffix('.html').replace('/', '-')}-{width}")
        where = f"{name} at {width} px"
        if problems.messages:
            failures.append(f"{where}: console errors {problems.messages}")
        if state["width"] > width:
            failures.append(
                f"{where}: the page is {state['width']} px wide (wider than the screen)"
            )
        if raw := RAW_TEX.findall(state["text"]):
            failures.append(f"{where}: raw LaTeX left in the text: {sorted(set(raw))}")
        if raw := RAW_MYST.findall(state["text"]):
            failures.append(f"{where}: unparsed MyST in the text: {sorted(set(raw))}")
        if state["math"] and state["typeset"] == 0:
            failures.append(f"{where}: {state['math']} equations, none typeset by MathJax")
        if state["broken"]:
            failures.append(f"{where}: images that did not load: {state['broken']}")
        if state["widgets"] and not state["widgetViews"]:
            failures.append(f"{where}: saved widget state but no widget shown")
        page.close()
    assert not failures, "\n".join(failures)


#: The smallest text a figure may show, in CSS px: on a phone (kvcourse.viz.phone.MIN_TEXT_PX),
#: and on a desktop, where the column has room for more and a wide figure is shown narrower than
#: it is drawn.
MIN_FIGURE_TEXT_PX = 9.0
MIN_DESKTOP_FIGURE_TEXT_PX = 10.0
#: Every figure of a page: its image's box, the caption's, and the size of its smallest text. A
#: figure is a <picture> of kvcourse.viz.book_figure: the rendering the browser chose (the phone
#: <source> or the desktop <img>) states in data-min-text-px how high its smallest text is at
#: its natural width; shown at another width, that height scales with it. Text drawn into an
#: image cannot be measured in the page, so this is the measure.
FIGURES_JS = """() => [...document.querySelectorAll('article figure')].map(f => {
    const img = f.querySelector('img'), caption = f.querySelector('figcaption');
    const source = f.querySelector('picture source');
    const phone = !!source &&
        new URL(source.getAttribute('srcset'), document.baseURI).href === img.currentSrc;
    const chosen = phone ? source : img;
    const box = img.getBoundingClientRect(), under = caption?.getBoundingClientRect();
    return {
        id: f.id, picture: !!img.closest('picture.kv-figure'), phone,
        left: box.left, right: box.right, width: box.width, natural: img.naturalWidth,
        minText: parseFloat(chosen.getAttribute('data-min-text-px')),
        caption: under && {top: under.top, left: under.left, right: under.right,
                           height: under.height},
        bottom: box.bottom, scrolls: f.scrollWidth > f.clientWidth + 1,
        screen: document.documentElement.clientWidth,
    };
})"""


def figure_problems(figure: dict, width: int) -> list[str]:
    """What is wrong with one figure as the browser shows it at ``width`` px."""
    problems = []
    if not figure["picture"]:
        return ["is not a kvcourse.viz.book_figure picture (no phone rendering)"]
    if figure["phone"] != (width <= 720):
        problems.append(f"shows the {'phone' if figure['phone'] else 'desktop'} rendering")
    if figure["left"] < -0.5 or figure["right"] > figure["screen"] + 0.5:
        problems.append(
            f"image spans {figure['left']:.0f}-{figure['right']:.0f} px, outside the screen's "
            f"{figure['screen']} px"
        )
    if figure["scrolls"]:
        problems.append("scrolls sideways")
    caption = figure["caption"]
    if not caption or caption["height"] <= 0:
        problems.append("has no visible caption")
    elif not 0 <= caption["top"] - figure["bottom"] <= 24:
        problems.append(f"caption is {caption['top'] - figure['bottom']:.0f} px from the image")
    elif caption["left"] < -0.5 or caption["right"] > figure["screen"] + 0.5:
        problems.append("caption runs off the screen")
    if not figure["natural"] or not figure["minText"] > 0:
        problems.append("states no text size (data-min-text-px) or did not load")
    else:
        shown = figure["minText"] * figure["width"] / figure["natural"]
        floor = MIN_FIGURE_TEXT_PX if figure["phone"] else MIN_DESKTOP_FIGURE_TEXT_PX
        if shown < floor:
            problems.append(f"smallest text is {shown:.2f} px (under {floor:g})")
    return problems


@pytest.mark.parametrize("width", WIDTHS)
def test_every_figure_fits_with_its_caption_and_readable_text(browser, book_url, book_pages, width):
    failures, seen = [], 0
    for name in book_pages:
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(f"{book_url}/{name}", wait_until="networkidle")
        for figure in page.evaluate(FIGURES_JS):
            seen += 1
            failures += [
                f"{name} at {width} px, {figure['id'] or 'a figure'}: {problem}"
                for problem in figure_problems(figure, width)
            ]
        page.close()
    assert seen >= 30, f"expected the book's 30-odd figures, found {seen}"
    assert not failures, "\n".join(failures)


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.images, self.ids = [], [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        if tag == "img" and attrs.get("src"):
            self.images.append(attrs["src"])
        if tag == "source" and attrs.get("srcset"):  # a figure's phone rendering
            self.images.append(attrs["srcset"].split()[0])


def parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_no_broken_internal_link_or_image(built_book):
    parsed = {path: parse(path) for path in built_book.rglob("*.html")}
    broken = []
    for path, found in parsed.items():
        for target in found.links + found.images:
            parts = urlsplit(target)
            if parts.scheme or parts.netloc or target.startswith(("mailto:", "javascript:")):
                continue
            file = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if not file.exists():
                broken.append(f"{path.relative_to(built_book)}: {target} (no such file)")
            elif parts.fragment and file.suffix == ".html":
                ids = parsed[file].ids if file in parsed else parse(file).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{path.relative_to(built_book)}: {target} (no such anchor)")
    assert not broken, "broken internal links or images:\n" + "\n".join(sorted(broken))


@pytest.mark.parametrize("edition", ["", "zh/"])
def test_the_phone_menu_opens_the_table_of_contents(browser, book_url, book_pages, edition, shoot):
    own = [p for p in book_pages if p.startswith(f"{edition}book/")]
    page = browser.new_page(viewport={"width": 390, "height": 800})
    page.goto(f"{book_url}/{own[0]}", wait_until="networkidle")
    toggles = page.locator(".primary-toggle")
    visible = [toggles.nth(i) for i in range(toggles.count()) if toggles.nth(i).is_visible()]
    assert visible, "no visible menu button (☰) at 390 px"
    sidebar = page.locator(".bd-sidebar-primary")
    assert not sidebar.is_visible() or sidebar.bounding_box()["x"] < 0
    visible[0].click()
    page.wait_for_timeout(600)
    box = sidebar.bounding_box()
    assert sidebar.is_visible() and box and box["x"] >= 0 and box["width"] > 200, (
        f"the menu button did not open the contents (sidebar box {box})"
    )
    links = sidebar.locator("a.reference.internal").all_inner_texts()
    shoot(page, f"book/{edition.strip('/') or 'en'}-menu-390")
    assert len(links) >= len(own) - 1, f"the opened menu lists only {links}"
    page.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_language_switch_goes_both_ways(browser, book_url, width, shoot):
    """On every width the link at the top of a page opens the same page in the other edition,
    and the link there leads back."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(f"{book_url}/book/05_sharing.html", wait_until="networkidle")
    for language, path, heading in (
        ("zh-CN", "/zh/book/05_sharing.html", "共享"),
        ("en", "/book/05_sharing.html", "Sharing"),
    ):
        switch = page.locator(f"p.edition-switch a[hreflang='{language}']")
        assert switch.is_visible(), f"no visible link to the {language} edition at {width} px"
        switch.click()
        page.wait_for_load_state("networkidle")
        assert page.url.endswith(path), f"the switch to {language} opened {page.url}"
        assert page.evaluate("document.documentElement.lang") == language
        assert heading in page.locator("article h1").inner_text()
        shoot(page, f"book/switch-{language}-{width}")
    page.close()


def test_the_language_switch_keeps_the_section(browser, book_url):
    """A reader sent to a section (a link, a search hit) who switches edition lands on the same
    section of the other edition, not at the top of its page."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{book_url}/book/05_sharing.html#sec-5-2", wait_until="networkidle")
    page.locator("p.edition-switch a[hreflang='zh-CN']").click()
    page.wait_for_load_state("networkidle")
    assert page.url.endswith("/zh/book/05_sharing.html#sec-5-2"), page.url
    heading = page.locator("#sec-5-2 + h2").inner_text()
    assert "束搜索" in heading, f"the Chinese page's #sec-5-2 is {heading!r}"
    page.close()


@pytest.mark.parametrize(
    "edition, query, expected",
    [
        ("", "block table", "04_paged_attention"),
        ("", "块表", "04_paged_attention"),
        ("zh/", "块表", "04_paged_attention"),
        ("zh/", "写时复制", "02_virtual_memory"),
        ("zh/", "链式哈希", "08_prefix_caching"),
    ],
)
def test_search_finds_english_and_chinese_terms(browser, book_url, edition, query, expected):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{book_url}/{edition}search.html?q={query}", wait_until="networkidle")
    page.wait_for_selector("#search-results ul.search li, #search-results p", timeout=20000)
    hits = page.locator("#search-results ul.search li a").evaluate_all(
        "links => links.map(a => a.getAttribute('href'))"
    )
    page.close()
    assert any(expected in hit for hit in hits), f"searching {query!r} found {hits}"


#: What code looks like in a snippet: a statement, a call the pages make, a fold button's label.
CODE = re.compile(r"\bimport \w|\bglue\(|\bdef \w+\(|\bprint\(|\bdisplay\(|Show code cell|显示代码")


@pytest.mark.parametrize(
    "edition, query, expected",
    [
        ("", "Conductor", "09_mooncake"),
        ("", "copy-on-write", "02_virtual_memory"),
        ("", "block table", "04_paged_attention"),
        ("", "块表", "04_paged_attention"),
        ("", "MLA", "10_kv_cheaper"),
        ("", "goodput", "09_mooncake"),
        ("zh/", "块表", "04_paged_attention"),
        ("zh/", "全局调度器", "09_mooncake"),
    ],
)
def test_search_lists_the_page_about_a_term_first_and_quotes_prose(
    browser, book_url, edition, query, expected
):
    """The page that introduces a term (its glossary entry says which) comes before the glossary
    entry and before pages that only use the term, and no snippet quotes code or raw TeX."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{book_url}/{edition}search.html?q={query}", wait_until="networkidle")
    page.wait_for_function(
        r"""() => {
            const status = document.querySelector('#search-results p.search-summary');
            const items = document.querySelectorAll('#search-results ul.search li');
            const quoted = document.querySelectorAll('#search-results ul.search li p.context');
            return status && /\d/.test(status.innerText) && items.length === quoted.length;
        }""",
        timeout=20000,
    )
    hits = page.locator("#search-results ul.search li").evaluate_all(
        """items => items.map(li => ({
            href: li.querySelector('a').getAttribute('href'),
            snippet: li.querySelector('p.context').innerText,
        }))"""
    )
    page.close()
    assert hits, f"searching {query!r} found nothing"
    assert expected in hits[0]["href"], (
        f"searching {query!r} lists {[h['href'] for h in hits[:4]]} first, not {expected}"
    )
    assert "glossary" in " ".join(h["href"] for h in hits[1:4]), (
        f"searching {query!r}: the glossary entry is not among the next hits"
    )
    for hit in hits:
        for bad in (RAW_TEX, CODE):
            assert not bad.search(hit["snippet"]), (
                f"searching {query!r}: the snippet under {hit['href']} quotes code or TeX: "
                f"{hit['snippet']!r}"
            )
