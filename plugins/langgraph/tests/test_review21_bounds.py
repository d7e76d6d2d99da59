"""LangGraph's PostgreSQL store bounds every statement (review 21).

Its calls run in threads nobody can cancel, so a put waiting for a lock another session holds
hung for as long as the lock was held; and a put whose process ended while its INSERT waited
committed the row once the lock was free, after a restarted store had found no copy.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import psycopg
import pytest

from agent_custody_state.stores import StoreError
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_langgraph.settings import LangGraphSettings
from agent_custody_state_langgraph.store import LangGraphStore, build


def _build(url: str, monkeypatch: pytest.MonkeyPatch, timeout: float) -> LangGraphStore:
    monkeypatch.setenv("LG_REVIEW21_URL", url)
    settings = LangGraphSettings(
        backend="postgres", dsn_env="LG_REVIEW21_URL", statement_timeout=timeout
    )
    return build(settings, name="langmem")


def _in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[BaseException]]:
    failures: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # the test reads it
            failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, failures


def _wait_for_blocked_insert(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE '%%INSERT INTO store%%'"
            ).fetchone()
            if row and row[0]:
                return
            time.sleep(0.02)
    raise AssertionError("the put's INSERT never waited for the lock")


@pytest.fixture
def locker(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A session whose open transaction holds the locks a test takes; always rolled back."""
    with psycopg.connect(postgres_url) as conn:
        try:
            yield conn
        finally:
            conn.rollback()


@pytest.mark.postgres
def test_a_put_blocked_by_a_lock_fails_within_its_statement_timeout(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, locker: psycopg.Connection[Any]
) -> None:
    store = _build(postgres_url, monkeypatch, timeout=0.5)
    fact = make_fact()
    thread: threading.Thread | None = None
    try:
        locker.execute("LOCK TABLE store IN SHARE MODE")  # INSERT waits; SELECT does not
        started = time.monotonic()
        thread, failures = _in_thread(lambda: anyio.run(store.put, fact))
        thread.join(3)
        assert not thread.is_alive(), "the put still waits for the lock"
        assert time.monotonic() - started < 3
        assert len(failures) == 1 and isinstance(failures[0], StoreError)
        assert "canceling statement due to statement timeout" in str(failures[0])
    finally:
        locker.rollback()
        if thread is not None:
            thread.join(5)
        store.close()


@pytest.mark.postgres
def test_an_insert_whose_client_is_gone_never_commits_after_a_restart_looked(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, locker: psycopg.Connection[Any]
) -> None:
    # The put's INSERT waits for another session's uncommitted row under the same key (lookups
    # do not wait for it); the put's process ends (its socket closes); a restarted store finds
    # no copy; then the other session rolls back, freeing the key.
    store = _build(postgres_url, monkeypatch, timeout=10)
    fact = make_fact()
    taken: list[psycopg.Connection[Any]] = []
    pool = store.base.conn  # type: ignore[attr-defined]
    getconn = pool.getconn

    def spy(*args: Any, **kwargs: Any) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] = getconn(*args, **kwargs)
        taken.append(conn)
        return conn

    pool.getconn = spy
    thread: threading.Thread | None = None
    restarted: LangGraphStore | None = None
    try:
        prefix = ".".join(store.namespace_for(fact))
        locker.execute(
            "INSERT INTO store (prefix, key, value) VALUES (%s, %s, '{}')", (prefix, fact.fact_id)
        )
        thread, _ = _in_thread(lambda: anyio.run(store.put, fact))
        _wait_for_blocked_insert(postgres_url)
        sock = socket.socket(fileno=os.dup(taken[-1].fileno()))
        sock.shutdown(socket.SHUT_RDWR)  # the process ended: its side of the connection closed
        sock.close()
        restarted = _build(postgres_url, monkeypatch, timeout=10)
        assert anyio.run(restarted.held_ids, fact) == []
        time.sleep(2)  # past the server's next check of the put's connection
        locker.rollback()  # an INSERT still waiting would commit now
        thread.join(5)
        time.sleep(0.2)
        assert anyio.run(restarted.held_ids, fact) == []
    finally:
        locker.rollback()
        if thread is not None:
            thread.join(5)
        if restarted is not None:
            restarted.close()
        store.close()


def test_statement_timeout_is_only_for_postgres() -> None:
    with pytest.raises(ValueError, match='statement_timeout is only for backend "postgres"'):
        LangGraphSettings(backend="memory", statement_timeout=5)
    assert LangGraphSettings(backend="postgres", dsn_env="X").statement_timeout == 30.0
