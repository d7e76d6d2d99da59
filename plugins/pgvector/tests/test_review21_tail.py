"""A put whose connection broke while PostgreSQL still ran its INSERT is not reported as absent.

A backend waiting for a lock does not read from its client; unless it checks the connection
(``client_connection_check_interval``, every second here) it commits the row once the lock is
free (autocommit), up to ``statement_timeout`` after it started. The put has failed by then, and
its cleanup (or a restarted store's) looked the fact up.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

import anyio
import psycopg
import pytest

from agent_custody_state.stores import StoreError, StoreSet, StoreWriteError
from agent_custody_state_conformance.embeddings import embed_8
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_pgvector import store as pgvector_store
from agent_custody_state_pgvector.store import PgvectorStore

pytestmark = pytest.mark.postgres


def _store(url: str, statement_timeout: float) -> PgvectorStore:
    store = PgvectorStore(
        "vectors", url, embed_8, dimensions=8, table="facts", statement_timeout=statement_timeout
    )
    anyio.run(store.held_ids, make_fact())  # the table exists
    store._connections.close()  # the put opens a connection of its own
    return store


def _rows(url: str, fact_id: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM facts WHERE id = %s", (fact_id,)).fetchone()
        return int(row[0]) if row else 0


def _break_the_put_connection(store: PgvectorStore, url: str, held: float) -> threading.Thread:
    """Hold a lock that blocks INSERT (not SELECT); cut the put's connection while it waits; free
    the lock ``held`` seconds later."""
    taken: list[psycopg.Connection[Any]] = []
    take = store._connections._take

    def spy() -> tuple[bool, psycopg.Connection[Any]]:
        reused, conn = take()
        taken.append(conn)
        return reused, conn

    store._connections._take = spy  # type: ignore[method-assign]
    locked = threading.Event()

    def hold() -> None:
        with psycopg.connect(url) as conn:
            conn.execute("LOCK TABLE facts IN SHARE MODE")
            locked.set()
            waited = time.monotonic()
            while not _waiting(url) and time.monotonic() - waited < 5:
                time.sleep(0.02)
            sock = socket.socket(fileno=os.dup(taken[-1].fileno()))
            sock.shutdown(socket.SHUT_RDWR)  # the network drops the client's side
            sock.close()
            time.sleep(held)

    holder = threading.Thread(target=hold)
    holder.start()
    assert locked.wait(10)
    return holder


def _waiting(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE 'INSERT INTO%%'"
        ).fetchone()
        return bool(row and row[0])


def test_a_put_cut_off_while_the_server_still_inserts_is_not_no_copy(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A network cut the server's side never learns of (no check here): the INSERT commits.
    monkeypatch.setattr(pgvector_store, "CLIENT_CHECK_INTERVAL", "0")
    store = _store(postgres_url, statement_timeout=1.5)
    try:
        fact = make_fact()
        holder = _break_the_put_connection(store, postgres_url, held=0.5)
        with pytest.raises(StoreWriteError) as failed:
            anyio.run(StoreSet([store]).put_all, fact)
        holder.join()
        # The cleanup waited for the INSERT to end, found its row and removed it; it never
        # answered "no copy left" while the row was still to appear.
        assert "vectors: removed a copy the failed put left" in str(failed.value)
        assert anyio.run(store.held_ids, fact) == []
    finally:
        store.close()


def test_a_restarted_store_is_not_answered_by_a_row_still_to_come(postgres_url: str) -> None:
    # The process ended (its socket closed); the lock outlasts the server's next connection
    # check, which sees the client gone and cancels the INSERT.
    store = _store(postgres_url, statement_timeout=3)
    try:
        fact = make_fact()
        holder = _break_the_put_connection(store, postgres_url, held=1.6)
        with pytest.raises(StoreError, match="server closed the connection"):
            anyio.run(store.put, fact)
        restarted = _store(postgres_url, statement_timeout=3)  # knows nothing of that put
        try:
            assert anyio.run(restarted.held_ids, fact) == []
        finally:
            restarted.close()
        holder.join()  # the lock is free: an INSERT still waiting would commit now
        time.sleep(0.2)
        assert _rows(postgres_url, fact.fact_id) == 0
    finally:
        store.close()
