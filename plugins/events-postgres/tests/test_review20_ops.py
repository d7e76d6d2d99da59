"""Twentieth review: PostgreSQL as an operator runs it, on the embedded server.

A connection killed inside a write section; limits a DBA sets on the role (statement_timeout,
lock_timeout, default_transaction_read_only) named in the errors, nothing half-written, a forget
whose compaction a limit cut off standing and announced; a search_path that finds another
schema first (side tables beside the events table, an unrelated table of the name refused).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.host import default_host
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state_conformance.postgres import EmbeddedPostgres


def _admin(server: EmbeddedPostgres, database: str = "postgres") -> psycopg.Connection[Any]:
    url = server.admin_url.replace("/postgres?", f"/{database}?")
    return psycopg.connect(url, autocommit=True)


def _database(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


@pytest.fixture
def role_setting(postgres_url: str, embedded_postgres: EmbeddedPostgres) -> Iterator[Any]:
    """``set(name, value)``: ``ALTER ROLE custody IN DATABASE <this test's> SET``, as a DBA
    would (new sessions get it); every setting made is reset at the end."""
    database, made = _database(postgres_url), []

    def set_(name: str, value: str | None) -> None:
        with _admin(embedded_postgres) as conn:
            what = f"SET {name} = '{value}'" if value is not None else f"RESET {name}"
            conn.execute(f"ALTER ROLE custody IN DATABASE {database} {what}")
        made.append(name)

    yield set_
    with _admin(embedded_postgres) as conn:
        for name in made:
            conn.execute(f"ALTER ROLE custody IN DATABASE {database} RESET {name}")


def _verified(ledger: Ledger) -> int:
    report = verify_lines(ledger.backend.stored_events())  # type: ignore[attr-defined]
    assert report.problems == []
    return int(report.events)


def _wait_until_waiting(server: EmbeddedPostgres, pid: int) -> None:
    """Until the backend ``pid`` waits for a lock (no fixed sleep: a loaded box is slow)."""
    deadline = time.monotonic() + 10
    with _admin(server) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
            ).fetchone()
            if row is not None and row[0] == "Lock":
                return
            time.sleep(0.01)
    raise AssertionError("the write never waited for the lock")


# -- a connection killed inside a write section ---------------------------------------------------


def test_a_forget_killed_inside_its_section_writes_nothing_and_the_next_one_works(
    postgres_url: str, embedded_postgres: EmbeddedPostgres
) -> None:
    """pg_terminate_backend while the forget waits for the order lock (its UPDATE of the assert
    row not yet sent): refused, nothing of it written; the next forget reconnects and the
    ledger verifies."""
    with Ledger(postgres_url) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value="v", space="org", actor="a")
        backend: Any = ledger.backend
        blocker = psycopg.connect(postgres_url)  # a transaction holding the order lock
        blocker.execute("SELECT pg_advisory_xact_lock(%s)", (backend._order_key,))
        failed: list[BaseException] = []

        def forget() -> None:
            try:
                ledger.forget(fact_id=fact.fact_id, actor="a", reason="r")
            except BaseException as exc:
                failed.append(exc)

        worker = threading.Thread(target=forget)
        worker.start()
        pid = backend._raw.info.backend_pid
        try:
            _wait_until_waiting(embedded_postgres, pid)
            with _admin(embedded_postgres) as conn:
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
            worker.join(10)
        finally:
            blocker.close()
        assert len(failed) == 1 and isinstance(failed[0], EventBackendError)
        assert "pg_terminate_backend" in str(failed[0])  # the hint says what ended it
        assert [e.kind for e in backend.iter_events()] == ["assert"]
        assert ledger.get(fact.fact_id).value == "v"  # type: ignore[union-attr]
        ledger.forget(fact_id=fact.fact_id, actor="a", reason="r")
        assert _verified(ledger) == 2


# -- limits a DBA sets on the role ------------------------------------------------------------------


def test_lock_timeout_is_named_nothing_is_written_and_the_ledger_works_after(
    postgres_url: str, role_setting: Any
) -> None:
    role_setting("lock_timeout", "100ms")
    with Ledger(postgres_url) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
        backend: Any = ledger.backend
        with psycopg.connect(postgres_url) as blocker:
            blocker.execute("SELECT pg_advisory_xact_lock(%s)", (backend._order_key,))
            with pytest.raises(EventBackendError, match="past the server's lock_timeout"):
                ledger.assert_fact(subject="s", predicate="q", value=2, space="org", actor="a")
        assert backend.count() == 1
        ledger.assert_fact(subject="s", predicate="q", value=2, space="org", actor="a")
        assert _verified(ledger) == 2


def test_a_read_only_role_is_named_and_nothing_is_written(
    postgres_url: str, role_setting: Any
) -> None:
    with Ledger(postgres_url) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
    role_setting("default_transaction_read_only", "on")
    with Ledger(postgres_url) as ledger:
        for write in (
            lambda: ledger.assert_fact(subject="s", predicate="q", value=2, space="o", actor="a"),
            lambda: ledger.forget(fact_id=fact.fact_id, actor="a", reason="r"),
        ):
            with pytest.raises(EventBackendError, match="default_transaction_read_only is on"):
                write()
        assert ledger.get(fact.fact_id).value == 1  # type: ignore[union-attr]
    role_setting("default_transaction_read_only", None)
    with Ledger(postgres_url) as ledger:  # lifted: a new session writes
        ledger.forget(fact_id=fact.fact_id, actor="a", reason="r")
        assert _verified(ledger) == 2


class _Heard:
    """A ledger host that records the events announced (``event_appended``)."""

    def __init__(self) -> None:
        self.kinds: list[str] = []

    def open_backend(self, location: str, **options: Any) -> Any:
        return default_host().open_backend(location, **options)

    def event_appended(self, ledger: Ledger, event: Any) -> None:
        self.kinds.append(event.kind)


@pytest.mark.parametrize("how", ["forget", "sweep"])
def test_a_forget_whose_vacuum_the_statement_timeout_cut_stands_is_said_and_announced(
    postgres_url: str, role_setting: Any, how: str
) -> None:
    """A reader's open transaction keeps VACUUM FULL waiting until statement_timeout cancels it,
    after the forget committed: the error names the setting and says the forget stands (a
    retry would be refused as already forgotten), write-through stores still hear of it, and
    the next writer's open finishes the erasure."""
    role_setting("statement_timeout", "1s")
    heard = _Heard()
    with Ledger(postgres_url, host=heard) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value="gone", space="o", actor="a")
        with psycopg.connect(postgres_url) as reader:
            reader.execute("SELECT count(*) FROM events")  # holds ACCESS SHARE until it ends
            with pytest.raises(EventBackendError) as cut:
                if how == "forget":
                    ledger.forget(fact_id=fact.fact_id, actor="a", reason="r")
                else:
                    ledger.sweep(before=ledger.now(), actor="a", reason="r")
        text = str(cut.value)
        assert "its statement_timeout" in text and "a forget is recorded" in text
        assert heard.kinds == ["assert", "forget"]
        assert ledger.get(fact.fact_id).value is None  # type: ignore[union-attr]
    with Ledger(postgres_url) as ledger:  # the open finishes the pending erasure
        assert _verified(ledger) == 2


