"""Sixth review: a PostgreSQL forget cut off before its ``VACUUM FULL`` is finished at the next
writer's open (``pending``).

The forget commits the rewritten row; the dead row version still holding the value stays in
the table's files until ``VACUUM FULL``. Its process killed (SIGKILL) or its vacuum's backend
terminated (``pg_terminate_backend``) in between, the erasure used to stay unfinished for
good; the forget's transaction now marks it pending (a table ``<table>_erasure``), a successful
compaction clears the mark, and a writer's open finishes a marked one. A read-only open and a
``?vacuum=false`` location leave the mark alone; an open that cannot vacuum (its lock not
granted in time, a role that may not) warns and keeps it; a role that may not use the table
forgets as before; two openers at once both open, and one vacuums.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import uuid
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from erasurekit import flag, kill_vacuums, killed, on_disk, opened_while_read, vacuum_waiting

from agent_custody_state import Ledger
from agent_custody_state.plugin import EventBackendError, ForgetEvent
from agent_custody_state_conformance.postgres import EmbeddedPostgres
from agent_custody_state_events_postgres import pending
from agent_custody_state_events_postgres.store import PostgresBackend

pytestmark = pytest.mark.postgres

#: A process that asserts a fact, forgets it, and is killed (SIGKILL) by its ``compact``: after
#: the forget's commit, before its ``VACUUM FULL``.
KILLED_BEFORE_VACUUM = """
import os, signal, sys
from agent_custody_state import Ledger
from agent_custody_state_events_postgres.store import PostgresBackend
PostgresBackend.compact = lambda self: os.kill(os.getpid(), signal.SIGKILL)
with Ledger(sys.argv[1]) as ledger:
    fact = ledger.assert_fact(subject="d", predicate="email", value=sys.argv[2], space="u", actor="a")
    ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="erasure")
