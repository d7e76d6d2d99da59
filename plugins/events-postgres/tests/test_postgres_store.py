"""Postgres specifics: location parsing, table names, layout, jsonb tables, VACUUM, erasure bytes."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest

from agent_custody_state import Ledger, open_store
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state_conformance.postgres import EmbeddedPostgres
from agent_custody_state_events_postgres.location import LocationError, parse_location
from agent_custody_state_events_postgres.store import PostgresBackend

pytestmark = pytest.mark.postgres

URL = "postgresql://alice:s3cr%40t@db.example:5433/app?sslmode=require"


# -- location -------------------------------------------------------------------------------------


def test_location_strips_ledger_parameters_and_hides_password() -> None:
    where = parse_location(URL + "&table=ledger.events&vacuum=false")
    assert where.connect_url == (
        "postgresql+psycopg://alice:s3cr%40t@db.example:5433/app?sslmode=require"
    )
    assert (where.schema, where.table, where.vacuum) == ("ledger", "events", False)
    assert where.display == (
        "postgresql://alice:***@db.example:5433/app?sslmode=require&table=ledger.events"
        "&vacuum=false"
    )
    assert "s3cr" not in where.display
    shown = parse_location("postgres://bob@/db?host=/run/pg&password=hunter2").display
    assert shown == "postgres://bob@/db?host=/run/pg&password=***"
    shown = parse_location(
        "postgres://bob@/db?sslmode=verify-full&sslpassword=keypass&sslkey=/k.pem&x_token=t0k"
    ).display
    assert shown == (
        "postgres://bob@/db?sslmode=verify-full&sslpassword=***&sslkey=/k.pem&x_token=***"
    )
    assert "keypass" not in shown and "t0k" not in shown


@pytest.mark.parametrize(
    "table",
    [
        "Events",
        "events;drop table x",
        "a.b.c",
        "1events",
        "ev-ents",
        "",
        "public.",
        '"events"',
        "événements",
    ],
)
def test_table_name_must_be_plain(table: str) -> None:
    expected = (
        "postgres: table name must be a plain identifier, optionally schema-qualified; "
        f'got "{table}"'
    )
    with pytest.raises(LocationError) as info:
        parse_location(f"postgresql://u@h/db?table={table}")
    assert str(info.value) == expected
    with pytest.raises(EventBackendError) as info2:
        PostgresBackend(f"postgresql://u@h/db?table={table}")  # refused before connecting
    assert str(info2.value) == expected


def test_vacuum_parameter_is_checked() -> None:
    with pytest.raises(LocationError, match='^postgres: vacuum must be true or false; got "x"$'):
        parse_location("postgresql://u@h/db?vacuum=x")


def test_password_never_shown(postgres_url: str, embedded_postgres: EmbeddedPostgres) -> None:
    password = embedded_postgres.password
    with open_store(f"{postgres_url}&table=shown") as store:
        assert isinstance(store, PostgresBackend) and store.kind == "postgres"
        assert password not in store.location and password not in str(store.describe())
        assert "custody:***@" in store.location and "table=shown" in store.location
    with Ledger(postgres_url) as ledger:
        assert password not in ledger.location
    wrong = postgres_url.replace(password, "not-the-password")
    with pytest.raises(EventBackendError) as info:
        PostgresBackend(wrong)
    assert "not-the-password" not in str(info.value) and password not in str(info.value)
    assert "custody:***@" in str(info.value)


# -- layout ---------------------------------------------------------------------------------------


def _admin(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True)


def _index_defs(url: str, schema: str, table: str) -> dict[str, str]:
    with _admin(url) as conn:
        rows = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = %s",
            (schema, table),
        ).fetchall()
    return {name: definition.split(" USING btree ")[1] for name, definition in rows}


def test_layout_and_index_names(postgres_url: str) -> None:
    PostgresBackend(postgres_url).close()
    PostgresBackend(f"{postgres_url}&table=ledger.events").close()
    with _admin(postgres_url) as conn:
        columns = conn.execute(
            "SELECT column_name, data_type, is_nullable, column_default FROM "
            "information_schema.columns WHERE table_schema='public' AND table_name='events' "
            "ORDER BY ordinal_position"
        ).fetchall()
    assert [(c[0], c[1], c[2]) for c in columns] == [
        ("seq", "bigint", "NO"),
        ("event_id", "text", "NO"),
        ("kind", "text", "NO"),
        ("tx_time", "text", "NO"),
        ("fact_id", "text", "NO"),
        ("space", "text", "YES"),
        ("subject", "text", "YES"),
        ("predicate", "text", "YES"),
        ("supersedes", "text", "YES"),
        ("json", "text", "NO"),
    ]
    assert columns[0][3].startswith("nextval(")  # BIGSERIAL
    expected = {
        "fact": "(fact_id)",
        "subject": "(subject, predicate)",
        "space": "(space, tx_time)",
        "supersedes": "(supersedes)",
        "tx": "(tx_time)",
    }
    defs = _index_defs(postgres_url, "public", "events")
    assert {k: v for k, v in defs.items() if not k.endswith(("_pkey", "_key"))} == {
        f"events_{k}": v for k, v in expected.items()
    }
    defs = _index_defs(postgres_url, "ledger", "events")
    assert {k: v for k, v in defs.items() if not k.endswith(("_pkey", "_key"))} == {
        f"ledger_events_{k}": v for k, v in expected.items()
    }


def test_tables_are_separate(postgres_url: str) -> None:
    with Ledger(f"{postgres_url}&table=one") as one, Ledger(f"{postgres_url}&table=two") as two:
        one.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
        assert (one.count(), two.count()) == (1, 0)


_OLD_ASSERT = {
    "eventId": "e-1",
    "kind": "assert",
    "txTime": "2026-08-01T10:00:00.000Z",
    "fact": {
        "factId": "f-1",
        "subject": "acct:42",
        "predicate": "plan",
        "value": "pro",
        "space": "org",
        "actor": "a",
        "source": {"receiptId": None},
        "provenance": "claimed",
        "validFrom": "2026-08-01T10:00:00.000Z",
        "validTo": None,
        "confidence": None,
    },
    "supersedes": None,
}


def test_jsonb_table_of_older_writers(postgres_url: str) -> None:
    """A table whose json column is jsonb is read, extended and forgotten in."""
    with _admin(postgres_url) as conn:
        conn.execute(
            "CREATE TABLE old_events (seq BIGSERIAL PRIMARY KEY, event_id TEXT NOT NULL UNIQUE, "
            "kind TEXT NOT NULL, tx_time TEXT NOT NULL, fact_id TEXT NOT NULL, space TEXT, "
            "subject TEXT, predicate TEXT, supersedes TEXT, json JSONB NOT NULL)"
        )
        conn.execute(
            "INSERT INTO old_events (event_id, kind, tx_time, fact_id, space, subject, predicate,"
            " json) VALUES ('e-1', 'assert', %s, 'f-1', 'org', 'acct:42', 'plan', %s::jsonb)",
            (_OLD_ASSERT["txTime"], json.dumps(_OLD_ASSERT)),
        )
    with Ledger(f"{postgres_url}&table=old_events") as ledger:
        [fact] = ledger.as_of(subject="acct:42")
        assert fact.to_dict() == _OLD_ASSERT["fact"]  # jsonb reorders keys; the model restores
        [event] = list(ledger.export())
        assert event.to_json() == json.dumps(_OLD_ASSERT, separators=(",", ":"))
        new = ledger.assert_fact(
            subject="acct:42",
            predicate="plan",
            value="enterprise",
            space="org",
            actor="a",
            supersedes="f-1",
        )
        ledger.forget(fact_id="f-1", actor="dpo", reason="erasure")
        assert [f.fact_id for f in ledger.as_of(subject="acct:42")] == [new.fact_id]
        assert ledger.get("f-1").value is None  # type: ignore[union-attr]
        batch = ledger.assert_many(  # a batch goes through COPY (text, for the jsonb column)
            [
                {"subject": "acct:43", "predicate": p, "value": 1, "space": "org", "actor": "a"}
                for p in ("plan", "seats")
            ]
        )
        assert [f.fact_id for f in ledger.as_of(subject="acct:43")] == [e.fact_id for e in batch]
    with _admin(postgres_url) as conn:
        kinds = conn.execute("SELECT kind, jsonb_typeof(json) FROM old_events ORDER BY seq")
        assert kinds.fetchall() == [
            ("assert", "object"),
            ("assert", "object"),
            ("forget", "object"),
            ("assert", "object"),
            ("assert", "object"),
        ]


def test_table_without_query_columns_is_migrated(postgres_url: str) -> None:
    with _admin(postgres_url) as conn:
        conn.execute(
            "CREATE TABLE older (seq BIGSERIAL PRIMARY KEY, event_id TEXT NOT NULL "
            "UNIQUE, kind TEXT NOT NULL, tx_time TEXT NOT NULL, fact_id TEXT NOT NULL, "
            "json TEXT NOT NULL)"
        )
        conn.execute(
            "INSERT INTO older (event_id, kind, tx_time, fact_id, json) VALUES "
            "('e-1', 'assert', %s, 'f-1', %s)",
            (_OLD_ASSERT["txTime"], json.dumps(_OLD_ASSERT, separators=(",", ":"))),
        )
    with Ledger(f"{postgres_url}&table=older") as ledger:
        assert [f.fact_id for f in ledger.as_of(subject="acct:42")] == ["f-1"]
        assert ledger.spaces() == ["org"]
    assert set(_index_defs(postgres_url, "public", "older")) >= {
        f"older_{s}" for s in ("fact", "subject", "space", "supersedes", "tx")
    }


# -- forget and VACUUM FULL ----------------------------------------------------------------------


def _filenode(url: str, table: str) -> int:
    with _admin(url) as conn:
        row = conn.execute("SELECT pg_relation_filenode(%s)", (table,)).fetchone()
    assert row is not None
    return int(row[0])


def _outside_wal(server: EmbeddedPostgres, needle: bytes) -> list[str]:
    server.checkpoint()  # every committed page is in the data files before we look
    found = server.files_containing(needle)
    return [
        str(p.relative_to(server.data_dir))
        for p in found
        if p.relative_to(server.data_dir).parts[0] != "pg_wal"
    ]


def test_forget_leaves_no_bytes_in_the_data_directory(
    postgres_url: str, embedded_postgres: EmbeddedPostgres
) -> None:
    marker = f"secret-{uuid.uuid4().hex}"
    with Ledger(f"{postgres_url}&table=erasure") as ledger:
        for i in range(30):
            ledger.assert_fact(
                subject=f"n{i}", predicate="p", value=f"keep-{i}", space="org", actor="a"
            )
        a = ledger.assert_fact(
            subject="dana", predicate="email", value=marker, space="user:d", actor="a"
        )
        b = ledger.assert_fact(
            subject="dana",
            predicate="email",
            value={"v": marker},
            space="user:d",
            actor="a",
            supersedes=a.fact_id,
        )
        assert _outside_wal(embedded_postgres, marker.encode()), "must be visible before"
        before = _filenode(postgres_url, "erasure")
        ledger.forget(fact_id=a.fact_id, actor="dpo", reason="erasure")
        ledger.forget(fact_id=b.fact_id, actor="dpo", reason="erasure")
        assert _filenode(postgres_url, "erasure") != before  # VACUUM FULL rewrote the table
        assert _outside_wal(embedded_postgres, marker.encode()) == []
        assert [f.value for f in ledger.as_of(subject="n3")] == ["keep-3"]


def test_vacuum_false_skips_vacuum_full(
    postgres_url: str, embedded_postgres: EmbeddedPostgres
) -> None:
    """``?vacuum=false``: the row is rewritten, the dead version stays until a vacuum."""
    marker = f"kept-{uuid.uuid4().hex}"
    with Ledger(f"{postgres_url}&table=novac&vacuum=false") as ledger:
        assert ledger.backend.vacuum is False  # type: ignore[attr-defined]
        a = ledger.assert_fact(subject="s", predicate="p", value=marker, space="org", actor="a")
        before = _filenode(postgres_url, "novac")
        ledger.forget(fact_id=a.fact_id, actor="dpo", reason="erasure")
        assert _filenode(postgres_url, "novac") == before
        assert ledger.get(a.fact_id).value is None  # type: ignore[union-attr]
        assert _outside_wal(embedded_postgres, marker.encode()), "the dead row version remains"


def test_reconnects_after_the_server_drops_the_connection(
    postgres_url: str, embedded_postgres: EmbeddedPostgres
) -> None:
    with Ledger(f"{postgres_url}&table=dropped") as ledger:
        a = ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
        pid = ledger.backend._raw.info.backend_pid  # type: ignore[attr-defined]
        with _admin(embedded_postgres.admin_url) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        assert ledger.get(a.fact_id) is not None  # a read reconnects
        pid = ledger.backend._raw.info.backend_pid  # type: ignore[attr-defined]
        with _admin(embedded_postgres.admin_url) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        ledger.retract(fact_id=a.fact_id, actor="a", reason="r")  # so does a write section
        assert ledger.count() == 2


def test_the_key_store_reconnects_after_the_server_drops_it(
    postgres_url: str, embedded_postgres: EmbeddedPostgres
) -> None:
    """Crypto-shred reads fetch keys with a prepared statement on a kept cursor: a connection
    the server dropped is replaced, and the next read opens values as before."""
    with Ledger(
        f"{postgres_url}&table=keysdropped",
        forget_mode="crypto-shred",
        key_store=f"{postgres_url}&table=keysdropped_keys",
    ) as ledger:
        a = ledger.assert_fact(subject="s", predicate="p", value={"v": 1}, space="org", actor="a")
        keys: Any = ledger.backend.keystore()
        for _ in range(3):  # past psycopg's threshold: the statement is prepared on the server
            assert [f.value for f in ledger.as_of(subject="s")] == [{"v": 1}]
        assert keys._cur is not None
        with _admin(embedded_postgres.admin_url) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (keys._conn.info.backend_pid,))
        assert [f.value for f in ledger.as_of(subject="s")] == [{"v": 1}]
        assert ledger.get(a.fact_id).value == {"v": 1}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("url", "shown"),
    [("postgresql://u:secret@h:notaport/db", "postgresql://u:***@h:notaport/db")],
)
def test_a_url_the_driver_cannot_read_is_a_backend_error(url: str, shown: str) -> None:
    """Not the driver's own exception (the command line showed its traceback), and never the
    password."""
    from agent_custody_state_events_postgres.store import PostgresBackend

    with pytest.raises(EventBackendError) as refused:
        PostgresBackend(url)
    assert str(refused.value).startswith(f"{shown}: not a PostgreSQL URL (")
    assert "secret" not in str(refused.value)
