"""SQLite specifics: SPEC 3 layout and pragmas, routing, pushdown, batches, refused values.

Files written by others (the TypeScript implementation, older layouts):
``test_sqlite_written_by_others.py``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlite_support import SPEC_DDL, SPEC_INDEXES, assert_plan, index_columns

from agent_custody_state import Ledger, LedgerError, open_store
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.model import AssertEvent
from agent_custody_state_events_sqlite.store import SqliteBackend
from agent_custody_state_sql.schema import event_row

# -- layout, pragmas, routing -------------------------------------------------------------------


def test_layout_is_spec_section_3(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    SqliteBackend(path).close()
    with sqlite3.connect(path) as db:
        (ddl,) = db.execute("SELECT sql FROM sqlite_master WHERE name='events'").fetchone()
    assert ddl == SPEC_DDL
    assert index_columns(path) == SPEC_INDEXES


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
        event = assert_plan(ledger)
        odd = AssertEvent("e-odd", "2026-09-01T02:00:00+02:00", event.fact.with_(fact_id="odd"))
        with ledger.backend.transaction():
            ledger.backend.append([odd])
    with sqlite3.connect(tmp_path / "l.sqlite") as db:
        row = db.execute("SELECT tx_time, json FROM events WHERE fact_id='odd'").fetchone()
    assert row[0] == "2026-09-01T00:00:00.000Z"
    assert json.loads(row[1])["txTime"] == "2026-09-01T02:00:00+02:00"  # the wire JSON verbatim


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
        a = assert_plan(ledger)
        b = assert_plan(ledger, supersedes=a.fact_id, value="v2")
        ledger.retract(fact_id=b.fact_id, actor="x", reason="r")
        statements = _traced(ledger.backend)  # type: ignore[arg-type]
        ledger.as_of(subject="acct:42")
        ledger.as_of(subject="s3", predicate="p1")
        ledger.as_of(space="sp2", tx_at="2020-01-01T00:00:00Z")
        ledger.get(a.fact_id)
        ledger.history(a.fact_id)
        ledger.spaces()
        ledger.learned_before("2020-01-01T00:00:00Z", space="sp1")
        assert_plan(ledger, supersedes=a.fact_id, value="v3")
    selects = [s for s in statements if s.lstrip().upper().startswith(("SELECT", "WITH"))]
    assert len(selects) >= 8
    for sql in selects:
        plan = _plan(path, sql)
        scans = [
            step
            for step in plan.split(" | ")
            if step.startswith("SCAN events") and "INDEX" not in step
        ]
        assert not scans, f"full scan in {sql!r}: {plan}"


def test_a_chained_append_asks_the_data_version_once(tmp_path: Path) -> None:
    """The remembered chain head is checked with one ``PRAGMA data_version`` per append, read
    inside the write section (none after its commit), and another connection's commit between
    two appends still makes the next one read the head from the table."""
    path = tmp_path / "l.sqlite"
    with Ledger(path) as ledger, Ledger(path) as other:
        assert_plan(ledger)
        statements = _traced(ledger.backend)  # type: ignore[arg-type]
        assert_plan(ledger, value="v2")
        assert_plan(ledger, value="v3")
        versions = [s for s in statements if "data_version" in s]
        assert len(versions) == 2, statements
        other.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
        statements.clear()
        assert_plan(ledger, value="v4")
        assert any(s.lstrip().upper().startswith("SELECT") for s in statements), statements
        assert ledger.chain_head() == other.chain_head()
        assert ledger.chain_head().seq == 5


def test_a_supersession_is_checked_with_one_question(tmp_path: Path) -> None:
    """Whether the new fact id is taken, the superseded fact's assert and what decides its
    state (rules 2.1) come from one statement (the walk of ``events_along``)."""
    with Ledger(tmp_path / "l.sqlite") as ledger:
        a = assert_plan(ledger)
        statements = _traced(ledger.backend)  # type: ignore[arg-type]
        assert_plan(ledger, supersedes=a.fact_id, value="v2")
    selects = [s for s in statements if s.lstrip().upper().startswith(("SELECT", "WITH"))]
    assert len(selects) == 1 and selects[0].startswith("WITH RECURSIVE"), statements


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
        # one write section and one commit (one fsync); no existence query: the ledger drew
        # every fact id of the batch
        assert [s for s in statements if s.startswith(("BEGIN", "COMMIT"))] == [
            "BEGIN IMMEDIATE",
            "COMMIT",
        ]
        # the chain head (one primary-key read of the last row) + count(), and the first
        # plain write's one look at the newest value of a ledger that records no mode
        # (``modemark.sealed_unmarked``, once per ledger object)
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
        a = assert_plan(source)
        assert_plan(source, supersedes=a.fact_id, value="v2")
        source.retract(fact_id=a.fact_id, actor="x", reason="r")
        exported = list(source.export())
    with Ledger(tmp_path / "b.sqlite") as target:
        assert target.import_events(iter(exported)) == 3
        assert [e.to_json() for e in target.export()] == [e.to_json() for e in exported]
    with sqlite3.connect(tmp_path / "b.sqlite") as db:
        assert db.execute("SELECT count(*) FROM events WHERE subject='acct:42'").fetchone() == (2,)


def test_event_row_for_assert_only_fills_query_columns() -> None:
    with Ledger("memory:") as ledger:
        a = assert_plan(ledger)
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
        with pytest.raises(LedgerError, match="lone surrogate"):  # refused before any backend
            ledger.assert_fact(subject="x\udfff", predicate="p", value=1, space="org", actor="a")
        with pytest.raises(EventBackendError, match="lone surrogate"):
            ledger.backend.get_assert("x\udfff")
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


def test_an_as_of_reads_no_hold_or_release_rows(tmp_path: Path) -> None:
    """An as-of needs no legal-hold state, so its one question leaves those rows out; its
    answer is the one the full question gives (the timeline keeps them)."""
    with Ledger(tmp_path / "l.sqlite") as ledger:
        fact = {"subject": "acct:1", "predicate": "plan", "space": "org", "actor": "a"}
        a = ledger.assert_fact(**fact, value="a")
        b = ledger.assert_fact(**fact, value="b", supersedes=a.fact_id)
        ledger.hold(fact_id=a.fact_id, actor="legal", reason="case")
        ledger.release(fact_id=a.fact_id, actor="legal", reason="closed")
        ledger.hold(fact_id=b.fact_id, actor="legal", reason="case")
        ledger.confirm(fact_id=b.fact_id, actor="gw")
        backend = ledger.backend
        found, around = backend.asserts_for_as_of(subject="acct:1")
        full_found, full = backend.asserts_around(subject="acct:1")
        assert found == full_found and [e.kind for e in around] == ["assert", "assert", "confirm"]
        assert [e.kind for e in full] == ["assert", "assert", "hold", "release", "hold", "confirm"]
        (current,) = ledger.as_of(subject="acct:1")
        assert (current.fact_id, current.provenance) == (b.fact_id, "attested")
        assert ledger.timeline("acct:1").held == [b.fact_id]


def test_events_along_follow_retracted_links_only(tmp_path: Path) -> None:
    """``events_along`` holds the direct superseders and, past a retracted one, the next link:
    ``get`` and a supersession check answer from it; a chain of live links is not read down."""
    with Ledger(tmp_path / "l.sqlite") as ledger:
        fact = {"subject": "acct:1", "predicate": "plan", "space": "org", "actor": "a"}
        ids = [ledger.assert_fact(**fact, value=0, valid_from="2026-01-01T00:00:00Z").fact_id]
        for n in range(1, 6):
            valid_from = f"2026-0{n + 1}-01T00:00:00Z"
            event = ledger.assert_fact(**fact, value=n, supersedes=ids[-1], valid_from=valid_from)
            ids.append(event.fact_id)
        backend = ledger.backend
        events, walked = backend.events_along([ids[0]])
        assert walked and {e.fact_id for e in events} == set(ids[:2])  # live link: one step
        ledger.retract(fact_id=ids[1], actor="x", reason="wrong")
        ledger.retract(fact_id=ids[2], actor="x", reason="wrong")
        events, _ = backend.events_along([ids[0]])
        assert {e.fact_id for e in events} == set(ids[:4])  # through 1 and 2, to 3
        asked: list[object] = []
        real = backend.events_around
        backend.events_around = lambda fact_ids: asked.append(fact_ids) or real(fact_ids)  # type: ignore[method-assign]
        got = ledger.get(ids[0])
        assert got is not None and got.valid_to == "2026-04-01T00:00:00.000Z"  # fact 3's start
        assert ledger.status(ids[0]) == ("superseded", False)
        with pytest.raises(Exception, match="already superseded"):
            ledger.assert_fact(**fact, value=9, supersedes=ids[0])
        assert asked == []  # no question beyond the one walk


def test_a_table_with_events_keeps_its_indexes_and_an_open_restores_lost_ones(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.sqlite"
    with Ledger(path) as ledger:
        assert_plan(ledger)
        backend: Any = ledger.backend
        with backend.indexes_deferred():
            assert index_columns(path) == SPEC_INDEXES  # not empty: nothing dropped
    with sqlite3.connect(path) as db:  # what a process that died inside an import leaves
        for (name,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
        ).fetchall():
            db.execute(f"DROP INDEX {name}")
    assert index_columns(path) != SPEC_INDEXES
    Ledger(path).close()
    assert index_columns(path) == SPEC_INDEXES
