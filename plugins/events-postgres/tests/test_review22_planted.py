"""Twenty-second review: every built-in function the plugin's SQL calls is named in
``pg_catalog``, so a function of the same name planted in a schema earlier on the
``search_path`` never runs in its place, and every catalog relation it reads is named there too
(a view of the name planted earlier on the path could lie to it: who holds the horizon, which
files hold a table).

The schema ``planted`` holds a function (or aggregate) of each such name, with the built-in's
argument types (and, where the plugin passes another type, one with that type: an exact match
wins over the built-in's wherever it sits on the path); each records its call in
``planted.calls`` and returns what the built-in would. The ledger's connections put ``planted``
first (``options=-csearch_path=planted,pg_catalog,public`` in the URL). Across an open, writes,
reads, a forget, a crypto-shred ledger's writes, reads and forget, a reopen that finishes a
pending erasure, and ``verify``, none of them runs.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.ledger.parallel import verify_stored
from agent_custody_state_events_postgres.location import libpq_url, parse_location

FACT = {"space": "o", "subject": "s", "predicate": "p", "actor": "a"}

#: (name, argument types, return type, how the built-in is called with ``$1``, ``$2``, ...)
PLANTED = [
    ("pg_advisory_xact_lock", "bigint", "void", "PERFORM pg_catalog.pg_advisory_xact_lock($1)"),
    ("pg_advisory_xact_lock_shared", "bigint", "void", "PERFORM {q}($1)"),
    ("pg_try_advisory_lock", "bigint", "boolean", "RETURN {q}($1)"),
    ("pg_advisory_unlock", "bigint", "boolean", "RETURN {q}($1)"),
    ("txid_current", "", "bigint", "RETURN {q}()"),
    ("to_regclass", "text", "regclass", "RETURN {q}($1)"),
    ("current_schema", "", "name", "RETURN {q}()"),
    ("current_database", "", "name", "RETURN {q}()"),
    ("current_setting", "text", "text", "RETURN {q}($1)"),
    ("pg_backend_pid", "", "integer", "RETURN {q}()"),
    ("age", "xid", "integer", "RETURN {q}($1)"),
    ("has_table_privilege", "oid, text", "boolean", "RETURN {q}($1, $2)"),
    ("has_schema_privilege", "text, text", "boolean", "RETURN {q}($1, $2)"),
    ("has_schema_privilege", "name, text", "boolean", "RETURN {q}($1::text, $2)"),
    ("has_function_privilege", "oid, text", "boolean", "RETURN {q}($1, $2)"),
    ("pg_has_role", "oid, text", "boolean", "RETURN {q}($1, $2)"),
    ("pg_relation_filepath", "regclass", "text", "RETURN {q}($1)"),
    ("pg_relation_filepath", "oid", "text", "RETURN {q}($1::regclass)"),
    ("pg_logical_emit_message", "boolean, text, text", "pg_lsn", "RETURN {q}($1, $2, $3)"),
    ("unnest", "text[]", "SETOF text", "RETURN QUERY SELECT * FROM {q}($1)"),
]

#: The catalog relations the plugin reads, with the columns a view of each name in ``planted``
#: shows (all but where some are of the pseudo-type ``anyarray``): the view records its use.
CATALOGS = {
    "pg_class": "*",
    "pg_namespace": "*",
    "pg_proc": "*",
    "pg_attribute": "attrelid, attname, atttypid",
    "pg_database": "*",
    "pg_index": "*",
    "pg_stats": "schemaname, tablename, attname",
    "pg_stat_activity": "*",
    "pg_replication_slots": "*",
    "pg_prepared_xacts": "*",
}


def plant(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    conn.execute("CREATE SCHEMA planted")
    conn.execute("CREATE TABLE planted.calls (name text)")
    for name, args, returns, body in PLANTED:
        call = body.format(q=f"pg_catalog.{name}")
        conn.execute(
            f"CREATE FUNCTION planted.{name}({args}) RETURNS {returns} LANGUAGE plpgsql AS $$ "
            f"BEGIN INSERT INTO planted.calls VALUES ('{name}'); {call}; END $$"
        )
    conn.execute(
        "CREATE FUNCTION planted.or_step(boolean, boolean) RETURNS boolean LANGUAGE plpgsql AS "
        "$$ BEGIN INSERT INTO planted.calls VALUES ('bool_or'); RETURN $1 OR $2; END $$"
    )
    conn.execute(
        "CREATE AGGREGATE planted.bool_or(boolean) (sfunc = planted.or_step, stype = bool)"
    )
    conn.execute(
        "CREATE FUNCTION planted.seen(text) RETURNS boolean LANGUAGE plpgsql AS "
        "$$ BEGIN INSERT INTO planted.calls VALUES ($1); RETURN true; END $$"
    )
    for name, columns in CATALOGS.items():
        conn.execute(
            f"CREATE VIEW planted.{name} AS SELECT {columns} FROM pg_catalog.{name} "
            f"WHERE planted.seen('{name}')"
        )


@pytest.fixture
def planted_url(postgres_url: str) -> str:
    """The test's database with ``planted`` in it, as a location whose connections put it
    first on the ``search_path``."""
    with psycopg.connect(libpq_url(parse_location(postgres_url).connect_url)) as conn:
        plant(conn)
    return f"{postgres_url}&options={quote('-csearch_path=planted,pg_catalog,public')}"


def calls(url: str) -> list[str]:
    with psycopg.connect(libpq_url(parse_location(url).connect_url), autocommit=True) as conn:
        return [str(row[0]) for row in conn.execute("SELECT name FROM planted.calls")]


def verified(led: Ledger) -> None:
    """``verify``'s check: the stored chunks read on connections of their own (``_reader``)."""
    backend: Any = getattr(led.backend, "inner", led.backend)  # crypto-shred: the events'
    assert verify_stored(backend.stored_chunks(100), jobs=1).ok


