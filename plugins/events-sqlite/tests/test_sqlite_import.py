"""An import into SQLite: the secondary indexes are dropped and built once, at the end, and
what a source that fails leaves (a failure part-way: ``test_sqlite_import_review.py``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlite_support import SPEC_INDEXES, index_columns

from agent_custody_state import Ledger
from agent_custody_state.ledger.model import AssertEvent


def _exported(n: int) -> list[AssertEvent]:
    with Ledger(":memory:") as source:
        source.assert_many(
            {"subject": f"s{i % 7}", "predicate": "p", "value": i, "space": "org", "actor": "a"}
            for i in range(n)
        )
        return [e for e in source.backend.iter_events() if isinstance(e, AssertEvent)]


def test_an_import_builds_the_indexes_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    events = _exported(30)
    seen: list[dict[str, list[str]]] = []
    with Ledger(path) as ledger:
        backend: Any = ledger.backend
        append = backend.append

        def watched(batch: Any) -> None:
            if backend.count() == 10:  # after the first batch of 10 went in: no secondary index
                seen.append(index_columns(path))
            append(batch)

        backend.append = watched
        assert ledger.import_events(events, batch_size=10) == 30
        assert ledger.count() == 30
    assert seen == [{}]
    assert index_columns(path) == SPEC_INDEXES
    with sqlite3.connect(path) as db:
        plan = db.execute("EXPLAIN QUERY PLAN SELECT * FROM events WHERE fact_id = 'x'").fetchall()
    assert "USING INDEX" in str(plan)


def test_a_source_that_fails_writes_nothing(tmp_path: Path) -> None:
    """The export is read whole and checked before the first event is written."""
    path = tmp_path / "l.sqlite"
    events = _exported(12)

    def broken() -> Any:
        yield from events[:10]
        raise OSError("the export file went away")

    with Ledger(path) as ledger, pytest.raises(OSError, match="went away"):
        ledger.import_events(broken(), batch_size=5)
    assert index_columns(path) == SPEC_INDEXES
    with Ledger(path) as again:
        assert again.count() == 0
