"""Fifteenth review, fresh eyes on the late-morning code (2026-12-07).

- The erasure log beside a file ledger (``<ledger>.shredded``, ``ledger.keystore``) was opened
  as whatever the name held: a FIFO there blocked the open inside the forget's write section
  (every writer of the ledger waiting for good), and a link to ``/dev/zero`` was read by
  ``verify``/``repair`` until ``MemoryError``. Anything but a regular file is now refused, named;
  and a line naming many key ids was read in quadratic time.
- ``test_docs_examples`` passed over, silently, a fence indented in a list item or made of
  tildes, a ```` ```py ```` block and a shell block whose ``<!-- run -->`` was mistyped or parted
  from its fence: a broken example there passed. Each is now named (``unseen_examples``).
- ``/readyz`` asked the ledger's events only: in crypto-shred mode a key store that could not
  answer (its key database down) left the server ready while every call with a value failed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import test_docs_examples as docs_examples  # the examples test, a module beside this one

from agent_custody_state import Ledger
from agent_custody_state.ledger.keystore import KeyStoreError, append_erasures, read_erasures

posix = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")


def _release(fifo: Path) -> None:
    """Unblock whoever waits in ``open`` of ``fifo``: a reader and a writer come and go."""
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    os.close(writer)
    os.close(reader)


def _within(
    seconds: float, call: Callable[[], Any], fifo: Path | None = None
) -> BaseException | None:
    """Run ``call`` on a daemon thread; what it raised (None: returned). Fails the test when it
    is still running after ``seconds`` (the old code: blocked for good), ``fifo`` released."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive() and fifo is not None:
        _release(fifo)
        thread.join(seconds)
        pytest.fail(f"still blocked after {seconds} s")
    assert not thread.is_alive(), f"still blocked after {seconds} s"
    return outcome[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "l.jsonl.shredded"
    os.mkfifo(path)
    return path


@posix
def test_a_fifo_erasure_log_fails_the_forget_instead_of_blocking_every_writer(
    tmp_path: Path, fifo: Path
) -> None:
    ledger = Ledger(tmp_path / "l.jsonl", forget_mode="crypto-shred")
    try:
        fact = ledger.assert_fact(subject="u", predicate="email", value="a@b", space="s", actor="a")
        error = _within(5, lambda: ledger.forget(fact_id=fact.fact_id, actor="a", reason="r"), fifo)
        assert error is not None and "not a regular file" in str(error)
        kept = ledger.get(fact.fact_id)
        assert kept is not None and kept.value == "a@b"  # nothing was forgotten
    finally:
        ledger.close()


@posix
def test_reading_a_fifo_erasure_log_is_refused_not_waited_on(fifo: Path) -> None:
    error = _within(5, lambda: read_erasures(fifo), fifo)
    assert isinstance(error, KeyStoreError) and "not a regular file" in str(error)


@posix
def test_an_erasure_log_linked_to_a_device_is_refused_unread(tmp_path: Path) -> None:
    link = tmp_path / "l.jsonl.shredded"
    link.symlink_to("/dev/zero")
    error = _within(5, lambda: read_erasures(link))
    assert isinstance(error, KeyStoreError) and "not a regular file" in str(error)
    with pytest.raises(KeyStoreError, match="not a regular file"):
        append_erasures(link, {"k": "f"}, "keys")


@posix
def test_a_regular_erasure_log_and_a_link_to_one_still_work(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere.shredded"
    append_erasures(real, {"k1": "f1", "k2": "f1"}, "keys")
    assert real.stat().st_mode & 0o777 == 0o600
    link = tmp_path / "l.jsonl.shredded"
    link.symlink_to(real)  # as the other sidecars: a link to a file is followed
    append_erasures(link, {"k3": "f2"}, "keys")
    assert read_erasures(link) == {"f1": ["k1", "k2"], "f2": ["k3"]}


def test_a_log_line_naming_many_key_ids_is_read_in_linear_time(tmp_path: Path) -> None:
    """A damaged or hostile log, one fact with 40,000 key ids (1 MB): read in well under a
    second (each id was looked for in a list: 7 s, and minutes for a few MB), order and
    duplicates kept as before (each id once, first seen first)."""
    log = tmp_path / "l.jsonl.shredded"
    kids = [f"k{i:08d}" for i in range(40_000)]
    lines = [{"factId": "f", "keyIds": kids}, {"factId": "f", "keyIds": ["k00000001", "z"]}]
    log.write_text("".join("\n" + json.dumps(line) for line in lines) + "\n{torn")
    started = time.monotonic()
    found = read_erasures(log)
    assert time.monotonic() - started < 1.5
    assert found == {"f": [*kids, "z"]}


# -- the docs' examples: none skipped without a word (``test_docs_examples``) ------------------
#
# ``test_docs_examples`` runs the fenced blocks it finds, and a block it does not find passes
# unseen: a fence indented in a list item or made of tildes, a ```` ```py ```` block, a shell block
# whose ``<!-- run -->`` is mistyped (``<!-- runs -->``) or parted from its fence by a blank line.
# Each of those is named here, so a broken example cannot pass by not being run.

FENCE_ANY = re.compile(r"^(\s*)(`{3,}|~{3,})\s*\{?\.?([\w+-]*)")
COMMENT_NAME = re.compile(r"^<!--\s*([\w -]*?)\s*(?::.*)?-->$")
RUNNABLE = {"python", "py", "python3", "pycon", "toml", *docs_examples.SHELL}
#: Comment names the pages use above fences: the markers, and notes other tests read.
MARKERS = {"not run", "needs", "first", "run"}
KNOWN_NAMES = {*MARKERS, "tested", "client"}


def unseen_examples(page: Path, text: str) -> list[str]:
    """What ``docs_examples.blocks`` would pass over silently in ``text`` (as ``page``)."""
    seen = {b.line: b for b in docs_examples.blocks(page, text)}
    lines = text.splitlines()
    problems: list[str] = []
    for index, line in enumerate(lines):
        fence = FENCE_ANY.match(line)
        if not fence or fence.group(3).lower() not in RUNNABLE:
            continue
        where, lang = f"{page.name}:{index + 1}", fence.group(3).lower()
        block = seen.get(index + 1)
        if block is None:
            problems.append(f"{where}: a {lang} fence the examples test does not read")
            continue
        if lang not in {"python", "toml"} and block.lang not in docs_examples.SHELL:
            problems.append(f"{where}: {lang!r} is not run (write python)")
        above, blank = index - 1, False
        while above >= 0 and above >= index - 4:
            text_above = lines[above].strip()
            if not text_above:
                blank = True
            elif name := COMMENT_NAME.match(text_above):
                known = name.group(1).strip().lower()
                if not blank and known not in KNOWN_NAMES:
                    problems.append(f"{where}: {text_above} is not a marker")
                if blank and known in MARKERS:
                    problems.append(f"{where}: {text_above} is parted from its fence")
            else:
                break
            above -= 1
    return problems


def test_every_runnable_fence_in_the_docs_is_read_by_the_examples_test() -> None:
    problems = [
        problem
        for page in docs_examples.PAGES
        if page.name not in docs_examples.GENERATED
        for problem in unseen_examples(page, page.read_text(encoding="utf-8"))
    ]
    assert problems == []


SLIPS = {
    "indented in a list item": "1. Install:\n\n   ```python\n   raise SystemExit(1)\n   ```\n",
    "tilde fence": "~~~python\nraise SystemExit(2)\n~~~\n",
    "py": "```py\nraise SystemExit(3)\n```\n",
    "mistyped run": "<!-- runs -->\n```sh\nagent-custody-memory nosuch\n```\n",
    "parted run": "<!-- run -->\n\n```sh\nagent-custody-memory nosuch\n```\n",
}


@pytest.mark.parametrize("slip", sorted(SLIPS))
def test_a_broken_example_is_either_run_or_named(slip: str) -> None:
    """Each broken example is run by the examples test (which it may learn to read), or named
    here; never passed over in silence."""
    page = docs_examples.ROOT / "docs" / "x.md"
    ran = [
        b
        for b in docs_examples.blocks(page, SLIPS[slip])
        if b.lang in {"python", "toml"} or (b.lang in docs_examples.SHELL and "run" in b.markers)
    ]
    assert ran or unseen_examples(page, SLIPS[slip])


def test_marked_blocks_and_notes_are_not_named() -> None:
    text = "<!-- tested: elsewhere -->\n<!-- not run: a sketch -->\n```python\nx = 1\n```\n"
    assert unseen_examples(docs_examples.ROOT / "docs" / "x.md", text) == []


# -- /readyz and crypto-shred's key store (``server/health.py``) -------------------------------
#
# In crypto-shred mode every value is read and written through the key store (a key database
# of its own on PostgreSQL): one that could not answer left ``/readyz`` ready while every call
# with a value failed. The probe now asks it for a key id no key has.


def test_readiness_is_not_ready_when_the_key_store_cannot_answer(tmp_path: Path) -> None:
    from agent_custody_state.server.health import LEDGER_UNAVAILABLE
    from agent_custody_state.server.http import create_memory_http_server

    ledger = Ledger(tmp_path / "l.jsonl", forget_mode="crypto-shred")
    server = create_memory_http_server(ledger, port=0, require_gateway=False)
    assert server.readiness is not None
    server.readiness.cache_seconds = 0  # every probe asks the ledger

    async def probe() -> tuple[int, Any]:
        transport = httpx.ASGITransport(app=server.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            response = await client.get("/readyz")
            return response.status_code, response.json()

    try:
        assert asyncio.run(probe()) == (200, {"status": "ready"})
        ledger.backend.keys.close()  # type: ignore[attr-defined]  # as a key database gone
        assert asyncio.run(probe()) == (503, {"status": "not_ready", "reason": LEDGER_UNAVAILABLE})
    finally:
        server.memory.close()
        ledger.close()