# -- a search_path that finds another schema first --------------------------------------------------


def test_side_tables_are_made_beside_the_events_table_not_in_the_first_schema(
    postgres_url: str, tmp_path: Path
) -> None:
    """The role's own schema comes first in the default search_path ("$user", public): the
    events table is found in public, and its settings and erasure log must be made there too,
    or a replica with search_path = public never sees the crypto-shred mark."""
    with Ledger(postgres_url) as ledger:  # public.events, before the role has a schema
        ledger.assert_fact(subject="s", predicate="p", value=0, space="o", actor="a")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA custody")
    keys = str(tmp_path / "keys.json")
    with Ledger(postgres_url, forget_mode="crypto-shred", key_store=keys) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value={"v": 1}, space="o", actor="a")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        found = conn.execute(
            "SELECT schemaname, tablename FROM pg_tables WHERE tablename LIKE 'events%' ORDER BY 2"
        ).fetchall()
    assert found == [
        ("public", "events"),
        ("public", "events_settings"),
        ("public", "events_shredded"),
    ]
    with Ledger(f"{postgres_url}&options=-csearch_path%3Dpublic") as plain:
        with pytest.raises(LedgerError, match="is written in crypto-shred mode"):
            plain.assert_fact(subject="s", predicate="q", value="x", space="o", actor="a")


def test_an_unrelated_table_of_the_name_is_refused_and_left_unchanged(
    postgres_url: str,
) -> None:
    """search_path = app, public finds an application's ``app.events`` first: the open must not
    migrate it (add columns, fill them, index it), but say what it found."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA app")
        conn.execute(
            "CREATE TABLE app.events (id SERIAL PRIMARY KEY, kind TEXT, fact_id TEXT, "
            "tx_time TEXT, json TEXT)"
        )
        conn.execute("INSERT INTO app.events (kind, json) VALUES ('assert', '{}')")
    columns = (
        "SELECT string_agg(column_name, ',' ORDER BY ordinal_position) FROM "
        "information_schema.columns WHERE table_schema = 'app' AND table_name = 'events'"
    )
    with psycopg.connect(postgres_url) as conn:
        before = conn.execute(columns).fetchone()
    with pytest.raises(EventBackendError, match="not a ledger's events table") as refused:
        Ledger(f"{postgres_url}&options=-csearch_path%3Dapp,public")
    assert "seq, event_id" in str(refused.value) and "search_path" in str(refused.value)
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute(columns).fetchone() == before
        assert conn.execute("SELECT to_regclass('public.events')").fetchone() == (None,)
