"""Grouped commit (issue 15): a write returns only once its commit record is flushed.

A keyed write section commits with ``synchronous_commit = off`` (so the order lock is released
before the WAL flush) and then waits for a durable commit of its own, outside every lock. These
tests stop the server's WAL writer (SIGSTOP), so nothing flushes WAL in the background, and read
the section's commit record from the WAL (``pg_walinspect``): after the call returns, the flush
position must be past it. A session configured with ``synchronous_commit = off`` (the operator's
choice: nothing waits) is the control that shows the probe sees a write that is not flushed.
Nothing else may flush meanwhile: the background writer and checkpointer are stopped too, and
autovacuum is off (``wal_writer_stopped``).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import psycopg
import pytest

from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state_conformance.postgres import EmbeddedPostgres
from agent_custody_state_events_postgres.location import LocationError, parse_location

pytestmark = pytest.mark.postgres

NO_WAIT = "&options=" + quote("-c synchronous_commit=off")  # libpq: a session setting


@pytest.fixture
def admin(embedded_postgres: EmbeddedPostgres, postgres_url: str) -> Iterator[Any]:
    """A superuser connection to this test's database, with ``pg_walinspect``."""
    dbname = psycopg.conninfo.conninfo_to_dict(postgres_url)["dbname"]
    with psycopg.connect(embedded_postgres.admin_url, dbname=dbname, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        yield conn


#: The server processes that flush WAL on their own: the WAL writer, and (before writing a
#: dirty page or at a checkpoint) the background writer and the checkpointer.
_FLUSHERS = ("walwriter", "background writer", "checkpointer")


@contextmanager
def wal_writer_stopped(admin: Any) -> Iterator[None]:
    """Nothing flushes WAL but the sessions under test: the server's own flushing processes
    are stopped (SIGSTOP), and autovacuum is off with no worker running (a worker's commit
    would flush every earlier record, e.g. while it analyses the tables other tests filled)."""
    admin.execute("ALTER SYSTEM SET autovacuum = off")
    admin.execute("SELECT pg_reload_conf()")
    stopped: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'"
        ).fetchone()[0]:
            if time.monotonic() > deadline:
                pytest.skip("an autovacuum worker kept running for 30 s")
            time.sleep(0.05)
        rows = admin.execute(
            "SELECT backend_type, pid FROM pg_stat_activity WHERE backend_type = ANY(%s)",
            (list(_FLUSHERS),),
        ).fetchall()
        if "walwriter" not in {kind for kind, _ in rows}:
            pytest.skip("no walwriter process in pg_stat_activity")
        for _, pid in rows:
            try:
                os.kill(pid, signal.SIGSTOP)
            except PermissionError:
                pytest.skip("this test process may not signal the server's processes")
            stopped.append(pid)
        yield
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        admin.execute("ALTER SYSTEM RESET autovacuum")
        admin.execute("SELECT pg_reload_conf()")


def _write(location: str, value: object) -> str:
    with Ledger(location) as ledger:
        return ledger.assert_fact(
            subject="alice", predicate="city", value=value, space="s", actor="a"
        ).event_id


def _flushed(admin: Any, table: str, event_id: str, since: str) -> bool:
    """Whether the commit record of the transaction that inserted ``event_id`` is in the WAL
    flushed so far (``pg_walinspect`` reads only flushed WAL)."""
    xid = admin.execute(f"SELECT xmin::text FROM {table} WHERE event_id = %s", (event_id,))
    if admin.execute("SELECT pg_current_wal_flush_lsn() <= %s::pg_lsn", (since,)).fetchone()[0]:
        return False  # nothing flushed since (and no record to read past ``since``)
    found = admin.execute(
        "SELECT 1 FROM pg_get_wal_records_info(%s, pg_current_wal_flush_lsn()) "
        "WHERE record_type = 'COMMIT' AND xid::text = %s",
        (since, xid.fetchone()[0]),
    ).fetchone()
    return found is not None


def _start(admin: Any) -> str:
    """Where the WAL is flushed to now: every commit after this point is found (or not) past it."""
    return str(admin.execute("SELECT pg_current_wal_flush_lsn()").fetchone()[0])


def test_a_grouped_write_is_flushed_when_the_call_returns(postgres_url: str, admin: Any) -> None:
    location = f"{postgres_url}&table=grouped"
    _write(location, "warm")  # the table exists before the WAL writer stops
    with wal_writer_stopped(admin):
        since = _start(admin)
        control = _write(location + NO_WAIT, "Lisbon")
        assert not _flushed(admin, "grouped", control, since), "the probe cannot tell"
        grouped = _write(location, "Paris")
        assert _flushed(admin, "grouped", grouped, since)
        synced = _write(location + "&commit=sync", "Rome")
        assert _flushed(admin, "grouped", synced, since)


def test_a_head_read_outside_a_section_is_durable(postgres_url: str, admin: Any) -> None:
    """A chain head handed out (the head resource, a signed checkpoint) covers only durable
    events: read outside a section, it waits for the flush of what it covers."""
    location = f"{postgres_url}&table=heads"
    _write(location, "warm")
    with wal_writer_stopped(admin):
        since = _start(admin)
        pending = _write(location + NO_WAIT, "Lisbon")
        with Ledger(location + "&commit=sync") as ledger:
            head = ledger.chain_head()
        assert not _flushed(admin, "heads", pending, since)  # sync: a head read waits for nothing
        with Ledger(location) as ledger:
            assert ledger.chain_head() == head
        assert _flushed(admin, "heads", pending, since)


def test_without_the_flush_privilege_sections_commit_synchronously(
    postgres_url: str, admin: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """An operator who revoked ``pg_logical_emit_message`` gets synchronous commits (and a
    warning), never a write committed and then refused its durability wait."""
    admin.execute(
        "REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text, boolean) "
        "FROM PUBLIC"
    )
    location = f"{postgres_url}&table=revoked"
    _write(location, "warm")
    with caplog.at_level(logging.WARNING), wal_writer_stopped(admin):
        since = _start(admin)
        assert _flushed(admin, "revoked", _write(location, "Paris"), since)
    assert "pg_logical_emit_message is not granted" in caplog.text


def test_commit_parameter() -> None:
    assert parse_location("postgresql://u@h/db").commit == "grouped"
    where = parse_location("postgresql://u@h/db?commit=sync&sslmode=require")
    assert (where.commit, where.connect_url) == (
        "sync",
        "postgresql+psycopg://u@h/db?sslmode=require",
    )
    assert where.display == "postgresql://u@h/db?sslmode=require&commit=sync"
    with pytest.raises(LocationError, match='^postgres: commit must be grouped or sync; got "x"$'):
        parse_location("postgresql://u@h/db?commit=x")
