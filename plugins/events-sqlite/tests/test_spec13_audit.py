"""SPEC 1.1's types on a SQLite ledger (audit, 2026-12-06): a hand-edited row whose fact has
``validFrom: null`` failed an as-of read with a bare ``TypeError`` (the time comparison); it is
now named by its ``seq``, as a row with a number for ``txTime`` already was."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import EventBackendError, Ledger

EDITS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "validFrom-null": (lambda d: d["fact"].__setitem__("validFrom", None), "validFrom"),
    "space-number": (lambda d: d["fact"].__setitem__("space", 7), "space"),
}


def _clock() -> datetime:
    return datetime(2026, 9, 1, tzinfo=UTC)


@pytest.mark.parametrize("case", list(EDITS))
def test_an_as_of_read_names_a_row_of_the_wrong_type(tmp_path: Path, case: str) -> None:
    edit, field = EDITS[case]
    path = tmp_path / "l.sqlite"
    with Ledger(path, chain=False, clock=_clock) as ledger:
        for subject in ("a", "b"):
            ledger.assert_fact(subject=subject, predicate="p", value=1, space="o", actor="x")
    db = sqlite3.connect(path)
    data = json.loads(db.execute("SELECT json FROM events WHERE seq = 2").fetchone()[0])
    edit(data)
    db.execute("UPDATE events SET json = ? WHERE seq = 2", (json.dumps(data),))
    db.commit()
    db.close()
    with Ledger(path, clock=_clock) as ledger, pytest.raises(EventBackendError) as caught:
        ledger.as_of(space="o")
    assert "the event with seq 2 is not a valid event" in str(caught.value)
    assert f"{field} must be text" in str(caught.value)
