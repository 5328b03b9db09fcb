"""The Chinese edition's catalogs and the glossary's names, read for the translation tests
(shared by the book's tests; not a test module).

A catalog is ``locale/zh_CN/LC_MESSAGES/<page>.po``: each entry is one paragraph, heading, list
item or table cell of an English page (msgid) and its Chinese (msgstr)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from babel.messages import pofile

ROOT = Path(__file__).resolve().parents[1]
LOCALE = ROOT / "locale" / "zh_CN" / "LC_MESSAGES"
CJK = re.compile(r"[\u3400-\u9fff]")

# What a translation must carry over from its English source.
GLUE = re.compile(r"\{glue(?::\w+)?\}`[^`]*`")
# A page glues ``key_zh`` beside ``key`` where the value itself has words (``1, 4 and 7``): the
# Chinese uses that one, and it counts as the same value.
ZH_VARIANT = re.compile(r"_zh(?=[:`])")
ROLE = re.compile(r"\{([\w:-]+)\}`([^`]*)`")
TARGET = re.compile(r"^(.*?)\s*<([^<>]+)>$", re.S)
LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)\)")
FOOTNOTE = re.compile(r"\[\^[^\]]+\]")
CODE = re.compile(r"(?<![}`])`([^`]+)`")
MATH = re.compile(r"\$\$?[^$]+\$\$?")


def catalog_path(page: str) -> Path:
    """Where the Chinese catalog of a page (``book/08_prefix_caching``) lives."""
    return LOCALE / f"{page}.po"


def read_catalog(page: str) -> list:
    """The entries of one page's catalog, in page order (the header left out)."""
    with catalog_path(page).open("rb") as handle:
        return [message for message in pofile.read_po(handle) if message.id]


def role_targets(text: str) -> Counter:
    """``(role, target)`` of every role but glue: what a reference points at, not what it shows.

    ``{term}`KV 块 <block>``` and ``{term}`block``` point at the same entry (terms match without
    case, as Sphinx's glossary does)."""
    found: Counter = Counter()
    for role, body in ROLE.findall(text):
        if role.startswith("glue"):
            continue
        match = TARGET.match(body)
        target = match.group(2) if match and role in ("ref", "doc", "term", "numref") else body
        found[(role, target.lower() if role == "term" else target)] += 1
    return found


def carried(text: str) -> dict[str, Counter]:
    """Everything in a message that its translation must keep exactly, by kind."""
    without_roles = ROLE.sub("", text)
    return {
        "glued value": Counter(ZH_VARIANT.sub("", g) for g in GLUE.findall(text)),
        "reference": role_targets(text),
        "link": Counter(LINK.findall(without_roles)),
        "footnote": Counter(FOOTNOTE.findall(without_roles)),
        "inline code": Counter(CODE.findall(without_roles)),
        "formula": Counter(MATH.findall(without_roles)),
    }


def term_renderings(text: str) -> list[tuple[str, str]]:
    """``(target, shown text)`` of every ``{term}`` role in a message."""
    pairs = []
    for role, body in ROLE.findall(text):
        if role != "term":
            continue
        match = TARGET.match(body)
        shown, target = (match.group(1), match.group(2)) if match else (body, body)
        pairs.append((target.lower(), shown))
    return pairs


@dataclass
class GlossaryEntry:
    """One entry of book/glossary.md: its English names and its Chinese names."""

    english: list[str]
    chinese: list[str]


def glossary_entries() -> list[GlossaryEntry]:
    """The entries of the glossary block of book/glossary.md, in source order."""
    source = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    block = source.split("```{glossary}", 1)[1].split("\n```", 1)[0]
    entries: list[GlossaryEntry] = []
    names: list[str] = []
    for line in block.splitlines():
        if not line.strip() or line.startswith(":"):
            continue
        if line.startswith(" "):
            if names:
                english = [name for name in names if not CJK.search(name)]
                entries.append(GlossaryEntry(english, [n for n in names if CJK.search(n)]))
                names = []
            continue
        names.append(line.strip())
    return entries


def chinese_names() -> dict[str, GlossaryEntry]:
    """Each English glossary name (lower case), mapped to its entry."""
    return {name.lower(): entry for entry in glossary_entries() for name in entry.english}
