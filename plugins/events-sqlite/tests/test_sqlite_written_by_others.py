"""SQLite files written by others: a file made by the TypeScript implementation opens and
extends, an older file without the query columns is migrated, and opening reads no event row."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlite_support import SPEC_DDL, SPEC_INDEXES, assert_plan, index_columns

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.ledger.backend import EventBackendError


def _columns(path: Path) -> list[tuple[str, str, int, int]]:
    with sqlite3.connect(path) as db:
        return [(r[1], r[2], r[3], r[5]) for r in db.execute("PRAGMA table_info(events)")]


_TS_ASSERT = {
    "eventId": "7d4c1a0e-1111-4b7a-9d42-000000000001",
    "kind": "assert",
    "txTime": "2026-08-01T10:00:00.000Z",
    "fact": {
        "factId": "0f1e2d3c-2222-4b7a-9d42-000000000001",
        "subject": "acct:42",
        "predicate": "plan",
        "value": {"tier": "pro", "seats": 5},
        "space": "org",
        "actor": "agent-7",
        "source": {"receiptId": "rcpt-1"},
        "provenance": "attested",
        "validFrom": "2026-08-01T10:00:00.000Z",
        "validTo": None,
        "confidence": 0.9,
    },
    "supersedes": None,
}
_TS_CONFIRM = {
    "eventId": "7d4c1a0e-1111-4b7a-9d42-000000000002",
    "kind": "confirm",
    "txTime": "2026-08-01T11:00:00.000Z",
    "factId": "0f1e2d3c-2222-4b7a-9d42-000000000001",
    "actor": "gw",
    "source": {"receiptId": "rcpt-2"},
    "futureKey": [1, 2],
}


def _ts_line(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


def test_typescript_written_file_opens(tmp_path: Path) -> None:
    """A file made by the TypeScript implementation (SPEC DDL, its rows) opens and extends."""
    path = tmp_path / "ts.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(SPEC_DDL)
        for name, cols in SPEC_INDEXES.items():
            db.execute(f"CREATE INDEX {name} ON events ({', '.join(cols)})")
        fact = _TS_ASSERT["fact"]
        db.execute(
            "INSERT INTO events (event_id, kind, tx_time, fact_id, space, subject, predicate, "
            "supersedes, json) VALUES (?,?,?,?,?,?,?,?,?)",
            (
                _TS_ASSERT["eventId"],
                "assert",
                _TS_ASSERT["txTime"],
                fact["factId"],
                fact["space"],
                fact["subject"],
                fact["predicate"],
                None,
                _ts_line(_TS_ASSERT),
            ),
        )
        db.execute(
            "INSERT INTO events (event_id, kind, tx_time, fact_id, json) VALUES (?,?,?,?,?)",
            (
                _TS_CONFIRM["eventId"],
                "confirm",
                _TS_CONFIRM["txTime"],
                _TS_CONFIRM["factId"],
                _ts_line(_TS_CONFIRM),
            ),
        )
    with Ledger(path) as ledger:
        assert ledger.count() == 2
        [fact_now] = ledger.as_of(subject="acct:42", include="attested")
        assert fact_now.value == {"tier": "pro", "seats": 5}
        assert [e.to_json() for e in ledger.export()] == [
            _ts_line(_TS_ASSERT),
            _ts_line(_TS_CONFIRM),
        ]  # unknown keys kept, order kept
        new = assert_plan(
            ledger, value={"tier": "enterprise"}, supersedes="0f1e2d3c-2222-4b7a-9d42-000000000001"
        )
    with sqlite3.connect(path) as db:
        row = db.execute(
            "SELECT kind, fact_id, space, subject, predicate, supersedes, json "
            "FROM events ORDER BY seq DESC LIMIT 1"
        ).fetchone()
    assert row[:6] == (
        "assert",
        new.fact_id,
        "org",
        "acct:42",
        "plan",
        "0f1e2d3c-2222-4b7a-9d42-000000000001",
    )
    assert row[6] == new.to_json()


def test_old_file_without_query_columns_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    later = dict(
        _TS_ASSERT,
        eventId="e-2",
        txTime="2026-08-02T10:00:00.000Z",
        supersedes=_TS_ASSERT["fact"]["factId"],
        fact=dict(
            _TS_ASSERT["fact"], factId="f-2", value="v2", validFrom="2026-08-02T10:00:00.000Z"
        ),
    )
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT "
            "NOT NULL UNIQUE, kind TEXT NOT NULL, tx_time TEXT NOT NULL, fact_id TEXT "
            "NOT NULL, json TEXT NOT NULL)"
        )
        db.execute("CREATE INDEX events_fact ON events (fact_id)")
        for event in (_TS_ASSERT, _TS_CONFIRM, later):
            db.execute(
                "INSERT INTO events (event_id, kind, tx_time, fact_id, json) VALUES (?,?,?,?,?)",
                (
                    event["eventId"],
                    event["kind"],
                    event["txTime"],
                    event.get("factId") or event["fact"]["factId"],
                    _ts_line(event),
                ),
            )
    with Ledger(path) as ledger:
        [current] = ledger.as_of(subject="acct:42")
        assert current.fact_id == "f-2"
        assert ledger.spaces() == ["org"]
        assert [e.event_id for e in ledger.history(_TS_ASSERT["fact"]["factId"])] == [
            _TS_ASSERT["eventId"],
            _TS_CONFIRM["eventId"],
            "e-2",
        ]
    assert [c[0] for c in _columns(path)] == [
        "seq",
        "event_id",
        "kind",
        "tx_time",
        "fact_id",
        "json",
        "space",
        "subject",
        "predicate",
        "supersedes",
    ]
    assert index_columns(path) == SPEC_INDEXES
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT kind, space, subject, predicate, supersedes FROM events ORDER BY seq"
        ).fetchall()
    assert rows == [
        ("assert", "org", "acct:42", "plan", None),
        ("confirm", None, None, None, None),
        ("assert", "org", "acct:42", "plan", _TS_ASSERT["fact"]["factId"]),
    ]


def test_open_does_not_read_events(tmp_path: Path) -> None:
    """Opening touches no event row: a corrupt row is reported only when it is read."""
    path = tmp_path / "l.sqlite"
    with Ledger(path) as ledger:
        good = assert_plan(ledger)
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO events (event_id, kind, tx_time, fact_id, json) "
            "VALUES ('bad', 'retract', '2026-01-01T00:00:00.000Z', 'f-bad', '{not json')"
        )
    with Ledger(path) as ledger:
        assert ledger.count() == 2
        assert ledger.get(good.fact_id) is not None
        with pytest.raises(EventBackendError, match=r"l\.sqlite: the event with seq 2 is not a "):
            ledger.history("f-bad")


def test_a_file_written_in_crypto_shred_mode_takes_no_plaintext_value(tmp_path: Path) -> None:
    """Its key store beside it (``<ledger>.keys``) tells a plain-mode opener the mode: reads
    and value-less events go on, values are refused (nothing written)."""
    path = tmp_path / "l.sqlite"
    fact = {"subject": "acct:1", "predicate": "plan", "space": "org", "actor": "a"}
    with Ledger(path, forget_mode="crypto-shred") as sealed:
        first = sealed.assert_fact(**fact, value="secret")
    with Ledger(path) as plain:
        mark = plain.backend.recorded_forget_mode()
        assert mark is not None and mark.mode == "crypto-shred"
        with pytest.raises(LedgerError, match="crypto-shred mode") as refused:
            plain.assert_fact(**fact, value="would be plaintext")
        assert refused.value.code == "crypto_shred" and plain.count() == 1
        plain.confirm(fact_id=first.fact_id, actor="ops")
    with Ledger(tmp_path / "plain.sqlite") as other:
        other.assert_fact(**fact, value="plain")
        assert other.backend.recorded_forget_mode() is None
