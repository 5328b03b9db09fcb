"""Build the book's two editions, or refresh the Chinese edition's catalogs.

The English pages are the source. The Chinese edition is the same pages, executed once (both
editions read the same execution cache), with each paragraph replaced by its translation from
``locale/zh_CN/LC_MESSAGES/<page>.po`` (gettext catalogs, managed with sphinx-intl).

    python book/editions.py build [--path-output DIR]   # DIR/_build/html and DIR/_build/html/zh
                                  [--cache-home DIR]    # a cache of its own (a cold build)
    python book/editions.py catalogs                     # after editing English: update the .po

``make book`` and ``make translations`` call these; the tests build with ``--path-output``.

Every build executes pages into one cache, ``_build/.jupyter_cache`` of the checkout, whatever its
output folder: the tests' fresh builds and ``make book`` run each page once between them. The cache
knows a page only by its text, so a page's record is dropped whenever anything that page reads
changes (``book/_ext/page_inputs.py``, fingerprinted in ``_build/page-inputs.json``), and the
same extension makes Sphinx read that page again.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LANGUAGE = "zh_CN"
LOCALE = ROOT / "locale"
PAGE_INPUTS_MODULE = ROOT / "book" / "_ext" / "page_inputs.py"
#: Where every build keeps its execution cache and the fingerprint of what the pages read.
CACHE_HOME = ROOT / "_build"
#: Each page's fingerprint of what it read when it was last executed into the cache.
PAGE_INPUTS = "page-inputs.json"
CHINESE_TITLE = "KV 缓存管理：PagedAttention 与 Mooncake"
CHINESE_AUTHOR = "KV 缓存课程作者"
# Interface words that themes and extensions take from settings rather than from a catalog (the
# rest are in locale/zh_CN/LC_MESSAGES/sphinx.po).
CHINESE_INTERFACE = {
    "nb_code_prompt_show": "显示代码",
    "nb_code_prompt_hide": "隐藏代码",
    "togglebutton_hint": "点击展开",
    "togglebutton_hint_hide": "点击收起",
}


def _page_inputs() -> ModuleType:
    """``book/_ext/page_inputs.py``, the book's own extension, loaded by path."""
    spec = importlib.util.spec_from_file_location("kvcourse_page_inputs", PAGE_INPUTS_MODULE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def drop_stale_pages(cache_home: Path, root: Path = ROOT) -> list[str]:
    """Drop from the execution cache under ``cache_home`` the record of every page of the book
    at ``root`` whose inputs moved since it was executed (``book/_ext/page_inputs.py``); return
    those pages. The other pages' records stay, so a build re-executes only the pages a change
    reaches."""
    current = _page_inputs().page_fingerprints(root)
    stamp = cache_home / PAGE_INPUTS
    try:
        before = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        before = {}
    stale = sorted(page for page, print_ in current.items() if before.get(page) != print_)
    cache = cache_home / ".jupyter_cache"
    if stale and cache.exists():
        from jupyter_cache import get_cache

        store = get_cache(str(cache))
        for record in store.list_cache_records():
            uri = Path(record.uri)
            page = uri.relative_to(root).as_posix() if uri.is_relative_to(root) else None
            if page is None or page in stale:  # a page of another checkout: not ours to keep
                store.remove_cache(record.pk)
        print(f"editions: {len(stale)} pages will re-execute: {', '.join(stale)}")
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return stale


def edition_config(build: Path, language: str, cache_home: Path, title: str | None = None) -> Path:
    """Write the book's ``_config.yml`` for one edition under ``build``; return its path.

    Only the language (and the title) change, and both editions use the one execution cache, so
    no page runs twice."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    config["execute"]["cache"] = str(cache_home / ".jupyter_cache")
    # Paths in the book's configuration are relative to the book, not to this copy of it.
    extensions = config["sphinx"]["local_extensions"]
    config["sphinx"]["local_extensions"] = {name: str(ROOT / p) for name, p in extensions.items()}
    config["html"]["favicon"] = str(ROOT / config["html"]["favicon"])
    config["sphinx"]["config"]["language"] = language
    if title:
        config["title"] = title
        config["author"] = CHINESE_AUTHOR
    if language != "en":
        config["sphinx"]["config"].update(CHINESE_INTERFACE)
        config["sphinx"]["config"]["html_theme_options"]["search_bar_text"] = "搜索本书…"
    target = build / f"config-{language}" / "_config.yml"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return target


def _jupyter_book(*args: str) -> None:
    """Run ``jupyter-book build`` on the book; stop with its exit status if it fails."""
    command = [str(BIN / "jupyter-book"), "build", str(ROOT), *args]
    result = subprocess.run(command, cwd=ROOT)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed (exit {result.returncode})")


def build(output: Path, cache_home: Path = CACHE_HOME) -> None:
    """Build English into ``output/_build/html`` and Chinese into its ``zh/`` folder, executing
    pages into the cache under ``cache_home`` (default: the checkout's ``_build``)."""
    build_dir = output / "_build"
    strict = ["-W", "-n", "--keep-going"]
    drop_stale_pages(cache_home)
    start = time.perf_counter()
    english_config = edition_config(build_dir, "en", cache_home)
    _jupyter_book("--config", str(english_config), "--path-output", str(output), *strict)
    english = time.perf_counter() - start

    config = edition_config(build_dir, LANGUAGE, cache_home, CHINESE_TITLE)
    chinese_root = build_dir / "zh"
    start = time.perf_counter()
    _jupyter_book("--config", str(config), "--path-output", str(chinese_root), *strict)
    target = build_dir / "html" / "zh"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(chinese_root / "_build" / "html", target)
    chinese = time.perf_counter() - start
    print(f"editions: English {english:.0f} s, Chinese {chinese:.0f} s more -> {target}")


def catalogs(output: Path, cache_home: Path = CACHE_HOME) -> None:
    """Extract every page's messages and merge them into ``locale/zh_CN`` (new ones untranslated,
    changed ones fuzzy): the step after any edit of an English page."""
    build_dir = output / "_build"
    drop_stale_pages(cache_home)
    config = edition_config(build_dir, "en", cache_home)
    extract_root = build_dir / "messages"
    _jupyter_book(
        "--config",
        str(config),
        "--path-output",
        str(extract_root),
        "--builder",
        "custom",
        "--custom-builder",
        "gettext",
    )
    pot = extract_root / "_build" / "gettext"
    command = [str(BIN / "sphinx-intl"), "update", "-p", str(pot), "-l", LANGUAGE]
    command += ["-d", str(LOCALE), "--line-width", "-1", "--no-obsolete"]
    subprocess.run(command, check=True, cwd=ROOT)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["build", "catalogs"])
    parser.add_argument(
        "--path-output", type=Path, default=ROOT, help="where _build goes (default: the book)"
    )
    parser.add_argument(
        "--cache-home",
        type=Path,
        default=CACHE_HOME,
        help="where the execution cache is kept (default: the book's _build, shared by all builds)",
    )
    args = parser.parse_args(argv)
    output, cache_home = args.path_output.resolve(), args.cache_home.resolve()
    {"build": build, "catalogs": catalogs}[args.command](output, cache_home)


if __name__ == "__main__":
    main()
