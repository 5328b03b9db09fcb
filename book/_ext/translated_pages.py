"""The Chinese edition: Sphinx's gettext translation made to work on the book's MyST-NB pages.

The English pages are the source; the Chinese text lives in ``locale/zh_CN/LC_MESSAGES/<page>.po``
(one catalog per page, managed with sphinx-intl; ``book/editions.py`` builds both editions). This
extension does four things, none of which Sphinx or MyST-NB does on its own:

1. **Translated paragraphs parse as MyST.** Sphinx parses each translated message with the page's
   own parser; for a MyST-NB page that parser expects a whole notebook (MyST-NB issue #587). A
   translated message is parsed as plain MyST instead, with the page's executed outputs at hand,
   so a ``{glue:text}`` role in a Chinese sentence shows the same computed number as in English.
2. **Computed output is not prose.** Text that a code cell printed (tables, Markdown) comes from
   the execution, identical in both editions; it never enters a catalog, so a changed number can
   never leave a stale translation behind.
3. **An untranslated paragraph is a build warning** (an error under ``-W``) naming the page and the
   line, as is a catalog entry that no longer matches its English source.
4. **Every page links to its counterpart** in the other edition, at the top of the article, and
   tells search engines about it (``<link rel="alternate" hreflang>``); the link lands on the
   section the reader is in.
5. **The interface is Chinese** in the Chinese edition: the part captions of the sidebar, and
   the few words the themes write without a catalog (the rest are in ``sphinx.po``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.transforms import Transform
from myst_nb.sphinx_ import Parser as NotebookParser
from myst_parser.parsers.sphinx_ import MystParser
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.locale import get_translation
from sphinx.locale import init as init_locale
from sphinx.util import logging
from sphinx.util.i18n import docname_to_domain
from sphinx.util.nodes import extract_messages

LOGGER = logging.getLogger(__name__)
SOURCE_LANGUAGE = "en"
# Where each edition lives relative to the other (the Chinese one in a ``zh/`` folder of the site).
COUNTERPART = {
    "en": ("zh/", "zh-CN", "中文版"),
    "zh_CN": ("../", "en", "English edition"),
}
# The executed outputs of the page being read, by docname, kept from the end of MyST-NB's parse
# until the translation step has run (MyST-NB drops them at the end of its parse).
_PAGE_RENDERERS: dict[str, Any] = {}
_KEY = "nb_renderer"
CJK = re.compile(r"[\u3400-\u9fff]")
LEADING_BLOCK_MARKER = re.compile(r"\A(\d+|)([.)#+*-])(?=\s)")


class _KeepRenderer(dict):
    """A page's attributes while MyST-NB parses it: remembers the renderer MyST-NB removes."""

    kept: Any = None

    def pop(self, key, *default):
        value = super().pop(key, *default)
        if key == _KEY:
            self.kept = value
        return value


class TranslatableNotebookParser(NotebookParser):
    """MyST-NB's parser, plus plain MyST with the page's outputs for translated messages."""

    def parse(self, inputstring: str, document: nodes.document) -> None:
        env = document.settings.env
        if str(document.get("source", "")).endswith(":<translated>"):
            document[_KEY] = _PAGE_RENDERERS.get(env.docname)
            # A message is one paragraph's inline text: a heading "1. Release" must not come
            # back as a numbered list, nor "# x" as a heading.
            inputstring = LEADING_BLOCK_MARKER.sub(r"\1\\\2", inputstring)
            try:
                MystParser.parse(self, inputstring, document)
            finally:
                document.attributes.pop(_KEY, None)
            return
        keeper = _KeepRenderer(document.attributes)
        document.attributes = keeper
        try:
            super().parse(inputstring, document)
        finally:
            document.attributes = dict(keeper)
        if keeper.kept is not None and env.config.language != SOURCE_LANGUAGE:
            _PAGE_RENDERERS[env.docname] = keeper.kept


class ComputedTextIsNotProse(Transform):
    """Marks text inside a code cell's output as untranslatable (before Sphinx translates)."""

    default_priority = 15  # Sphinx's Locale transform runs at 20

    def apply(self, **kwargs: Any) -> None:
        for container in self.document.findall(nodes.container):
            if container.get("nb_element") in ("cell_code_output", "cell_code_source"):
                for node in container.findall(nodes.TextElement):
                    node["translatable"] = False


class UntranslatedIsAWarning(Transform):
    """In a translated edition, warns about every paragraph its catalog does not translate."""

    default_priority = 25

    def apply(self, **kwargs: Any) -> None:
        env = self.document.settings.env
        config = env.config
        _PAGE_RENDERERS.pop(env.docname, None)
        if config.language == SOURCE_LANGUAGE:
            return
        domain = docname_to_domain(env.docname, config.gettext_compact)
        where = f"locale/{config.language}/LC_MESSAGES/{domain}.po"
        entries = _catalog(env)
        if not entries:
            missing = "no translation of this page: %s is missing or empty"
            LOGGER.warning(missing, where, location=env.docname)
            return
        translations = {value for key, value in entries.items() if key}
        for node, message in extract_messages(self.document):
            if node.get("translated") or message in translations:
                continue
            if any(_is_front_matter(up, self.document) for up in _ancestors(node)):
                continue  # the page's front matter (metadata, not shown)
            if entries.get(message) == message:  # deliberately the same in both (a name, a formula)
                continue
            _untranslated(
                f"untranslated (new, changed or fuzzy in {where}; run `make translations` and "
                f"translate it): {message[:120]!r}",
                node,
            )


