"""The read path on PostgreSQL: a read of one question is one statement (no ``BEGIN`` or
``COMMIT`` around it), and a read of several questions still sees one snapshot."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state_conformance.postgres import EmbeddedPostgres

pytestmark = pytest.mark.postgres


def _recorded(ledger: Ledger) -> list[str]:
    """Every statement the backend sends outside its prepared reads (``BEGIN``, ``COMMIT``...)."""
    backend: Any = ledger.backend
    sent: list[str] = []
    run = backend._exec

    def record(sql: str) -> None:
        sent.append(sql)
        run(sql)

    backend._exec = record
    return sent


def test_a_read_of_one_question_opens_no_transaction(postgres_url: str) -> None:
    with Ledger(f"{postgres_url}&table=solo") as ledger:
        a = ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
        b = ledger.assert_fact(subject="s", predicate="q", value=2, space="org", actor="a")
        sent = _recorded(ledger)
        assert [f.fact_id for f in ledger.as_of(subject="s")] == [a.fact_id, b.fact_id]
        got = ledger.get(a.fact_id)
        assert got is not None and got.value == 1
        assert ledger.get("00000000-0000-4000-8000-000000000000") is None
        assert sent == []


def test_a_read_of_several_questions_sees_one_snapshot(postgres_url: str) -> None:
    """A write committed by another connection between a read's two questions is seen by
    neither: the read that asked twice runs again inside a REPEATABLE READ snapshot."""
    url = f"{postgres_url}&table=snap"
    with Ledger(url) as ledger, Ledger(url) as other:
        ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
        runs: list[tuple[int, int]] = []

        def read() -> tuple[int, int]:
            first = ledger.backend.count()
            other.assert_fact(
                subject=f"t{len(runs)}", predicate="p", value=2, space="org", actor="b"
            )
            runs.append((first, ledger.backend.count()))
            return runs[-1]

        sent = _recorded(ledger)
        first, second = ledger.backend.consistent(read)
        assert first == second == 2  # the snapshot of the second run: before its own write
        assert len(runs) == 1  # the first run stopped at its second question
        assert sent[0].startswith("BEGIN ISOLATION LEVEL REPEATABLE READ") and sent[-1] == "COMMIT"
        assert ledger.count() == 3


def test_as_of_past_a_retracted_link_asks_again_in_a_snapshot(postgres_url: str) -> None:
    """An as-of read that needs a second question answers as the transactional read did. By
    subject alone a chain needs none (its links share the subject, so the first answer holds
    them all, ``test_supersession_reads``); a space filter can leave a link out: B, in another
    space, is retracted, so its superseder C must be asked for."""
    with Ledger(f"{postgres_url}&table=chain") as ledger:
        fact = {"subject": "s", "predicate": "p", "actor": "a"}
        a = ledger.assert_fact(**fact, value=1, space="org")
        b = ledger.assert_fact(**fact, value=2, space="other", supersedes=a.fact_id)
        c = ledger.assert_fact(**fact, value=3, space="org", supersedes=b.fact_id)
        ledger.retract(fact_id=b.fact_id, actor="a", reason="wrong")
        sent = _recorded(ledger)
        assert [(f.fact_id, f.value) for f in ledger.as_of(subject="s")] == [(c.fact_id, 3)]
        assert sent == []  # by subject: one question, no snapshot
        current = ledger.as_of(subject="s", space="org")
        assert [(f.fact_id, f.value) for f in current] == [(c.fact_id, 3)]
        assert sent == ["BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", "COMMIT"]
        with ledger.backend.reading():  # an enclosing snapshot: the read runs once, inside it
            assert [f.fact_id for f in ledger.as_of(subject="s", space="org")] == [c.fact_id]
        assert len(sent) == 4


def test_get_past_retracted_links_is_one_question(postgres_url: str) -> None:
    """``get`` walks down the chain in its one statement (``events_along``): A <- B <- C <- D
    with B and C retracted, D supersedes A, and no snapshot is opened for a second question."""
    with Ledger(f"{postgres_url}&table=walk") as ledger:
        fact = {"subject": "s", "predicate": "p", "space": "org", "actor": "a"}
        ids = [ledger.assert_fact(**fact, value=0, valid_from="2026-01-01T00:00:00Z").fact_id]
        for n in (1, 2, 3):
            valid_from = f"2026-0{n + 1}-01T00:00:00Z"
            ids.append(
                ledger.assert_fact(
                    **fact, value=n, supersedes=ids[-1], valid_from=valid_from
                ).fact_id
            )
        for middle in ids[1:3]:
            ledger.retract(fact_id=middle, actor="a", reason="wrong")
        sent = _recorded(ledger)
        got = ledger.get(ids[0])
        assert got is not None and got.valid_to == "2026-04-01T00:00:00.000Z"
        assert sent == []


def test_a_connection_dropped_inside_a_snapshot_fails_the_read(
    postgres_url: str, embedded_postgres: EmbeddedPostgres
) -> None:
    """A read's later questions were sent again on a new connection in autocommit mode, each
    seeing the latest commits: an answer from no one snapshot, given as one. The read fails;
    the next read reconnects."""
    url = f"{postgres_url}&table=dropsnap"
    with Ledger(url) as ledger, Ledger(url) as other:
        ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
        backend: Any = ledger.backend
        with backend.reading():
            assert backend.count() == 1
            other.assert_fact(subject="t", predicate="p", value=2, space="org", actor="b")
            with psycopg.connect(embedded_postgres.admin_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (backend._raw.info.backend_pid,))
            with pytest.raises(EventBackendError):
                backend.count()
        assert ledger.count() == 2


def test_checkpoint_notes_of_a_ledger_without_any_ask_the_catalog(postgres_url: str) -> None:
    """A ledger that never signed a checkpoint has no checkpoint table. Its notes are asked of
    the catalog first: the query of the missing table failed, which inside a read snapshot
    aborted the snapshot's transaction, and was recognised by its English error text only
    (a server with translated messages, ``lc_messages``, failed ``verify``)."""
    with Ledger(f"{postgres_url}&table=unsigned") as ledger:
        ledger.assert_fact(subject="s", predicate="p", value=1, space="o", actor="a")
        backend: Any = ledger.backend
        log = backend.checkpoint_log()
        with backend.reading():
            assert log.notes() == []
            assert backend.count() == 1  # the snapshot's transaction is still usable
