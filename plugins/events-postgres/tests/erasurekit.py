"""What the erasure tests of this plugin share: the pending-erasure mark read as it is stored,
the files of the test's database that hold a needle, a process killed where a script kills
itself, an open made while another session reads its table, a ``VACUUM FULL`` seen waiting for
its lock, and a connection from before PostgreSQL 18.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import psycopg

from agent_custody_state_conformance.postgres import EmbeddedPostgres
from agent_custody_state_events_postgres import pending

T = TypeVar("T")


def flag(url: str, table: str) -> str | None:
    """The ``erasure_pending`` row beside ``table`` (None: no row, or no such table)."""
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute("SELECT to_regclass(%s)", (f"{table}_erasure",)).fetchone()
        if found is None or found[0] is None:
            return None
        row = conn.execute(
            f"SELECT value FROM {table}_erasure WHERE name = %s", (pending.SETTING,)
        ).fetchone()
    return None if row is None else str(row[0])


def on_disk(server: EmbeddedPostgres, url: str, needle: bytes) -> list[str]:
    """The files of the test's database (not WAL) holding ``needle``, after a checkpoint."""
    server.checkpoint()
    database = server.database_dir(urlsplit(url).path.lstrip("/"))
    return [p.name for p in server.files_containing(needle, under=database)]


def killed(script: str, *args: str) -> str:
    """Run ``script`` in its own process, which must die by SIGKILL (where it kills itself);
    what it printed before."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    return done.stdout.strip()


def opened_while_read(url: str, table: str, open_: Callable[[], T]) -> T:
    """``open_()`` while another session's transaction has read ``table``, so that finishing a
    pending erasure at the open waits for a lock it cannot get (the caller cuts
    ``pending.LOCK_TIMEOUT``); what it opened."""
    with psycopg.connect(url, autocommit=True) as other:
        other.execute("BEGIN")
        other.execute(f"SELECT count(*) FROM {table}").fetchone()
        try:
            return open_()
        finally:
            other.execute("COMMIT")


def vacuum_waiting(url: str, sessions: int = 1) -> bool:
    """Whether ``sessions`` sessions of the database come to wait for a lock, one of them a
    ``VACUUM FULL`` (bounded: about 30 s)."""
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(3000):
            row = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE query LIKE 'VACUUM FULL%%') "
                "FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            ).fetchone()
            if row is not None and row[0] >= sessions and row[1] >= 1:
                return True
            conn.execute("SELECT pg_sleep(0.01)")
    return False


class Before18:
    """A connection on which ``pg_clear_attribute_stats`` (PostgreSQL 18) is not found."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, query: Any, params: Any = None) -> Any:
        if "proname = 'pg_clear_attribute_stats'" in str(query):
            return self._conn.execute("SELECT 1 WHERE false")
        return self._conn.execute(query, params)


def kill_vacuums(admin_url: str, killed: list[int], times: int = 2) -> None:
    """Terminate the session running ``VACUUM FULL`` once it waits for its lock, ``times``
    times (the backend retries once on a new connection), a new session each time: a
    terminated one may still be listed a moment, and counting it twice left the retry waiting
    for ever behind the test's own transaction. The pids terminated are added to ``killed``."""
    with psycopg.connect(admin_url, autocommit=True) as admin:
        for _ in range(4000):  # bounded: about 40 s at most
            row = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE query LIKE 'VACUUM FULL%%' "
                "AND wait_event_type = 'Lock' AND NOT pid = ANY(%s)",
                (killed,),
            ).fetchone()
            if row is not None:
                admin.execute("SELECT pg_terminate_backend(%s)", (row[0],))
                killed.append(row[0])
                if len(killed) == times:
                    return
            admin.execute("SELECT pg_sleep(0.01)")
        raise AssertionError(f"{len(killed)} of {times} VACUUM FULL sessions waited")
