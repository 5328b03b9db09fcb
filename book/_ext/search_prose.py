"""A Sphinx extension that makes the book's search find pages by their prose.

Sphinx indexes every word of a page. The index therefore held the code of every cell (folded or
not), what the cells print and the TeX of every formula: a search for a term found the pages
whose code used it as readily as the page about it, and the snippet under a result quoted code
and raw TeX. Three changes:

* The index gets a copy of each page without its code cells (source and outputs), code blocks
  and formulas. Inline code in a sentence (`kv_lora_rank`) stays, and so do figure captions and
  the numbers glued into the prose. The page itself is written unchanged.
* Each glossary term is also indexed on the page its glossary entry says introduces it
  ("*Introduced in* §9"), at the section that first links it, as the glossary indexes it on the
  entry; a page that marks the term with an ``{index}`` directive of its own keeps that one. A
  search for the term then puts that page first and the glossary entry right after it, since
  ``static/search_scorer.js``, the book's ``html_search_scorer``, ranks a glossary hit just below
  a page hit of the same score.
* The search page loads ``static/search_prose.js``, which drops the same parts of a result's page
  before Sphinx cuts the snippet under the result from its text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.util import docname_join

STATIC = Path(__file__).resolve().parent / "static"
SNIPPETS = "search_prose.js"
SCORER = STATIC / "search_scorer.js"


def _is_code_or_math(node: nodes.Node) -> bool:
    """Whether ``node`` is a part of a page the search should not index."""
    if isinstance(node, (nodes.literal_block, nodes.math, nodes.math_block)):
        return True
    return isinstance(node, nodes.container) and node.get("nb_element") == "cell_code"


def prose_only(doctree: nodes.document) -> nodes.document:
    """A copy of ``doctree`` without its code cells, code blocks and formulas."""
    copy = doctree.deepcopy()
    for node in list(copy.findall(_is_code_or_math)):
        if node.parent is not None:
            node.parent.remove(node)
    return copy


#: How the glossary says "introduced in", in each edition (the Chinese one's catalog says 详见).
INTRODUCED_IN = ("introduced in", "详见")


def introducing_page(entry: nodes.Element, glossary: str) -> str | None:
    """The page a glossary entry names after "introduced in" (its first link there), if any."""
    after_introduced = False
    for node in entry.findall(lambda n: isinstance(n, (nodes.Text, addnodes.pending_xref))):
        if isinstance(node, nodes.Text):
            text = node.astext().lower()
            after_introduced = after_introduced or any(w in text for w in INTRODUCED_IN)
        elif after_introduced and node.get("reftype") == "doc":
            return docname_join(glossary, node["reftarget"])
    return None


@dataclass(frozen=True)
class Term:
    """A glossary entry as the search sees it: its names and the ids of its term nodes."""

    names: tuple[str, ...]
    ids: tuple[str, ...]


def glossary_introductions(glossary: str, doctree: nodes.document) -> dict[str, list[Term]]:
    """``{page: the glossary entries it introduces}`` from a glossary's doctree as read (before
    its links are resolved). An entry's names are those its own index entries carry."""
    found: dict[str, list[Term]] = {}
    for entry in doctree.findall(nodes.definition_list_item):
        page = introducing_page(entry, glossary)
        names = tuple(e[1] for index in entry.findall(addnodes.index) for e in index["entries"])
        ids = tuple(i for term in entry.findall(nodes.term) for i in term["ids"])
        if page and names:
            found.setdefault(page, []).append(Term(names, ids))
    return found


def introductions(env) -> dict[str, list[Term]]:
    """Every glossary's introductions in this project (a glossary is a page that defines terms)."""
    objects = env.get_domain("std").objects
    glossaries = sorted({docname for (kind, _), (docname, _) in objects.items() if kind == "term"})
    found: dict[str, list[Term]] = {}
    for glossary in glossaries:
        for page, terms in glossary_introductions(glossary, env.get_doctree(glossary)).items():
            found.setdefault(page, []).extend(terms)
    return found


def first_link_section(doctree: nodes.document, term: Term) -> str:
    """The id of the section whose text first links ``term``; "" (the page's top) if none does."""
    for reference in doctree.findall(nodes.reference):
        if reference.get("refuri", "").rpartition("#")[2] in term.ids:
            parent = reference.parent
            while parent is not None and not (isinstance(parent, nodes.section) and parent["ids"]):
                parent = parent.parent
            return parent["ids"][0] if parent is not None else ""
    return ""


def with_terms(doctree: nodes.document, terms: list[Term]) -> nodes.document:
    """``doctree`` with an index entry for each name of ``terms`` that the page does not index
    already, pointing at the section that first links the term."""
    indexed = {
        name.lower()
        for index in doctree.findall(addnodes.index)
        for entry in index["entries"]
        for name in entry[1].split(";")
    }
    entries = [
        ("single", name, first_link_section(doctree, term), "main", None)
        for term in terms
        for name in term.names
        if name.lower() not in indexed
    ]
    if entries:
        doctree += addnodes.index(entries=entries)
    return doctree


def index_prose_only(app) -> None:
    """Feed the search index each page's prose, and the terms it introduces, instead of the page."""
    builder = app.builder
    index_page = getattr(builder, "index_page", None)
    if index_page is None:  # a builder without a search index (LaTeX, linkcheck)
        return
    introduced: dict[str, list[str]] = {}

    def index_prose(pagename, doctree, title):
        if not introduced:
            introduced.update(introductions(app.env) or {"": []})
        prose = prose_only(doctree)
        if pagename in introduced:
            prose = with_terms(prose, introduced[pagename])
        index_page(pagename, prose, title)

    builder.index_page = index_prose


def configure(app, config) -> None:
    """Serve ``static/`` with the book's static files and rank results with its scorer."""
    config.html_static_path.append(str(STATIC))
    if not config.html_search_scorer:
        config.html_search_scorer = str(SCORER)


def add_script_to_search_page(app, pagename, templatename, context, doctree) -> None:
    """Load ``search_prose.js`` on the search page only."""
    if pagename == "search":
        app.add_js_file(SNIPPETS)


def setup(app):
    app.connect("config-inited", configure)
    app.connect("builder-inited", index_prose_only)
    app.connect("html-page-context", add_script_to_search_page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
