"""A Sphinx extension that drops repeated ``<script>`` entries from every page.

sphinx-thebe and sphinx-togglebutton register their inline set-up scripts once per reading pass,
and a Jupyter Book build makes two, so every page declared ``const THEBE_JS_URL`` twice and the
browser logged an error on each page. Keeping the first copy of each script is the whole fix; no
script is lost, since a repeated entry has the same file (or none), body and attributes.
"""

from __future__ import annotations


def _key(script: object) -> tuple:
    attributes = getattr(script, "attributes", {}) or {}
    filename = getattr(script, "filename", script)  # Sphinx 7.4: an asset object; older: a str
    return (str(filename or ""), tuple(sorted((str(k), str(v)) for k, v in attributes.items())))


def drop_repeated_scripts(app, pagename, templatename, context, doctree) -> None:
    """Keep the first of each identical script in the page's ``script_files``."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique  # in place: later listeners (MathJax's) add to this same list


def setup(app):
    # First: the event stops at the first listener that returns a template (the theme's do).
    app.connect("html-page-context", drop_repeated_scripts, priority=1)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
