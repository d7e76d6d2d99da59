"""A hand-edited SQLite row whose JSON has a field of the wrong type (a list for ``factId``, a
number for ``txTime``) is named by its ``seq`` when read, as a row that is not JSON is: before,
a read failed far from it with a ``TypeError`` (a traceback on the command line)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import EventBackendError, Ledger
from agent_custody_state.cli import main

EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "factId": lambda d: d["fact"].__setitem__("factId", ["x"]),
    "txTime": lambda d: d.__setitem__("txTime", 5),
    "subject": lambda d: d["fact"].__setitem__("subject", {"a": 1}),
}


@pytest.mark.parametrize("field", list(EDITS))
def test_a_row_of_the_wrong_type_is_named_by_its_seq(
    tmp_path: Path, field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "l.sqlite"
    with Ledger(path, chain=False) as ledger:
        for subject in ("a", "b"):
            ledger.assert_fact(subject=subject, predicate="p", value=1, space="o", actor="x")
    db = sqlite3.connect(path)
    text = db.execute("SELECT json FROM events WHERE seq = 2").fetchone()[0]
    data = json.loads(text)
    EDITS[field](data)
    db.execute("UPDATE events SET json = ? WHERE seq = 2", (json.dumps(data),))
    db.commit()
    db.close()
    with Ledger(path, read_only=True) as ledger, pytest.raises(EventBackendError) as caught:
        list(ledger.backend.iter_events())
    assert "the event with seq 2 is not a valid event" in str(caught.value)
    assert f"{field} must be text" in str(caught.value)
    for argv in (["facts"], ["export", "--out", "-"]):
        assert main([*argv, "--ledger", str(path)]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: {path}: the event with seq 2 is not a valid event"), err
        assert len(err.splitlines()) == 1
