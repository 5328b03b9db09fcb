"""book/_ext/search_prose.py feeds the search index a page's prose: no code cells, code blocks or
formulas, while the page itself is written unchanged. (The browser tests check the built search.)"""

import sys
from pathlib import Path

from docutils import nodes
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))

from search_prose import prose_only  # noqa: E402


def page() -> nodes.document:
    """A small page: a title, a sentence with inline code and a formula, a code cell, a code block
    and a display formula."""
    document = new_document("page", get_default_settings(Parser))
    section = nodes.section(ids=["a-page"])
    section += nodes.title(text="Block tables")
    sentence = nodes.paragraph()
    sentence += nodes.Text("A block table maps ")
    sentence += nodes.literal(text="kv_lora_rank")
    sentence += nodes.math(text=r"\lceil n / B \rceil")
    section += sentence
    cell = nodes.container(nb_element="cell_code", classes=["cell"])
    cell += nodes.container(
        "",
        nodes.literal_block(text="table = BlockTable()"),
        nb_element="cell_code_source",
        classes=["cell_input"],
    )
    cell += nodes.container(
        "",
        nodes.literal_block(text="printed_output"),
        nb_element="cell_code_output",
        classes=["cell_output"],
    )
    section += cell
    section += nodes.literal_block(text="make book")
    section += nodes.math_block(text=r"\frac{a}{b}")
    document += section
    return document


def test_the_index_gets_the_prose_and_the_page_stays_whole():
    original = page()
    before = original.astext()
    text = prose_only(original).astext()
    assert "Block tables" in text and "A block table maps" in text and "kv_lora_rank" in text
    for hidden in ("BlockTable", "printed_output", "make book", r"\frac", r"\lceil"):
        assert hidden not in text, f"{hidden!r} would be indexed"
    assert original.astext() == before, "the written page lost something"


def test_a_partial_rebuild_keeps_the_index_entries_of_the_other_pages(tmp_path):
    """Sphinx 7.4 drops them when it reloads the index (sphinx-doc/sphinx#12599);
    book/_ext/keep_index_entries.py puts back those of the pages it will not rewrite."""
    from types import SimpleNamespace

    from keep_index_entries import restore_index_entries
    from sphinx.search import js_index

    frozen = {
        "docnames": ["book/04_paged_attention", "book/glossary"],
        "indexentries": {
            "block table": [[0, "index-0", True], [1, "term-block-table", True]],
            "块表": [[1, "term-10", True]],
        },
    }
    (tmp_path / "searchindex.js").write_text(js_index.dumps(frozen), encoding="utf-8")
    builder = SimpleNamespace(
        indexer=SimpleNamespace(_index_entries={}),
        outdir=str(tmp_path),
        searchindex_filename="searchindex.js",
        indexer_format=js_index,
        env=SimpleNamespace(all_docs={"book/04_paged_attention": 0, "book/glossary": 0}),
    )
    restore_index_entries(builder, {"book/glossary"})  # the glossary is rewritten
    assert builder.indexer._index_entries == {
        "book/04_paged_attention": [("block table", "index-0", "main")]
    }
