"""SQLite specifics: SPEC 3 layout and pragmas, routing, files written by others, pushdown, batches."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger, open_store
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.model import AssertEvent
from agent_custody_state_events_sqlite.store import SqliteBackend
from agent_custody_state_sql.schema import event_row

SPEC_DDL = (
    "CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL UNIQUE, "
    "kind TEXT NOT NULL, tx_time TEXT NOT NULL, fact_id TEXT NOT NULL, space TEXT, subject TEXT, "
    "predicate TEXT, supersedes TEXT, json TEXT NOT NULL)"
)
SPEC_INDEXES = {
    "events_fact": ["fact_id"],
    "events_subject": ["subject", "predicate"],
    "events_space": ["space", "tx_time"],
    "events_supersedes": ["supersedes"],
    "events_tx": ["tx_time"],
}


def _indexes(path: Path) -> dict[str, list[str]]:
    with sqlite3.connect(path) as db:
        names = [
            r[0]
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type='index' AND tbl_name='events' "
                "AND name NOT LIKE 'sqlite_autoindex%'"
            )
        ]
        return {n: [r[2] for r in db.execute(f"PRAGMA index_info({n})")] for n in names}


def _columns(path: Path) -> list[tuple[str, str, int, int]]:
    with sqlite3.connect(path) as db:
        return [(r[1], r[2], r[3], r[5]) for r in db.execute("PRAGMA table_info(events)")]


def _assert(ledger: Ledger, **kw: Any) -> AssertEvent:
    args: dict[str, Any] = {
        "subject": "acct:42",
        "predicate": "plan",
        "value": "pro",
        "space": "org",
        "actor": "agent",
    }
    args.update(kw)
    return ledger.assert_fact(**args)


# -- layout, pragmas, routing -------------------------------------------------------------------


def test_layout_is_spec_section_3(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    SqliteBackend(path).close()
    with sqlite3.connect(path) as db:
        (ddl,) = db.execute("SELECT sql FROM sqlite_master WHERE name='events'").fetchone()
    assert ddl == SPEC_DDL
    assert _indexes(path) == SPEC_INDEXES


def test_pragmas(tmp_path: Path) -> None:
    with SqliteBackend(tmp_path / "l.sqlite") as store:
        raw = store._conn.connection.driver_connection
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert raw.execute("PRAGMA secure_delete").fetchone()[0] == 1


@pytest.mark.parametrize("name", ["a.sqlite", "b.db", "C.SQLITE", "d.DB"])
def test_routing_by_suffix(tmp_path: Path, name: str) -> None:
    with open_store(tmp_path / name) as store:
        assert isinstance(store, SqliteBackend)
        assert store.kind == "sqlite"
        assert store.location == str(tmp_path / name)


def test_path_with_url_characters(tmp_path: Path) -> None:
    path = tmp_path / "odd?name#x %41.sqlite"
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
    assert path.exists() and [p.name for p in tmp_path.iterdir() if p.suffix == ".sqlite"] == [
        path.name
    ]
    with Ledger(path) as again:
        assert again.count() == 1


def test_tx_time_column_is_normalised(tmp_path: Path) -> None:
    """A hand-written event with an offset time is stored under its UTC instant."""
    with Ledger(tmp_path / "l.sqlite") as ledger:
        event = _assert(ledger)
        odd = AssertEvent("e-odd", "2026-09-01T02:00:00+02:00", event.fact.with_(fact_id="odd"))
        with ledger.backend.transaction():
            ledger.backend.append([odd])
    with sqlite3.connect(tmp_path / "l.sqlite") as db:
        row = db.execute("SELECT tx_time, json FROM events WHERE fact_id='odd'").fetchone()
    assert row[0] == "2026-09-01T00:00:00.000Z"
    assert json.loads(row[1])["txTime"] == "2026-09-01T02:00:00+02:00"  # the wire JSON verbatim


# -- files written by others --------------------------------------------------------------------

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
        new = _assert(
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
    assert _indexes(path) == SPEC_INDEXES
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
        good = _assert(ledger)
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


# -- queries go to the indexes -------------------------------------------------------------------


def _traced(store: SqliteBackend) -> list[str]:
    statements: list[str] = []
    store._conn.connection.driver_connection.set_trace_callback(statements.append)
    return statements


def _plan(path: Path, sql: str) -> str:
    with sqlite3.connect(path) as db:
        return " | ".join(r[3] for r in db.execute("EXPLAIN QUERY PLAN " + sql))


def test_reads_use_indexes(tmp_path: Path) -> None:
    """Every statement behind a filtered read or a rule check is an index search, no scan."""
    path = tmp_path / "l.sqlite"
    with Ledger(path) as ledger:
        ledger.assert_many(
            {
                "subject": f"s{i % 50}",
                "predicate": f"p{i % 3}",
                "value": i,
                "space": f"sp{i % 4}",
                "actor": "a",
            }
            for i in range(600)
        )
        a = _assert(ledger)
        b = _assert(ledger, supersedes=a.fact_id, value="v2")
        ledger.retract(fact_id=b.fact_id, actor="x", reason="r")
        statements = _traced(ledger.backend)  # type: ignore[arg-type]
        ledger.as_of(subject="acct:42")
        ledger.as_of(subject="s3", predicate="p1")
        ledger.as_of(space="sp2", tx_at="2020-01-01T00:00:00Z")
        ledger.get(a.fact_id)
        ledger.history(a.fact_id)
        ledger.spaces()
        ledger.learned_before("2020-01-01T00:00:00Z", space="sp1")
        _assert(ledger, supersedes=a.fact_id, value="v3")
    selects = [s for s in statements if s.lstrip().upper().startswith(("SELECT", "WITH"))]
    assert len(selects) >= 10
    for sql in selects:
        plan = _plan(path, sql)
        scans = [
            step
            for step in plan.split(" | ")
            if step.startswith("SCAN events") and "INDEX" not in step
        ]
        assert not scans, f"full scan in {sql!r}: {plan}"


# -- batches --------------------------------------------------------------------------------------


def test_assert_many_is_one_transaction(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with Ledger(path) as ledger:
        statements = _traced(ledger.backend)  # type: ignore[arg-type]
        events = ledger.assert_many(
            {"subject": f"s{i}", "predicate": "p", "value": i, "space": "bulk", "actor": "a"}
            for i in range(5000)
        )
        assert len(events) == 5000 and ledger.count() == 5000
        # one write section and one commit (one fsync), one existence query for the batch
        assert [s for s in statements if s.startswith(("BEGIN", "COMMIT"))] == [
            "BEGIN IMMEDIATE",
            "COMMIT",
        ]
        # + the chain head (one primary-key read of the last row) + count()
        assert len([s for s in statements if s.startswith("SELECT")]) == 3
        with pytest.raises(Exception, match="item 1: fact s-dup already exists"):
            ledger.assert_many(
                [
                    {
                        "subject": "x",
                        "predicate": "p",
                        "value": 1,
                        "space": "b",
                        "actor": "a",
                        "fact_id": "s-dup",
                    },
                    {
                        "subject": "x",
                        "predicate": "p",
                        "value": 2,
                        "space": "b",
                        "actor": "a",
                        "fact_id": "s-dup",
                    },
                ]
            )
        assert ledger.count() == 5000


def test_import_round_trip(tmp_path: Path) -> None:
    with Ledger(tmp_path / "a.sqlite") as source:
        a = _assert(source)
        _assert(source, supersedes=a.fact_id, value="v2")
        source.retract(fact_id=a.fact_id, actor="x", reason="r")
        exported = list(source.export())
    with Ledger(tmp_path / "b.sqlite") as target:
        assert target.import_events(iter(exported)) == 3
        assert [e.to_json() for e in target.export()] == [e.to_json() for e in exported]
    with sqlite3.connect(tmp_path / "b.sqlite") as db:
        assert db.execute("SELECT count(*) FROM events WHERE subject='acct:42'").fetchone() == (2,)


def test_event_row_for_assert_only_fills_query_columns() -> None:
    with Ledger("memory:") as ledger:
        a = _assert(ledger)
        r = ledger.retract(fact_id=a.fact_id, actor="x", reason="r")
    assert event_row(a)["subject"] == "acct:42"
    assert {k: event_row(r)[k] for k in ("space", "subject", "predicate", "supersedes")} == {
        "space": None,
        "subject": None,
        "predicate": None,
        "supersedes": None,
    }


def test_lone_surrogates_are_refused_cleanly(tmp_path: Path) -> None:
    """A Python str with a lone surrogate has no UTF-8 form: storing or looking it up in a text
    column is an EventBackendError naming the ledger, not a raw UnicodeEncodeError (which the
    server reported as an internal error); inside the JSON (a value) it is escaped and kept."""
    with Ledger(tmp_path / "l.sqlite") as ledger:
        with pytest.raises(EventBackendError, match="lone surrogate"):
            ledger.assert_fact(subject="x\udfff", predicate="p", value=1, space="org", actor="a")
        with pytest.raises(EventBackendError, match="lone surrogate"):
            ledger.as_of(subject="\ud800")
        assert ledger.count() == 0
        ledger.assert_fact(subject="s", predicate="p", value="\ud800", space="org", actor="a")
        assert [f.value for f in ledger.facts()] == ["\ud800"]


def test_failed_commit_does_not_claim_nothing_was_written(tmp_path: Path) -> None:
    """A COMMIT that reached the database but whose answer was an error (a lost connection, a
    failed WAL fsync that the next open replays) may have committed: the error must say the
    outcome is unknown, never 'nothing was written', or a caller retries into a duplicate."""
    with Ledger(tmp_path / "l.sqlite") as ledger:
        store: Any = ledger.backend
        real_exec = store._exec

        def commit_then_fail(sql: str, *args: Any) -> Any:
            out = real_exec(sql, *args)
            if sql == "COMMIT":
                raise sqlite3.OperationalError("disk I/O error")
            return out

        store._exec = commit_then_fail
        with pytest.raises(EventBackendError, match="may or may not have been recorded") as err:
            ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
        assert "nothing was written" not in str(err.value)
        store._exec = real_exec
        assert ledger.count() == 1  # it had been recorded
