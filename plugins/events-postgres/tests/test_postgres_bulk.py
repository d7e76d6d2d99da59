"""The PostgreSQL bulk path: a batch is appended with COPY, and the rows it writes are exactly
the rows single appends (a prepared INSERT each) write; a refused batch leaves nothing."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.model import AssertEvent, Event, Fact, RetractEvent, Source
from agent_custody_state_events_postgres.location import parse_location
from agent_custody_state_events_postgres.store import COPY_MIN

pytestmark = pytest.mark.postgres

T = "2025-01-01T00:00:00.000Z"


def _events() -> list[Event]:
    """Events whose text needs COPY's escaping: tabs, newlines, backslashes, quotes, non-ASCII,
    a null column and an unknown key."""
    value = {"text": 'tab\there\nnew line \\ back\\slash "q" é 日本 \U0001f600', "n": [1, None]}
    first = AssertEvent(
        "e-1", T, Fact("f-1", "acct:\t1", "plan", value, "org", "a\\b", valid_from=T), None
    )
    second = AssertEvent(
        "e-2",
        T,
        Fact("f-2", "acct:\t1", "plan", "x", "org", "b", Source("r\n1"), valid_from=T),
        "f-1",
    )
    third = RetractEvent("e-3", T, "f-2", "c", "why\r\nnot", Source(None), {"note": "\\N"})
    return [first, second, third]


def _rows(url: str, table: str) -> list[tuple[Any, ...]]:
    where = parse_location(f"{url}&table={table}")
    with psycopg.connect(where.connect_url.replace("postgresql+psycopg", "postgresql")) as conn:
        return conn.execute(
            "SELECT seq, event_id, kind, tx_time, fact_id, space, subject, predicate, "
            f"supersedes, json FROM {table} ORDER BY seq"
        ).fetchall()


def test_copy_rows_equal_insert_rows(postgres_url: str) -> None:
    events = _events()
    assert len(events) >= COPY_MIN  # the batch below goes through COPY
    with Ledger(f"{postgres_url}&table=by_copy", chain=False) as ledger:
        assert ledger.import_events(iter(events)) == len(events)
    with Ledger(f"{postgres_url}&table=by_insert", chain=False) as ledger:
        for event in events:  # one event per append: the prepared INSERT
            with ledger.backend.transaction():
                ledger.backend.append([event])
    copied, inserted = _rows(postgres_url, "by_copy"), _rows(postgres_url, "by_insert")
    assert copied == inserted
    assert [row[-1] for row in copied] == [e.to_json() for e in events]  # the wire text, as is
    with Ledger(f"{postgres_url}&table=by_copy") as ledger:
        assert [e.to_json() for e in ledger.export()] == [e.to_json() for e in events]


def test_refused_batch_writes_nothing(postgres_url: str) -> None:
    url = f"{postgres_url}&table=refused"
    with Ledger(url) as ledger:
        ledger.assert_many(
            [{"subject": "s", "predicate": "p", "value": 1, "space": "o", "actor": "a"}]
        )
        before = _rows(postgres_url, "refused")
        items = [
            {"subject": f"s{i}", "predicate": "p", "value": i, "space": "o", "actor": "a"}
            for i in range(50)
        ]
        items[37]["value"] = float("nan")
        with pytest.raises(LedgerError, match=r"^item 37: value: NaN is not JSON$"):
            ledger.assert_many(items)
        assert _rows(postgres_url, "refused") == before
        written = ledger.assert_many(items[:37])
        assert len({e.tx_time for e in written}) == 1  # one transaction, one transaction time
    assert len(_rows(postgres_url, "refused")) == len(before) + 37


def _statistics(url: str, table: str) -> tuple[float, Any]:
    where = parse_location(f"{url}&table={table}")
    with psycopg.connect(where.connect_url.replace("postgresql+psycopg", "postgresql")) as conn:
        row = conn.execute(
            "SELECT c.reltuples, s.last_analyze FROM pg_class c "
            "JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = to_regclass(%s)",
            (table,),
        ).fetchone()
        assert row is not None
        return float(row[0]), row[1]


def test_a_bulk_load_leaves_planner_statistics(postgres_url: str) -> None:
    """Planner statistics follow a bulk load (``statistics``): without them an as-of by
    subject on a freshly imported table is sequential scans. Autovacuum is off for the table,
    so only the writer can have analysed it; a small load (under ``ANALYZE_MIN``) does not."""
    from agent_custody_state_events_postgres.statistics import ANALYZE_MIN

    url = f"{postgres_url}&table=loaded"
    with Ledger(url, chain=False) as ledger:
        ledger.backend._exec("ALTER TABLE loaded SET (autovacuum_enabled = false)")  # type: ignore[attr-defined]
        items = [
            {"subject": f"s{i // 4}", "predicate": "p", "value": i, "space": "o", "actor": "a"}
            for i in range(ANALYZE_MIN + 500)
        ]
        ledger.assert_many(items[:500])
        assert _statistics(postgres_url, "loaded")[1] is None  # 500 rows: not yet
        for start in range(500, len(items), 2500):
            ledger.assert_many(items[start : start + 2500])
        rows, analysed = _statistics(postgres_url, "loaded")
        assert analysed is not None and abs(rows - len(items)) < len(items) / 10
        backend: Any = ledger.backend
        q = backend._q.asserts_around((False, True, False, True, True))  # an as-of by subject
        args = q.args({"subject": "s7", "tx_at": "2999-01-01T00:00:00.000Z"})
        plan = "\n".join(r[0] for r in backend._raw.execute("EXPLAIN " + q.sql, args))
    assert "Seq Scan" not in plan, plan


def test_a_bulk_load_does_not_wait_for_maintenance(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """While another session holds the lock ``VACUUM`` and ``ANALYZE`` take (autovacuum
    working on the table), the load's quick ``ANALYZE`` is skipped, not waited for, and that
    is no warning."""
    import threading

    from agent_custody_state_events_postgres.statistics import ANALYZE_MIN

    url = f"{postgres_url}&table=maintained"
    items = [
        {"subject": f"s{i}", "predicate": "p", "value": i, "space": "o", "actor": "a"}
        for i in range(ANALYZE_MIN)
    ]
    with Ledger(url, chain=False) as ledger:
        where = parse_location(url)
        dsn = where.connect_url.replace("postgresql+psycopg", "postgresql")
        with psycopg.connect(dsn, autocommit=True) as other:
            other.execute("BEGIN")
            other.execute("LOCK TABLE maintained IN SHARE UPDATE EXCLUSIVE MODE")
            loaded = threading.Thread(target=ledger.assert_many, args=(items,), daemon=True)
            try:
                loaded.start()
                loaded.join(timeout=30)
                finished = not loaded.is_alive()
            finally:
                other.execute("COMMIT")  # a waiting ANALYZE would go on now
                loaded.join(timeout=30)
        assert finished, "the load waited for the lock"
        assert ledger.count() == ANALYZE_MIN
    assert not [r for r in caplog.records if "ANALYZE" in r.getMessage()]


def test_a_quick_analyze_that_fails_leaves_the_connection_usable(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The quick ``ANALYZE`` runs in ``BEGIN ... COMMIT`` of its own; one the server ends with
    an error (here a statement timeout; a cancel does the same) left that transaction open and
    aborted, and every later statement of the connection failed ("current transaction is
    aborted") until a write section happened to roll it back."""
    from agent_custody_state_events_postgres.statistics import ANALYZE_MIN

    with Ledger(f"{postgres_url}&table=cancelled", chain=False) as ledger:
        ledger.assert_many(
            [
                {"subject": f"s{i}", "predicate": "p", "value": i, "space": "o", "actor": "a"}
                for i in range(ANALYZE_MIN)
            ]
        )
        backend: Any = ledger.backend
        backend._raw.execute("SET statement_timeout = 1")
        backend._analyze()  # cancelled by the timeout: a warning, the write was committed
        assert [r for r in caplog.records if "ANALYZE after a bulk load" in r.getMessage()]
        backend._raw.execute("SET statement_timeout = 0")
        assert ledger.count() == ANALYZE_MIN
