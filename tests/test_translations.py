"""The Chinese edition's catalogs: every page translated, nothing computed or linked lost on the
way, and every glossary term rendered one way. (The build itself fails on a paragraph a catalog
does not translate; tests/test_editions.py compares the two built editions.)"""

from collections import defaultdict

import pytest
from book_pages import toc_pages
from catalogs import (
    CJK,
    carried,
    catalog_path,
    chinese_names,
    glossary_entries,
    read_catalog,
    term_renderings,
)

PAGES = toc_pages()


def _where(page: str, index: int, message) -> str:
    path = catalog_path(page).relative_to(catalog_path(page).parents[4])
    return f"{path} entry {index}: {message.id[:90]!r}"


def test_every_page_has_a_catalog():
    missing = [page for page in PAGES if not catalog_path(page).exists()]
    assert not missing, f"no Chinese catalog for {missing}: run `make translations` and translate"


@pytest.mark.parametrize("page", PAGES)
def test_every_entry_is_translated_on_one_line(page):
    problems = []
    for index, message in enumerate(read_catalog(page)):
        if not message.string:
            problems.append(f"untranslated: {_where(page, index, message)}")
        elif message.fuzzy:
            problems.append(
                f"fuzzy (the English changed; check and clear the flag): "
                f"{_where(page, index, message)}"
            )
        elif "\n" in message.string:
            problems.append(
                f"a line break inside (it shows as a space): {_where(page, index, message)}"
            )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES)
def test_translations_keep_every_value_reference_link_and_formula(page):
    problems = []
    for index, message in enumerate(read_catalog(page)):
        if not message.string:
            continue
        english, chinese = carried(message.id), carried(message.string)
        for kind, expected in english.items():
            if chinese[kind] != expected:
                lost = sorted((expected - chinese[kind]).elements(), key=str)
                added = sorted((chinese[kind] - expected).elements(), key=str)
                problems.append(
                    f"{_where(page, index, message)}: {kind} differs; missing {lost}, extra {added}"
                )
    assert not problems, "\n".join(problems)


GLOSSARY_NAMES = {name for entry in glossary_entries() for name in entry.english + entry.chinese}


@pytest.mark.parametrize("page", PAGES)
def test_prose_is_chinese(page):
    """An entry left in English is untranslated, except names, citations and the glossary's own
    term lines (links point at those, so they must stay as they are)."""
    problems = []
    for index, message in enumerate(read_catalog(page)):
        words = len([w for w in message.id.split() if w.isalpha()])
        if message.id in GLOSSARY_NAMES and page.endswith("glossary"):
            if message.string != message.id:
                problems.append(
                    f"a glossary term name must stay as it is: {_where(page, index, message)}"
                )
            continue
        citation = "et al" in message.id or "](http" in message.id
        if message.string and words >= 6 and not CJK.search(message.string) and not citation:
            problems.append(f"left in English: {_where(page, index, message)}")
    assert not problems, "\n".join(problems)


def test_every_glossary_term_is_rendered_one_way():
    """A ``{term}`` link shows one of its entry's Chinese names, and the same one on every page."""
    entries = chinese_names()
    shown = defaultdict(set)
    problems = []
    for page in PAGES:
        for index, message in enumerate(read_catalog(page)):
            for target, text in term_renderings(message.string):
                entry = entries.get(target)
                if entry is None:
                    problems.append(f"{_where(page, index, message)}: no glossary entry {target!r}")
                    continue
                allowed = entry.chinese or entry.english
                if text not in allowed:
                    problems.append(
                        f"{_where(page, index, message)}: {target!r} shown as {text!r}; "
                        f"the glossary's names are {allowed}"
                    )
                shown[target].add(text)
    for target, texts in sorted(shown.items()):
        if len(texts) > 1:
            problems.append(f"{target!r} is rendered {len(texts)} ways: {sorted(texts)}; pick one")
    assert not problems, "\n".join(problems)
