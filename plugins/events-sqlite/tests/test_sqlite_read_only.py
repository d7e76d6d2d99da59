"""``Ledger("ledger.sqlite", read_only=True)`` and the command line's reads on SQLite: the file
is opened ``mode=ro`` (no ``-wal``/``-shm`` created when no writer has it open), no table is
created or migrated, every write is refused with code ``read_only``, and the folder is left
byte-identical (the core's ``test_read_only.py`` says the same of JSONL)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state_conformance.readonly import (
    READ_COMMANDS,
    WRITES,
    folder_files,
    run_read_command,
)
from agent_custody_state_events_sqlite.store import SqliteBackend

FACT = {"subject": "s", "predicate": "p", "space": "o", "actor": "a"}


def ledger(folder: Path) -> tuple[Path, str]:
    path = folder / "ledger.sqlite"
    with Ledger(path) as opened:
        first = opened.assert_fact(**FACT, value="one")
        opened.assert_fact(**{**FACT, "subject": "t"}, value="two")
    return path, first.fact_id


def test_a_read_only_open_reads_and_changes_no_file(tmp_path: Path) -> None:
    path, fact_id = ledger(tmp_path)
    before = folder_files(tmp_path)
    assert list(before) == ["ledger.sqlite"]
    with Ledger(path, read_only=True) as opened:
        assert opened.read_only
        assert sorted(f.value for f in opened.as_of()) == ["one", "two"]
        assert [e.kind for e in opened.history(fact_id)] == ["assert"]
        assert len(list(opened.export())) == 2
    assert folder_files(tmp_path) == before


@pytest.mark.parametrize("write", list(WRITES))
def test_every_write_is_refused_and_changes_no_file(tmp_path: Path, write: str) -> None:
    path, fact_id = ledger(tmp_path)
    before = folder_files(tmp_path)
    with Ledger(path, read_only=True) as opened:
        with pytest.raises(LedgerError) as refused:
            WRITES[write](opened, fact_id)
        operation = "assert_fact" if write == "supersede" else write  # a supersession asserts
        assert str(refused.value) == f"{path} is opened read-only; {operation} writes"
        assert refused.value.code == "read_only"
        with pytest.raises(EventBackendError, match="opened read-only; its write sections"):
            with opened.backend.transaction():
                pass
        assert opened.count() == 2
    assert folder_files(tmp_path) == before


def test_the_database_itself_refuses_a_write(tmp_path: Path) -> None:
    """Beneath the ledger's refusals, the connection is read-only (``mode=ro``, query_only)."""
    path, _ = ledger(tmp_path)
    before = folder_files(tmp_path)
    backend = SqliteBackend(path, read_only=True)
    try:
        with pytest.raises(sqlite3.Error, match="readonly|read-only|query_only"):
            backend._raw.execute("DELETE FROM events")
    finally:
        backend.close()
    assert folder_files(tmp_path) == before


def test_a_writer_open_alongside_is_read_through_the_wal(tmp_path: Path) -> None:
    path, _ = ledger(tmp_path)
    with Ledger(path) as writer:
        writer.assert_fact(**{**FACT, "subject": "u"}, value="three")
        with Ledger(path, read_only=True) as reader:
            assert reader.count() == 3
            writer.assert_fact(**{**FACT, "subject": "v"}, value="four")
            assert reader.count() == 4


def test_a_location_that_is_not_there_is_refused_and_nothing_created(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="no such ledger; a read-only open never creates one"):
        Ledger(tmp_path / "missing.sqlite", read_only=True)
    with pytest.raises(EventBackendError, match="no such ledger"):
        SqliteBackend(tmp_path / "missing.sqlite", read_only=True)
    assert list(tmp_path.iterdir()) == []


def test_a_database_without_the_events_table_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (x)")
    before = folder_files(tmp_path)
    with pytest.raises(EventBackendError, match="no events table events; a read-only open"):
        Ledger(path, read_only=True)
    assert folder_files(tmp_path) == before


def test_a_writable_open_creates_what_a_read_only_one_does_not(tmp_path: Path) -> None:
    """The contrast: a writable open of a database without the table creates it."""
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (x)")
    before = folder_files(tmp_path)
    Ledger(path).close()
    assert folder_files(tmp_path) != before


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: c[0])
def test_a_read_command_leaves_the_folder_byte_identical(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "ledger"
    folder.mkdir()
    path, fact_id = ledger(folder)
    before = folder_files(folder)
    assert run_read_command(command, path, fact_id, tmp_path / "out.jsonl") == 0
    capsys.readouterr()
    assert folder_files(folder) == before