def test_the_planted_functions_run_when_called_by_their_bare_names(planted_url: str) -> None:
    """The probe's premise: on such a connection a bare name runs the planted function."""
    with psycopg.connect(libpq_url(parse_location(planted_url).connect_url)) as conn:
        conn.execute("SELECT to_regclass('planted.calls'), txid_current()")
        conn.execute("SELECT count(*) FROM pg_namespace")
    assert sorted(set(calls(planted_url))) == ["pg_namespace", "to_regclass", "txid_current"]


def test_no_planted_function_runs(planted_url: str, embedded_postgres: Any) -> None:
    with embedded_postgres.scannable():  # the certificate's byte scan reads the catalog
        planted_and_used(planted_url)


def planted_and_used(planted_url: str) -> None:
    with Ledger(planted_url, checkpoint_key=Ed25519PrivateKey.generate()) as led:  # forget too
        fact = led.assert_fact(**FACT, value="v1")
        led.assert_many([{**FACT, "subject": f"s{i}", "value": i} for i in range(3)])
        assert led.get(fact.fact_id) is not None
        led.forget(fact_id=fact.fact_id, actor="a", reason="r", certificate=True)
        verified(led)
    keys = f"{planted_url}&table=keys"
    with Ledger(f"{planted_url}&table=shred", forget_mode="crypto-shred", key_store=keys) as led:
        fact = led.assert_fact(**FACT, value="secret")
        got = led.get(fact.fact_id)
        assert got is not None and got.value == "secret"
        led.forget(fact_id=fact.fact_id, actor="a", reason="r")
        verified(led)
    with psycopg.connect(libpq_url(parse_location(planted_url).connect_url)) as conn:
        for table in ("events_erasure", "keys_erasure"):  # a compaction left pending
            conn.execute(
                f"INSERT INTO {table} VALUES ('erasure_pending', pg_catalog.txid_current()::text)"
            )
    with Ledger(f"{planted_url}&table=shred", forget_mode="crypto-shred", key_store=keys):
        pass
    with Ledger(planted_url) as led:  # finishes the pending erasure
        verified(led)
    assert calls(planted_url) == []
