"""Twenty-first review: a PostgreSQL ledger touches only its own table's objects, whatever the
``search_path`` finds first; and ``verify``'s reader shows no password.

Two ledgers of one database whose names meet along the ``search_path`` (``tenant2.events`` and
a table ``tenant2_events``, whose indexes share the names ``tenant2_events_*``; an unqualified
``events`` and a table ``events`` made later in a schema found first) must never drop, write or
read the other's objects. ``migration.SchemaSetup`` drops its indexes named in its table's
schema, and names the table in the schema it was found in at open.
"""

from __future__ import annotations

import pickle
from typing import Any

import psycopg
import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state_conformance.postgres import EmbeddedPostgres
from agent_custody_state_events_postgres.store import PostgresBackend

pytestmark = pytest.mark.postgres

SECONDARY = ["fact", "space", "subject", "supersedes", "tx"]


def _indexes(url: str, schema: str, table: str) -> list[str]:
    """The secondary index suffixes of SPEC 3 on ``schema.table``, from the catalog."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = %s",
            (schema, table),
        ).fetchall()
    names = [str(row[0]) for row in rows]
    return sorted(s for s in SECONDARY if any(n.endswith(f"_{s}") for n in names))


def _rows(url: str, qualified: str) -> int:
    with psycopg.connect(url) as conn:
        row: Any = conn.execute(f"SELECT count(*) FROM {qualified}").fetchone()
    return int(row[0])


def test_a_bulk_load_drops_its_own_indexes_not_another_schemas(postgres_url: str) -> None:
    """Before: ``DROP INDEX IF EXISTS tenant2_events_fact`` (unqualified) was looked up along
    ``"$user", public`` and dropped the five indexes of ``public.tenant2_events`` (another
    ledger, which kept none after), while ``tenant2.events`` kept its own."""
    other = PostgresBackend(f"{postgres_url}&table=tenant2_events")
    mine = PostgresBackend(f"{postgres_url}&table=tenant2.events")
    try:
        assert _indexes(postgres_url, "public", "tenant2_events") == SECONDARY
        with mine.indexes_deferred():
            assert _indexes(postgres_url, "public", "tenant2_events") == SECONDARY
            assert _indexes(postgres_url, "tenant2", "events") == []
        assert _indexes(postgres_url, "tenant2", "events") == SECONDARY
        assert _indexes(postgres_url, "public", "tenant2_events") == SECONDARY
    finally:
        mine.close()
        other.close()


def test_an_open_ledger_keeps_its_table_when_one_of_the_name_appears_first(
    postgres_url: str,
) -> None:
    """Before: each statement looked ``events`` up along the ``search_path`` again, so once
    another ledger made ``later.events`` (``later`` first on the path, as a role's own schema
    is under ``"$user", public``) this open ledger wrote its next fact into that table, under
    its own locks (keyed on ``public.events``, found at open), and read that ledger's rows."""
    path = "&options=-csearch_path%3Dlater,public"
    with Ledger(f"{postgres_url}{path}") as mine:
        mine.assert_fact(space="s", subject="a", predicate="p", value=1, actor="t")
        with Ledger(f"{postgres_url}&table=later.events") as other:
            other.assert_fact(space="s", subject="b", predicate="p", value=2, actor="t")
            mine.assert_fact(space="s", subject="c", predicate="p", value=3, actor="t")
            assert _rows(postgres_url, "public.events") == 2
            assert _rows(postgres_url, "later.events") == 1
            assert mine.backend.count() == 2
            for ledger in (mine, other):
                report = verify_lines(ledger.backend.stored_events())  # type: ignore[attr-defined]
                assert report.problems == []


def test_the_reader_shows_no_password_and_still_connects_after_pickling(
    postgres_url: str, embedded_postgres: EmbeddedPostgres
) -> None:
    """Before: ``_reader()`` was a ``functools.partial`` of ``psycopg.connect`` whose ``repr``
    (and so every ``SqlChunk``'s, in a traceback or a debugger) held the libpq URL with its
    password."""
    password = embedded_postgres.password
    with Ledger(f"{postgres_url}&table=shown") as ledger:
        ledger.assert_fact(space="s", subject="a", predicate="p", value=1, actor="t")
        backend: Any = ledger.backend
        reader = backend._reader()
        chunks = list(backend.stored_chunks(10))
        for shown in (repr(reader), str(reader), repr(chunks)):
            assert password not in shown and "custody:***@" in shown
        conn = pickle.loads(pickle.dumps(reader))()  # as a verify worker opens it
        try:
            assert conn.execute("SELECT count(*) FROM shown").fetchone()[0] == 1
        finally:
            conn.close()


def test_statistics_are_cleared_by_the_catalogs_function_not_one_found_first(
    postgres_url: str,
) -> None:
    """Before: ``pg_clear_attribute_stats`` was looked up and called by its bare name, so a
    function of the name planted in ``public`` (where before PostgreSQL 18, which has none in
    ``pg_catalog``, the default ``search_path`` finds it; here a path naming ``pg_catalog``
    after ``public``) ran with the ledger role's privileges, and the statistics stayed."""
    from agent_custody_state_events_postgres.vacuum import clear_statistics

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE planted_calls (at timestamptz)")
        conn.execute(
            "CREATE FUNCTION public.pg_clear_attribute_stats(text, text, text, boolean) "
            "RETURNS void LANGUAGE sql AS 'INSERT INTO public.planted_calls VALUES (now())'"
        )
    with Ledger(f"{postgres_url}&table=stats") as ledger:
        ledger.assert_fact(space="s", subject="a", predicate="p", value=1, actor="t")
    path = f"{postgres_url}&options=-csearch_path%3Dpublic,pg_catalog"
    with psycopg.connect(path, autocommit=True) as conn:
        conn.execute("ANALYZE stats")
        assert clear_statistics(conn, '"public"."stats"', "json") is True
        assert conn.execute("SELECT count(*) FROM planted_calls").fetchone() == (0,)
