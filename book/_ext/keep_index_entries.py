"""A Sphinx extension that keeps the search's index entries across incremental builds.

Sphinx 7.4 forgets them (sphinx-doc/sphinx#12599): a build that rewrites only some pages loads the
previous ``searchindex.js`` without its ``indexentries``, so every glossary term, every
``{index}`` directive and every term ``search_prose`` indexes on its introducing page vanishes
from the search until the next full build, and a search for "Conductor" no longer lists §9 first.
After Sphinx loads the old index, this puts back the entries of the pages it will not rewrite.
"""

from __future__ import annotations

from pathlib import Path


def restore_index_entries(builder, docnames) -> None:
    """Copy the previous index's entries for every page not rewritten into the builder's indexer."""
    entries = getattr(builder.indexer, "_index_entries", None)
    old_index = Path(builder.outdir, builder.searchindex_filename)
    if entries is None or not old_index.exists():
        return
    try:
        with old_index.open(encoding="utf-8") as stream:
            frozen = builder.indexer_format.load(stream)
        names = frozen["docnames"]
        found: dict[str, set[tuple[str, str, str]]] = {}
        for entry, places in frozen.get("indexentries", {}).items():
            for file, target, main in places:
                found.setdefault(names[file], set()).add((entry, target, "main" if main else ""))
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return  # an old or foreign index: Sphinx has warned already if it matters
    for docname in set(builder.env.all_docs) - set(docnames):
        entries[docname] = sorted(found.get(docname, ()))


def wrap_load_indexer(app) -> None:
    """Make the HTML builder restore index entries whenever it loads the previous index."""
    builder = app.builder
    load_indexer = getattr(builder, "load_indexer", None)
    if load_indexer is None:
        return

    def load_indexer_with_entries(docnames):
        load_indexer(docnames)
        restore_index_entries(builder, docnames)

    builder.load_indexer = load_indexer_with_entries


def setup(app):
    app.connect("builder-inited", wrap_load_indexer)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
