"""A real browser for the tests of what readers and students see: Debian's Chromium driven by
Playwright (its own browser download is never used), and small servers on 127.0.0.1.

Without Chromium or Playwright every browser test is skipped with a message that says how to get
them (``make system-packages``); CI installs both.
"""

import functools
import http.server
import shutil
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Screenshots of every page and notebook, kept as test artifacts (``_build`` is not committed).
ARTIFACTS = ROOT / "_build" / "test-artifacts"
#: Chromium flags for a sandboxed, offline machine: no GPU, no background network traffic.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WIDTHS = (1280, 390)


def chromium_path() -> str | None:
    """Debian's Chromium, if it is installed."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return found or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the whole run."""
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="Playwright for Python is missing: `make venv` installs it (pip install playwright)",
    )
    path = chromium_path()
    if path is None:
        pytest.skip(
            "Debian's chromium is not installed, so the browser tests cannot run: "
            "`make system-packages` installs it (apt-get install chromium fonts-noto-cjk, as root)"
        )
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


@pytest.fixture(scope="session")
def book_url(built_book):
    """The built book, served over HTTP on 127.0.0.1 (a port the system picks)."""
    handler = functools.partial(_QuietHandler, directory=str(built_book))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class PageProblems:
    """Console errors, uncaught exceptions and failed requests of one browser page."""

    def __init__(self, page):
        self.messages: list[str] = []
        page.on("console", lambda m: self.messages.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: self.messages.append(f"uncaught: {error}"))
        page.on("requestfailed", self._failed)
        page.on(
            "response",
            lambda r: (
                self.messages.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None
            ),
        )

    def _failed(self, request) -> None:
        # The browser may cancel an image it had started (net::ERR_ABORTED) and fetch it again,
        # seen under load on §7's figures; whether every image finally loaded is checked on the
        # page itself (document.images), so only other failures are problems here.
        if request.resource_type == "image" and "ERR_ABORTED" in (request.failure or ""):
            return
        self.messages.append(f"request failed: {request.url} ({request.failure})")


def screenshot(page, name: str) -> Path:
    """A full-page screenshot under ``_build/test-artifacts/``; returns its path."""
    target = ARTIFACTS / f"{name}.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target), full_page=True)
    return target


@pytest.fixture
def watch():
    """``watch(page)`` starts recording a page's problems (``.messages``)."""
    return PageProblems


@pytest.fixture
def shoot():
    """``shoot(page, name)`` saves a full-page screenshot as a test artifact."""
    return screenshot
