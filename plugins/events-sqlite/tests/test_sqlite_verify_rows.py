"""``verify`` and ``export`` read every row of a SQLite ledger: a row written by hand below the
sequence's start (``seq`` 0, or the lowest 64-bit integer) is served by the reads that go by a
column, so it must be verified too; and how ``stored_chunks`` cuts the table (by arithmetic when
``seq`` runs 1..N, by probes of the primary key otherwise)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main


def _ledger(path: Path, n: int) -> None:
    with Ledger(path) as ledger:
        for i in range(n):
            ledger.assert_fact(subject=f"s{i}", predicate="p", value=i, space="o", actor="a")


def _forge(path: Path, seq: int) -> None:
    """Event 3 again as a fact of its own about ``forged``, columns and JSON agreeing, at
    ``seq``: what someone with the file could add."""
    with sqlite3.connect(path) as db:
        row = list(db.execute("SELECT * FROM events WHERE seq = 3").fetchone())
        data = json.loads(row[-1])
        data.pop("chain")
        data["eventId"], data["fact"]["factId"], data["fact"]["subject"] = "e-f", "f-f", "forged"
        row[:2], row[4], row[6], row[-1] = [seq, "e-f"], "f-f", "forged", json.dumps(data)
        db.execute(f"INSERT INTO events VALUES ({', '.join('?' * len(row))})", row)


@pytest.mark.parametrize("seq", [0, -(2**63)])
def test_a_row_below_the_sequence_start_fails_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seq: int
) -> None:
    path = tmp_path / "l.sqlite"
    _ledger(path, 5)
    _forge(path, seq)
    with Ledger(path) as ledger:
        assert [f.fact_id for f in ledger.as_of(subject="forged")] == ["f-f"]  # it is served
        events = [e.event_id for e in ledger.backend.iter_events()]  # what export reads
        assert events[0] == "e-f" and len(events) == 6
        first = ledger.backend.first_event()
        assert first is not None and first.event_id == "e-f"
    for jobs in ("1", "2"):
        assert main(["verify", "--ledger", str(path), "--json", "--jobs", jobs]) == 1
        report = json.loads(capsys.readouterr().out)
        assert report["events"] == 6
        assert report["firstBad"]["seq"] == 1, report


def test_an_intact_table_is_cut_by_arithmetic_and_a_gapped_one_by_probes(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    _ledger(path, 10)
    with Ledger(path) as ledger:
        cut = [(c.after, c.upto, c.count) for c in ledger.backend.stored_chunks(4)]
    assert cut == [(None, 4, 4), (4, 8, 4), (8, 10, 2)]
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM events WHERE seq IN (1, 6)")
    with Ledger(path, chain=False, forget_mode="plain") as ledger:
        chunks = list(ledger.backend.stored_chunks(4))
        assert [(c.after, c.upto, c.count) for c in chunks] == [(None, 5, 4), (5, 10, 4)]
        assert [len(c.read().lines) for c in chunks] == [4, 4]


def test_a_read_only_ledger_is_verified_by_worker_processes(tmp_path: Path) -> None:
    """``verify`` opens the ledger read-only and its workers open it again from each chunk: the
    read-only connect must travel to them (it was a local function, not picklable, and every
    ``verify`` of a SQLite ledger past one chunk failed)."""
    from agent_custody_state.ledger.parallel import verify_stored, worker_pool

    path = tmp_path / "l.sqlite"
    _ledger(path, 10)
    with Ledger(path, read_only=True) as ledger:
        with worker_pool(2) as pool:
            report = verify_stored(ledger.backend.stored_chunks(4), executor=pool)
    assert report.ok and report.events == 10
