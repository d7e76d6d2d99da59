"""Review of the JSONL backend's files (docs/reliability.md): what a ledger path may name, a
forget through a symlink, crashed forgets' temporaries whatever the file's name, and a refused
open beside another process's new ledger."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import EventBackendError, Ledger
from agent_custody_state.backends.jsonl import JsonlBackend
from agent_custody_state_conformance.opening import refused_open_leaves_anothers_ledger


def _assert(ledger: Ledger, value: Any, predicate: str = "p") -> str:
    event = ledger.assert_fact(subject="s", predicate=predicate, value=value, space="x", actor="a")
    return event.fact.fact_id


# -- what the path names ---------------------------------------------------------------------------


def test_a_folder_is_refused_with_a_message(tmp_path: Path) -> None:
    """It failed with a raw IsADirectoryError from deep in the read, after creating a lock."""
    folder = tmp_path / "ledger.jsonl"
    folder.mkdir()
    with pytest.raises(EventBackendError, match="is a folder; a JSONL ledger is a regular file"):
        Ledger(folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.jsonl"]


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    """Opening a FIFO blocked for ever (``open(O_RDONLY)`` waits for a writer), holding the
    ledger's exclusive lock: every other process on the ledger hung with it."""
    fifo = tmp_path / "ledger.jsonl"
    os.mkfifo(fifo)
    code = textwrap.dedent(
        f"""
        from agent_custody_state import EventBackendError, Ledger
        try:
            Ledger({str(fifo)!r})
        except EventBackendError as exc:
            print(exc)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr
    assert "not a regular file (a FIFO, socket or device)" in run.stdout


def test_a_symlinked_ledger_forgets_in_the_file_it_names(tmp_path: Path) -> None:
    """A forget renamed its rewrite over the link itself: the link became a plain file and the
    file it had named kept every value, the forgotten one included (an erasure not done, and
    a second copy of the ledger that no process writes any more)."""
    real = tmp_path / "volume" / "ledger.jsonl"
    real.parent.mkdir()
    link = tmp_path / "ledger.jsonl"
    with Ledger(real) as ledger:
        fact_id = _assert(ledger, "SECRET-VALUE-1234")
    link.symlink_to(real)
    with Ledger(link) as ledger:
        ledger.forget(fact_id=fact_id, actor="dpo", reason="erasure")
        _assert(ledger, "after", "q")
    assert link.is_symlink()
    assert b"SECRET-VALUE-1234" not in real.read_bytes()
    with Ledger(real) as ledger:  # the file the link names is the ledger, forget included
        assert [e.kind for e in ledger.export()] == ["assert", "forget", "assert"]
        assert [f.value for f in ledger.facts()] == [None, "after"]
    assert not [p for p in real.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_crashed_forgets_temporary_is_removed_whatever_the_ledgers_name(tmp_path: Path) -> None:
    """The leftover's pattern was not escaped: in ``ledger[1].jsonl`` the ``[1]`` is a glob
    class, so the copy of the ledger a crashed forget left (with live values in it) was never
    removed, nor listed among the ledger's files for the erasure certificate's byte scan."""
    path = tmp_path / "ledger[1].jsonl"
    with Ledger(path) as ledger:
        fact_id = _assert(ledger, "SECRET-VALUE-5678")
    stale = tmp_path / ".ledger[1].jsonl.99999.forget.tmp"
    stale.write_bytes(path.read_bytes())  # as a forget killed before its rename leaves it
    torn = tmp_path / "ledger[1].jsonl.torn-1"
    torn.write_text("{}\n")
    with Ledger(path) as ledger:
        listed = ledger.backend.local_files()
        assert str(stale) in listed and str(torn) in listed
        ledger.forget(fact_id=fact_id, actor="dpo", reason="erasure")
    assert not stale.exists()
    assert not [p.name for p in tmp_path.iterdir() if b"SECRET-VALUE-5678" in p.read_bytes()]


def test_an_open_backend_refuses_a_folder_put_in_place_of_its_file(tmp_path: Path) -> None:
    """A raw ``IsADirectoryError`` before; a FIFO there blocked the read for ever."""
    path = tmp_path / "l.jsonl"
    backend = JsonlBackend(path)
    try:
        with backend.transaction():
            pass
        (tmp_path / "folder").mkdir()
        os.replace(tmp_path / "folder", path)  # a folder where the (not yet created) ledger was
        with pytest.raises(EventBackendError, match="no longer a regular file"):
            backend.count()
    finally:
        backend.close()


# -- a refused open beside another process's new ledger -----------------------------------------


def test_a_refused_open_leaves_another_processs_ledger_alone(tmp_path: Path) -> None:
    """A refused open removes what it created beside a path that was new. It took everything
    new beside that path for its own: another process's ledger file with its committed
    events (and its lock) were deleted (``agent_custody_state_conformance.opening``; the
    SQLite plugin's tests run it on a ``.sqlite`` path)."""
    refused_open_leaves_anothers_ledger(tmp_path / "ledger.jsonl")
