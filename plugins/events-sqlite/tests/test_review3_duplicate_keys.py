"""Third review, on SQLite. A key put twice in a row's JSON: SQLite's ``json_extract`` keeps the first, every reader of
ours the last. The query columns are filled and checked with ``json_extract``, the chain covers
what our readers see, so a forged first copy moved a fact under another subject (hidden from
reads by its own) while both checks passed. ``verify`` names the event (third review)."""

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


def test_a_forged_first_copy_of_a_key_fails_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "l.sqlite"
    with Ledger(path) as ledger:
        for i in range(6):
            ledger.assert_fact(subject=f"s{i}", predicate="p", value=i, space="o", actor="a")
    with sqlite3.connect(path) as db:
        (text,) = db.execute("SELECT json FROM events WHERE seq = 4").fetchone()
        forged = text.replace('"subject":"s3"', '"subject":"other","subject":"s3"', 1)
        assert db.execute("SELECT json_extract(?, '$.fact.subject')", (forged,)).fetchone() == (
            "other",
        )
        db.execute("UPDATE events SET subject = 'other', json = ? WHERE seq = 4", (forged,))
    with Ledger(path) as ledger:
        assert ledger.as_of(subject="s3") == []  # hidden from reads by its subject
    for jobs in ("1", "2"):
        assert main(["verify", "--ledger", str(path), "--json", "--jobs", jobs]) == 1
        report = json.loads(capsys.readouterr().out)
        assert report["firstBad"]["seq"] == 4
        assert report["firstBad"]["reason"].startswith("a key appears twice in this event")
        assert report["problemCount"] == 1


def test_an_assert_copied_back_after_its_forget_fails_in_workers_too(tmp_path: Path) -> None:
    """A forget changes no leaf: the row's JSON as it was before the forget, written back, kept
    every hash. Workers reading their own chunks (``verify_stored``) hand the asserts holding a
    value to the merge, which pairs them with the forget in a later chunk."""
    path = tmp_path / "l.sqlite"
    with Ledger(path) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value="secret", space="o", actor="a")
        for i in range(5):
            ledger.assert_fact(subject=f"t{i}", predicate="p", value=i, space="o", actor="a")
    with sqlite3.connect(path) as db:
        (before,) = db.execute("SELECT json FROM events WHERE seq = 1").fetchone()
    with Ledger(path) as ledger:
        ledger.forget(fact_id=fact.fact_id, actor="a", reason="gdpr")
        ledger.assert_fact(subject="u", predicate="p", value=0, space="o", actor="a")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE events SET json = ? WHERE seq = 1", (before,))
    with Ledger(path, chain=False, forget_mode="plain") as ledger:
        expected = verify_lines(ledger.backend.stored_events())
        chunks = ledger.backend.stored_chunks(3)
        assert chunks is not None
        with worker_pool(2) as pool:
            report = verify_stored(chunks, executor=pool)
    assert asdict(report) == asdict(expected)
    assert report.first is not None and report.first.seq == 1
    assert "a forget event (7) erased it" in report.first.reason
