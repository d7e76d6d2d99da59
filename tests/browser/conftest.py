"""The review pages in a real browser: Debian's chromium, headless, driven by Playwright.

Run by the optional ``nox -s review_browser`` session. The receipts come from the extras' own
test helpers (the worked fixture of SPEC-EXTRAS 1.8, built by the gateway stand-in in
``core/tests/extras``).
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "core" / "tests" / "extras"))

CHROMIUM = os.environ.get("ACS_CHROMIUM", "/usr/bin/chromium")
# The flags a headless browser needs in a container without a network: no sandbox (root), no
# GPU, and none of the background traffic (updates, sync, QUIC probes) a desktop browser makes.
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.skip(f"no browser: {CHROMIUM} is missing (install Debian's chromium package)")
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="the playwright package is not installed (nox -s review_browser)",
    )
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield launched
        launched.close()


@pytest.fixture
def serve() -> Iterator[Any]:
    """``serve(options)`` starts a review server on a free loopback port; stopped afterwards."""
    from agent_custody_state.extras.review_server import ReviewServer

    started: list[ReviewServer] = []

    def start(options: Any) -> str:
        server = ReviewServer(options, "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return server.url

    yield start
    for server in started:
        server.shutdown()
        server.server_close()
