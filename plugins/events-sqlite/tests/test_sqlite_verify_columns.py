"""``verify`` on a SQLite ledger also compares the query columns with the stored JSON: the chain
covers the JSON, reads go by the columns, so an edited column that hides a fact is a failure
named at its event (``EventBackend.index_problems``)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.ledger.parallel import verify_stored, worker_pool
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state.plugin import LedgerChanged


def test_an_edited_column_fails_verify_at_its_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "l.sqlite"
    with Ledger(path) as ledger:
        for i in range(6):
            ledger.assert_fact(subject=f"s{i}", predicate="p", value=i, space="o", actor="a")
    assert main(["verify", "--ledger", str(path)]) == 0
    capsys.readouterr()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE events SET kind = 'retract' WHERE seq = 4")
    with Ledger(path) as ledger:
        assert [f.subject for f in ledger.as_of()] == ["s0", "s1", "s2", "s4", "s5"]  # hidden
    assert main(["verify", "--ledger", str(path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["firstBad"] == {
        "seq": 4,
        "reason": "its kind column reads 'retract' but the event says 'assert' "
        "(reads find events by that column)",
    }
    assert report["problemCount"] == 1


def _tampered(path: Path) -> None:
    """24 events, then: a column edited (event 6), a row's JSON cut (event 11), a row deleted
    (seq 17), an edited column on the first event of a chunk of 4 (event 21 after the delete)."""
    with Ledger(path) as ledger:
        for i in range(24):
            ledger.assert_fact(subject=f"s{i}", predicate="p", value=i, space="o", actor="a")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE events SET subject = 'other' WHERE seq = 6")
        db.execute("UPDATE events SET json = substr(json, 1, 30) WHERE seq = 11")
        db.execute("DELETE FROM events WHERE seq = 17")
        db.execute("UPDATE events SET predicate = 'q' WHERE seq = 22")


def test_chunks_read_by_workers_report_what_one_process_reports(tmp_path: Path) -> None:
    """The workers' reads (``stored_chunks``, the columns checked in the same statement) name
    the problems the sequential pass and ``index_problems`` name, at the same positions: an
    edited column, a row that is not JSON (the database's check cannot parse it), a deleted row
    (every later position moves), an edit on a chunk's first event."""
    path = tmp_path / "l.sqlite"
    _tampered(path)
    with Ledger(path, chain=False, forget_mode="plain") as ledger:
        backend = ledger.backend
        expected = verify_lines(backend.stored_events())
        for seq, reason in backend.index_problems():
            expected.add(seq, reason)
        chunks = list(backend.stored_chunks(4))
        assert [chunk.count for chunk in chunks] == [4, 4, 4, 4, 4, 3]
        with worker_pool(2) as pool:
            report = verify_stored(chunks, executor=pool)
        alone = verify_stored(backend.stored_chunks(4), jobs=1)
    assert asdict(report) == asdict(expected) == asdict(alone)
    bad = {p.seq: p.reason for p in report.problems}
    assert bad[6].startswith("its subject column reads 'other'")
    assert bad[11].startswith("not a valid JSON event")
    assert bad[21].startswith("its predicate column reads 'q'")


def test_a_row_that_is_not_json_is_named_at_its_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The column check's statement stops at a row whose JSON does not parse (SQLite's
    ``json_extract``): the command still names each problem at its event, in both modes."""
    path = tmp_path / "l.sqlite"
    _tampered(path)
    for jobs in ("1", "2"):
        assert main(["verify", "--ledger", str(path), "--json", "--jobs", jobs]) == 1
        report = json.loads(capsys.readouterr().out)
        assert [p["seq"] for p in report["problems"]][:3] == [6, 11, 17], report
    with Ledger(path, chain=False, forget_mode="plain") as ledger:
        assert [seq for seq, _ in ledger.backend.index_problems()] == [6, 21]


def test_a_chunk_that_lost_a_row_says_the_ledger_changed(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with Ledger(path) as ledger:
        for i in range(8):
            ledger.assert_fact(subject=f"s{i}", predicate="p", value=i, space="o", actor="a")
        chunks = list(ledger.backend.stored_chunks(3))
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM events WHERE seq = 5")
    assert len(chunks[0].read().lines) == 3
    with pytest.raises(LedgerChanged, match="the ledger changed"):
        verify_stored(chunks, jobs=1)
