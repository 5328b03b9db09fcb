"""How much of the book a one-module library change re-executes, and whether its pages show it.

    python bench/book_rebuild.py [lib/kvcourse/MODULE.py ...]

Builds both editions as ``make book`` does (``book/editions.py build``) until nothing is stale,
then, for each module named (default: three of different reach), adds a line that prints a token
when the module is imported, builds again, and prints which pages the change reached (by
``book/_ext/page_inputs.py``), which pages executed (their cache records were replaced), the
build's seconds, and which pages' HTML shows the token (a page whose importing cell hides its
output shows none). The module is put back, and the book rebuilt, before the next.
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import subprocess
import sys
import time
import uuid
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "_build" / ".jupyter_cache"
HTML = ROOT / "_build" / "html"
DEFAULT_MODULES = (
    "lib/kvcourse/viz/kernel_results.py",
    "lib/kvcourse/generation/beam_decoding.py",
    "lib/kvcourse/cluster/layerwise.py",
)


def _page_inputs():
    spec = importlib.util.spec_from_file_location("page_inputs", ROOT / "book/_ext/page_inputs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _records() -> dict[str, int]:
    from jupyter_cache import get_cache

    if not CACHE.exists():
        return {}
    return {Path(r.uri).name: r.pk for r in get_cache(str(CACHE)).list_cache_records()}


def _build() -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(ROOT / "book/editions.py"), "build"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"the book build failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", default=DEFAULT_MODULES)
    args = parser.parse_args()
    print(f"# book_rebuild, {date.today()}, {platform.processor() or platform.machine()}")
    print(f"warm-up build (executes whatever is stale): {_build():.0f} s")
    print(f"build with nothing changed: {_build():.0f} s")
    pages = _page_inputs()
    for name in args.modules:
        module = ROOT / name
        original = module.read_text(encoding="utf-8")
        token = f"probe-{uuid.uuid4().hex[:12]}"
        before_prints, before_records = pages.page_fingerprints(ROOT), _records()
        try:
            module.write_text(original + f'\nprint("{token}")\n', encoding="utf-8")
            reached = sorted(
                p for p, f in pages.page_fingerprints(ROOT).items() if before_prints[p] != f
            )
            seconds = _build()
            after = _records()
            executed = sorted(p for p in after if before_records.get(p) != after[p])
            shown = sorted(
                h.relative_to(HTML).as_posix()
                for h in HTML.rglob("*.html")
                if token in h.read_text(encoding="utf-8", errors="replace")
            )
        finally:
            module.write_text(original, encoding="utf-8")
        print(f"\n{name}:")
        print(f"  pages it reaches: {len(reached)} ({', '.join(reached)})")
        print(f"  pages executed:   {len(executed)} ({', '.join(executed)})")
        print(f"  build: {seconds:.0f} s (both editions)")
        print(f"  HTML showing the new output: {', '.join(shown) or 'none (output hidden)'}")
        print(f"  put back, rebuilt in {_build():.0f} s")


if __name__ == "__main__":
    main()
