"""The SQLite backend's files (issue 11.5/11.6): no folder created, the database and every sidecar
SQLite makes (``-wal``, ``-shm``, ``-journal``) 0600 under any umask, an operator's mode kept."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_custody_state import EventBackendError, Ledger
from agent_custody_state_events_sqlite.store import SqliteBackend


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


@pytest.fixture(params=[0o022, 0o000, 0o277], ids=["umask022", "umask000", "umask277"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def test_a_missing_folder_is_refused_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "unmounted" / "deeper"
    with pytest.raises(EventBackendError) as caught:
        Ledger(missing / "ledger.sqlite")
    message = str(caught.value)
    assert "\n" not in message
    assert f"the folder {missing} does not exist; create it first" in message
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notadir").write_text("x")
    with pytest.raises(EventBackendError, match="is not a folder"):
        SqliteBackend(tmp_path / "notadir" / "ledger.sqlite")


def test_the_database_and_its_sidecars_are_owner_only(tmp_path: Path, umask: int) -> None:
    """The backend creates the database 0600 before SQLite opens it; SQLite gives ``-wal`` and
    ``-shm`` the main file's mode. Checked while the ledger is open (with a forget's checkpoint
    done) and after it is closed."""
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value="v", space="org", actor="a")
        ledger.assert_fact(subject="t", predicate="p", value="w", space="org", actor="a")
        modes = {p.name: _mode(p) for p in tmp_path.iterdir()}
        assert set(modes) == {"ledger.sqlite", "ledger.sqlite-wal", "ledger.sqlite-shm"}
        ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="erasure")
        modes.update({f"{p.name} after forget": _mode(p) for p in tmp_path.iterdir()})
    modes.update({f"{p.name} after close": _mode(p) for p in tmp_path.iterdir()})
    assert set(modes.values()) == {0o600}, (oct(umask), {k: oct(v) for k, v in modes.items()})


def test_a_rollback_journal_gets_the_database_mode(tmp_path: Path, umask: int) -> None:
    """The backend runs in WAL mode and never makes a ``-journal``; another program opening the
    file in rollback mode would. SQLite gives it the main file's mode too: verified here, since
    that is what the 0600 of every sidecar rests on."""
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value="v", space="org", actor="a")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("CREATE TABLE scratch (x)")
        journal = _sidecar(path, "-journal")
        assert journal.exists()
        assert _mode(journal) == 0o600, oct(_mode(journal))
        conn.execute("ROLLBACK")
    finally:
        conn.close()


@pytest.mark.parametrize("chosen", [0o644, 0o640])
def test_an_existing_database_keeps_the_mode_its_operator_chose(
    tmp_path: Path, chosen: int
) -> None:
    """A database that exists keeps its mode; SQLite gives the sidecars the same one."""
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value="v", space="org", actor="a")
    path.chmod(chosen)
    with Ledger(path) as ledger:
        fact = ledger.assert_fact(subject="t", predicate="p", value="w", space="org", actor="a")
        ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="erasure")
        assert {p.name: _mode(p) for p in tmp_path.iterdir()} == {
            "ledger.sqlite": chosen,
            "ledger.sqlite-wal": chosen,
            "ledger.sqlite-shm": chosen,
        }


def test_a_refused_open_leaves_another_processs_ledger_alone(tmp_path: Path) -> None:
    """A refused open of a new SQLite ledger never deletes the ledger another process created
    and wrote meanwhile (``agent_custody_state_conformance.opening``)."""
    from agent_custody_state_conformance.opening import refused_open_leaves_anothers_ledger

    refused_open_leaves_anothers_ledger(tmp_path / "ledger.sqlite")