"""

#: A process that opens the ledger as a writer (its open's vacuum waiting up to a minute for
#: its lock), logging to stderr, and closes it.
OPENER = """
import logging, sys
from agent_custody_state_events_postgres import pending
from agent_custody_state_events_postgres.store import PostgresBackend
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
pending.LOCK_TIMEOUT = "60s"
PostgresBackend(sys.argv[1]).close()
print("opened", file=sys.stderr, flush=True)
"""


def _location(url: str, table: str = "events", extra: str = "") -> str:
    return f"{url}&table={table}{extra}"


def _on_disk(server: EmbeddedPostgres, url: str, needle: str) -> list[str]:
    return on_disk(server, url, needle.encode())


def _flag(url: str, table: str = "events") -> str | None:
    return flag(url, table)


def _killed_forget(
    url: str, server: EmbeddedPostgres, table: str = "events", *, marked: bool = True
) -> str:
    """A forget whose process is killed before its vacuum; the marker left in the files (and,
    if ``marked``, checked: the erasure marked pending)."""
    marker = f"secret-{uuid.uuid4().hex}"
    killed(KILLED_BEFORE_VACUUM, _location(url, table), marker)
    assert _on_disk(server, url, marker), "the dead row version holds the value"
    assert not marked or _flag(url, table) is not None, "the forget marked its erasure pending"
    return marker


def test_a_forget_killed_before_its_vacuum_is_finished_at_the_next_open(
    postgres_url: str, embedded_postgres: EmbeddedPostgres, caplog: pytest.LogCaptureFixture
) -> None:
    marker = _killed_forget(postgres_url, embedded_postgres, marked=False)
    with caplog.at_level(logging.WARNING), Ledger(_location(postgres_url)) as ledger:
        assert sum(isinstance(e, ForgetEvent) for e in ledger.backend.iter_events()) == 1
        assert _on_disk(embedded_postgres, postgres_url, marker) == []
        assert any("finished the erasure" in r.getMessage() for r in caplog.records)
        assert _flag(postgres_url) is None


def test_a_vacuum_whose_backend_is_terminated_is_finished_at_the_next_open(
    postgres_url: str, embedded_postgres: EmbeddedPostgres
) -> None:
    """The forget's ``VACUUM FULL`` (and its retry on a new connection) is terminated while it
    waits for its lock: the forget fails after its commit; the next open finishes it."""
    marker = f"secret-{uuid.uuid4().hex}"
    with Ledger(_location(postgres_url)) as ledger:
        fact = ledger.assert_fact(subject="d", predicate="p", value=marker, space="u", actor="a")
        with psycopg.connect(postgres_url, autocommit=True) as other:
            other.execute("BEGIN")
            other.execute("SELECT count(*) FROM events").fetchone()  # VACUUM FULL waits
            killed: list[int] = []
            killer = threading.Thread(
                target=kill_vacuums, args=(embedded_postgres.admin_url, killed)
            )
            killer.start()
            try:
                with pytest.raises(EventBackendError):
                    ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="r")
            finally:
                killer.join()
            assert len(killed) == 2
        assert isinstance(ledger.history(fact.fact_id)[-1], ForgetEvent)  # committed
    assert _on_disk(embedded_postgres, postgres_url, marker), "the vacuum did not finish"
    with Ledger(_location(postgres_url)):
        assert _on_disk(embedded_postgres, postgres_url, marker) == []
        assert _flag(postgres_url) is None


def test_a_forget_marks_its_erasure_and_its_compaction_clears_the_mark(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """During the compaction the mark is there (the forget's transaction wrote it, with the
    forget); after it, a clean forget leaves none."""
    seen: list[str | None] = []
    checked = PostgresBackend.vacuum_checked

    def looking(self: PostgresBackend, *args: Any) -> None:
        seen.append(_flag(postgres_url))
        checked(self, *args)

    monkeypatch.setattr(PostgresBackend, "vacuum_checked", looking)
    with Ledger(_location(postgres_url)) as ledger:
        fact = ledger.assert_fact(subject="d", predicate="p", value="v", space="u", actor="a")
        ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="r")
    assert len(seen) == 1 and seen[0] is not None and seen[0].isdigit()
    assert _flag(postgres_url) is None


def test_two_openers_at_once_both_open_and_one_vacuums(
    postgres_url: str, embedded_postgres: EmbeddedPostgres
) -> None:
    """The first opener's vacuum waits for a lock; the second opens meanwhile (and waits for
    that vacuum); both open, and only the first vacuums."""
    marker = _killed_forget(postgres_url, embedded_postgres)
    location = _location(postgres_url)
    openers: list[subprocess.Popen[str]] = []
    with psycopg.connect(postgres_url, autocommit=True) as other:
        other.execute("BEGIN")
        other.execute("SELECT count(*) FROM events").fetchone()  # the first opener's vacuum waits
        try:
            for sessions in (1, 2):
                openers.append(
                    subprocess.Popen(
                        [sys.executable, "-c", OPENER, location], stderr=subprocess.PIPE, text=True
                    )
                )
                assert vacuum_waiting(postgres_url, sessions), f"opener {sessions} waits"
            other.execute("COMMIT")
            told = [opener.communicate(timeout=60)[1] for opener in openers]
        finally:
            for opener in openers:
                opener.kill()
    assert [opener.returncode for opener in openers] == [0, 0], told
    assert ["finished the erasure" in t for t in told] == [True, False], told
    assert all("opened" in t for t in told)
    assert _on_disk(embedded_postgres, postgres_url, marker) == []
    assert _flag(postgres_url) is None


def test_a_read_only_open_leaves_the_mark_and_a_writer_finishes_it(
    postgres_url: str, embedded_postgres: EmbeddedPostgres
) -> None:
    marker = _killed_forget(postgres_url, embedded_postgres)
    flag = _flag(postgres_url)
    with Ledger(_location(postgres_url), read_only=True) as reader:
        assert reader.count() == 2
    assert _flag(postgres_url) == flag
    assert _on_disk(embedded_postgres, postgres_url, marker)
    PostgresBackend(_location(postgres_url)).close()
    assert _flag(postgres_url) is None
    assert _on_disk(embedded_postgres, postgres_url, marker) == []


def test_an_open_that_cannot_get_its_lock_warns_and_keeps_the_mark(
    postgres_url: str,
    embedded_postgres: EmbeddedPostgres,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    marker = _killed_forget(postgres_url, embedded_postgres)
    monkeypatch.setattr(pending, "LOCK_TIMEOUT", "100ms")
    with caplog.at_level(logging.WARNING):  # it opens, all the same
        backend = opened_while_read(
            postgres_url, "events", lambda: PostgresBackend(_location(postgres_url))
        )
    try:
        assert any("could not be finished at open" in r.getMessage() for r in caplog.records)
        assert _flag(postgres_url) is not None
        assert _on_disk(embedded_postgres, postgres_url, marker)
        assert backend.count() == 2
        backend.compact()  # the next compaction finishes it
    finally:
        backend.close()
    assert _flag(postgres_url) is None
    assert _on_disk(embedded_postgres, postgres_url, marker) == []


def test_a_role_that_may_not_vacuum_warns_keeps_the_mark_and_opens(
    postgres_url: str,
    embedded_postgres: EmbeddedPostgres,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The open warns and keeps the mark; and a role without rights on its table
    still forgets (its ``VACUUM FULL`` refused after the commit, as before), warned."""
    _killed_forget(postgres_url, embedded_postgres)
    role, password = f"w_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    parts = urlsplit(postgres_url)
    admin_url = urlsplit(embedded_postgres.admin_url)._replace(path=parts.path).geturl()
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        admin.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON events_erasure TO {role}")
        admin.execute(f"GRANT SELECT, INSERT, UPDATE ON events TO {role}")
        admin.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}")
        url = parts._replace(netloc=f"{role}:{password}@{parts.netloc.split('@', 1)[1]}")
        try:
            with caplog.at_level(logging.WARNING), Ledger(_location(url.geturl())) as ledger:
                assert ledger.count() == 2
            warned = [r.getMessage() for r in caplog.records]
            assert any("could not be finished at open" in m for m in warned), warned
            assert _flag(postgres_url) is not None
            admin.execute(f"REVOKE ALL ON events_erasure FROM {role}")
            caplog.clear()
            with caplog.at_level(logging.WARNING), Ledger(_location(url.geturl())) as ledger:
                fact = ledger.assert_fact(subject="e", predicate="p", value=1, space="u", actor="a")
                with pytest.raises(EventBackendError, match="VACUUM FULL did not run"):
                    ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="r")
                assert isinstance(ledger.history(fact.fact_id)[-1], ForgetEvent)
            warned = [r.getMessage() for r in caplog.records]
            assert any("may not be used or created" in m for m in warned), warned
        finally:
            admin.execute(f"DROP OWNED BY {role} CASCADE")
            admin.execute(f"DROP ROLE {role}")


def test_vacuum_false_neither_marks_nor_finishes(
    postgres_url: str, embedded_postgres: EmbeddedPostgres
) -> None:
    """``?vacuum=false`` does not vacuum: its forget marks nothing, its open leaves a mark
    another writer made for an operator (or a vacuuming writer) to finish."""
    marker = _killed_forget(postgres_url, embedded_postgres)
    flag = _flag(postgres_url)
    with Ledger(_location(postgres_url, extra="&vacuum=false")) as ledger:
        fact = ledger.assert_fact(subject="e", predicate="p", value="w", space="u", actor="a")
        ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="r")
    assert _flag(postgres_url) == flag  # neither finished nor marked anew
    assert _on_disk(embedded_postgres, postgres_url, marker)