class TranslateCellPrompts(Transform):
    """Translates the labels a page gives its folded cells in their metadata (``code_prompt_show``
    such as "Worked answer, in code (try it first)"), from ``sphinx.po`` of the locale folder."""

    default_priority = 26

    def apply(self, **kwargs: Any) -> None:
        if self.document.settings.env.config.language == SOURCE_LANGUAGE:
            return
        translate = get_translation("sphinx")
        for node in self.document.findall(nodes.container):
            for key in ("prompt_show", "prompt_hide"):
                label = node.get(key)
                if not label or CJK.search(label):
                    continue
                translated = str(translate(label))
                if translated == label:
                    _untranslated(
                        "untranslated label of a folded cell (add it to "
                        f"locale/<language>/LC_MESSAGES/sphinx.po): {label!r}",
                        node,
                    )
                node[key] = translated


class TranslateTocCaptions(Transform):
    """Translates the sidebar's part captions (``_toc.yml``), which the table-of-contents
    extension puts into the root page only after Sphinx's translation step has run."""

    default_priority = 101  # sphinx-external-toc inserts the toctrees at 100

    def apply(self, **kwargs: Any) -> None:
        env = self.document.settings.env
        config = env.config
        if config.language == SOURCE_LANGUAGE:
            return
        toctrees = list(self.document.findall(addnodes.toctree))
        if not toctrees:
            return
        entries = _catalog(env)
        for toctree in toctrees:
            caption = toctree.get("rawcaption") or toctree.get("caption")
            if not caption:
                continue
            if entries.get(caption):
                toctree["caption"] = entries[caption]
            else:
                _untranslated(
                    "untranslated part caption (run `make translations` and translate it): "
                    f"{caption!r}",
                    toctree,
                )


def _untranslated(message: str, location: nodes.Node) -> None:
    """A build warning (an error under ``-W``) for text the edition shows untranslated."""
    LOGGER.warning(message, location=location, type="i18n", subtype="untranslated")


def _catalog(env) -> dict[str, str]:
    """The current page's translations (English message -> translation); empty if none."""
    config = env.config
    domain = docname_to_domain(env.docname, config.gettext_compact)
    dirs = [f"{env.srcdir}/{d}" for d in config.locale_dirs]
    catalog, found = init_locale(dirs, config.language, domain)
    return getattr(catalog, "_catalog", {}) if found else {}


def _ancestors(node: nodes.Node):
    while node.parent is not None:
        node = node.parent
        yield node


def _is_front_matter(node: nodes.Node, document: nodes.document) -> bool:
    """MyST turns a page's front matter into a field list at the top of the document (docutils
    makes it the page's docinfo later, after translation)."""
    return isinstance(node, (nodes.docinfo, nodes.field_list)) and node.parent is document


# The switch lands on the section the reader is in (both editions give a section the same id):
# the URL's own #, else the last section whose heading has scrolled past the top of the window.
KEEP_SECTION_SCRIPT = """<script>
document.querySelector(".edition-switch a").addEventListener("click", function () {
  var here = location.hash;
  if (!here) {
    document.querySelectorAll("article section[id]").forEach(function (section) {
      if (section.getBoundingClientRect().top <= 80) { here = "#" + section.id; }
    });
  }
  if (here) { this.href = this.href.split("#")[0] + here; }
});
</script>
"""


def _link_counterpart(app: Sphinx, pagename: str, template: str, context: dict, doctree) -> None:
    """Puts a link to the same page in the other edition at the top of every page."""
    if doctree is None:
        return
    language = app.config.language
    if language not in COUNTERPART:
        return
    prefix, hreflang, label = COUNTERPART[language]
    root = "../" * pagename.count("/")
    url = f"{root}{prefix}{pagename}.html"
    switch = (
        f'<p class="edition-switch"><a href="{url}" hreflang="{hreflang}" lang="{hreflang}">'
        f"{label}</a></p>\n{KEEP_SECTION_SCRIPT}"
    )
    context["body"] = switch + context.get("body", "")
    context["metatags"] = (
        context.get("metatags", "") + f'<link rel="alternate" hreflang="{hreflang}" href="{url}">\n'
    )


# Attributes the themes and MyST-NB write in English without a catalog, and their Chinese.
FIXED_INTERFACE = {
    'aria-label="Main"': 'aria-label="目录"',
    'aria-label="Page"': 'aria-label="本页"',
    'title="Toggle primary sidebar"': 'title="显示或隐藏目录"',
    'title="Toggle secondary sidebar"': 'title="显示或隐藏本页目录"',
    'aria-label="Toggle hidden content"': 'aria-label="展开或收起"',
}


def _translate_fixed_interface(app: Sphinx, exception: Exception | None) -> None:
    """Replaces the interface words that no catalog reaches, in every page of a translated
    edition (once the pages are written)."""
    if exception is not None or app.builder.format != "html":
        return
    if app.config.language != "zh_CN":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        changed = text
        for english, chinese in FIXED_INTERFACE.items():
            changed = changed.replace(english, chinese)
        if changed != text:
            page.write_text(changed, encoding="utf-8")


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_source_parser(TranslatableNotebookParser, override=True)
    app.add_transform(ComputedTextIsNotProse)
    app.add_transform(UntranslatedIsAWarning)
    app.add_transform(TranslateTocCaptions)
    app.add_transform(TranslateCellPrompts)
    app.connect("html-page-context", _link_counterpart)
    app.connect("build-finished", _translate_fixed_interface)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
