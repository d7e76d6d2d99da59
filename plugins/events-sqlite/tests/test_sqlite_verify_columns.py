"""``verify`` on a SQLite ledger also compares the query columns with the stored JSON: the chain
covers the JSON, reads go by the columns, so an edited column that hides a fact is a failure
named at its event (``EventBackend.index_problems``)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main


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
