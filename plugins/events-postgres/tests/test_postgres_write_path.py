"""The round trips of a write on PostgreSQL: a supersession sends three (the key locks with
the one statement that checks the rules, the order lock with the chain head, the insert with
the commit and its flush), an assert of a new fact two, and every statement of a write
section runs on a generic plan. The held row (``held``): a statement after a single append
sends it first, and an insert the server refuses in the commit's round trip is a plain refusal
that wrote nothing."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.model import AssertEvent
from agent_custody_state.plugin import EventBackendError
from agent_custody_state.timeutil import wire_time_key

pytestmark = pytest.mark.postgres


def _sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement any psycopg cursor of this process sends from now on."""
    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def record(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        sent.append(" ".join(str(query).split()))
        return execute(self, query, params, **kw)

    monkeypatch.setattr(psycopg.Cursor, "execute", record)
    return sent


def test_a_supersession_is_three_round_trips(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key locks with the one statement that checks the rules (the walk, ``EXECUTE`` of
    its statement prepared on the connection), the order lock with the head, the insert with
    the commit and its flush."""
    fact = {"subject": "s", "predicate": "p", "space": "org", "actor": "a"}
    with Ledger(f"{postgres_url}&table=trips") as ledger:
        first = ledger.assert_fact(**fact, value=1)
        first = ledger.assert_fact(**fact, value=2, supersedes=first.fact_id)  # prepares
        sent = _sent(monkeypatch)
        second = ledger.assert_fact(**fact, value=3, supersedes=first.fact_id)
        assert ledger.get(first.fact_id).valid_to == second.fact.valid_from  # type: ignore[union-attr]
    write = sent[:3]
    assert write[0].startswith("BEGIN; SET LOCAL plan_cache_mode = force_generic_plan;")
    assert "; EXECUTE acs_" in write[0] and first.fact_id in write[0]  # the walk
    assert write[1].startswith(
        "SELECT pg_catalog.pg_advisory_xact_lock("
    )  # the order lock, the head
    assert (
        write[2].startswith("INSERT INTO")
        and "; COMMIT; SELECT pg_catalog.pg_logical_emit" in write[2]
    )
    assert second.event_id in write[2]  # the row's values written in as literals
    assert not any(s.startswith(("BEGIN", "INSERT", "COMMIT", "PREPARE")) for s in sent[3:])


def test_a_plain_assert_is_two_round_trips(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An assert that supersedes nothing, with a fact id the ledger draws, has nothing to read
    before its ordered phase: the key locks with the order lock and the head, then the insert
    with the commit. A fact id the caller gives is looked up first, with the key locks; its
    statement is prepared on the connection once."""
    fact = {"subject": "s", "predicate": "p", "space": "org", "actor": "a"}
    with Ledger(f"{postgres_url}&table=plain_trips") as ledger:
        ledger.assert_fact(**fact, value=1)
        sent = _sent(monkeypatch)
        drawn = ledger.assert_fact(**{**fact, "subject": "t"}, value=2)
        given = ledger.assert_fact(**{**fact, "subject": "u"}, value=3, fact_id="given-1")
        again = ledger.assert_fact(**{**fact, "subject": "v"}, value=4, fact_id="given-2")
    assert [s.split(";")[0].split()[0] for s in sent] == [
        *("BEGIN", "INSERT"),
        *("PREPARE", "BEGIN", "SELECT", "INSERT"),
        *("BEGIN", "SELECT", "INSERT"),
    ], sent
    assert (
        "; SELECT pg_catalog.pg_advisory_xact_lock(" in sent[0]
    )  # the order lock, with the head read
    assert drawn.event_id in sent[1] and given.event_id in sent[5] and again.event_id in sent[8]
    assert "WHERE public.plain_trips.fact_id = $1" in sent[2]  # the given id's assert
    assert sent[3].endswith("'given-1', 'assert', 1)") and "'given-2'" in sent[6], sent


def test_a_table_locked_section_runs_on_generic_plans(postgres_url: str) -> None:
    with Ledger(f"{postgres_url}&table=generic&lock=table") as ledger:
        backend: Any = ledger.backend
        with backend.transaction():  # the section's statements go with its opening
            mode = backend._exec_rows("SHOW plan_cache_mode")[0][0]
        after = backend._raw.execute("SHOW plan_cache_mode").fetchone()[0]
    assert (mode, after) == ("force_generic_plan", "auto")  # SET LOCAL: the section only


def test_a_read_after_a_single_append_sees_it(postgres_url: str) -> None:
    with Ledger(f"{postgres_url}&table=held_read") as ledger:
        first = ledger.assert_fact(subject="s", predicate="p", value=1, space="o", actor="a")
        event = AssertEvent("e-held", first.tx_time, first.fact.with_(fact_id="f-held"))
        backend: Any = ledger.backend
        with backend.transaction():
            backend.append([event])
            assert backend.last_event().event_id == "e-held"  # the held row went first
            assert backend.count() == 2
        assert ledger.get("f-held") is not None


def test_a_refused_held_insert_writes_nothing_and_says_so(postgres_url: str) -> None:
    """A row the server refuses (here: a duplicate event id, the unique index) fails in the
    commit's round trip: the error is the server's, not "may or may not have been recorded",
    nothing of the section is written, and the next write goes through."""
    with Ledger(f"{postgres_url}&table=held_refused") as ledger:
        first = ledger.assert_fact(subject="s", predicate="p", value=1, space="o", actor="a")
        backend: Any = ledger.backend
        twin = AssertEvent(first.event_id, first.tx_time, first.fact.with_(fact_id="f-twin"))
        with pytest.raises(EventBackendError) as refused, backend.transaction():
            backend.append([twin])
        assert "duplicate key" in str(refused.value)
        assert "may or may not" not in str(refused.value)
        assert backend.count() == 1 and ledger.get("f-twin") is None
        after = ledger.assert_fact(subject="s", predicate="q", value=2, space="o", actor="a")
        assert [e.event_id for e in ledger.export()] == [first.event_id, after.event_id]


def test_a_section_that_fails_drops_its_held_row(postgres_url: str) -> None:
    """A section whose body fails after a single append rolls back without sending the held
    row (which, refused, would have left the connection in an aborted transaction and failed
    the next write)."""
    with Ledger(f"{postgres_url}&table=held_dropped") as ledger:
        first = ledger.assert_fact(subject="s", predicate="p", value=1, space="o", actor="a")
        backend: Any = ledger.backend
        twin = AssertEvent(first.event_id, first.tx_time, first.fact.with_(fact_id="f-twin"))
        with pytest.raises(RuntimeError, match="the body failed"), backend.transaction():
            backend.append([twin])
            raise RuntimeError("the body failed")
        after = ledger.assert_fact(subject="s", predicate="q", value=2, space="o", actor="a")
        assert [e.event_id for e in ledger.export()] == [first.event_id, after.event_id]


@pytest.mark.parametrize("read", ["walk", "around", "as_of", "timeline"])
def test_reads_are_index_probes_without_statistics(postgres_url: str, read: str) -> None:
    """The statements of the supersession walk (every supersession's check, every ``get``),
    ``events_around`` and the reads by subject (as-of, timeline) must not depend on planner
    statistics: on a table the server had not analysed they were planned as sequential scans
    and hash joins (server time at 100,000 events: walk 25.8 ms, as-of 31 ms, events_around 19
    ms; about 0.1-0.3 ms as index probes; an as-of without the fence on the subject's index
    2.6 ms, the time index read whole)."""
    table = f"unanalysed_{read}"
    with Ledger(f"{postgres_url}&table={table}", chain=False) as ledger:
        backend: Any = ledger.backend
        backend._exec(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        items = [
            {"subject": f"s{i}", "predicate": "p", "value": i, "space": "o", "actor": "a"}
            for i in range(6000)  # below ANALYZE_MIN: nothing analyses the table
        ]
        ledger.assert_many(items)
        fact = ledger.as_of(subject="s7")[0]
        ids = backend._ids_param([fact.fact_id, "new-id"])
        by_subject = {"subject": "s7", "tx_at": "2999-01-01T00:00:00.000Z"}
        q, params = {
            "walk": (backend._q.events_along, {"ids": ids}),
            "around": (backend._q.events_around, {"ids": ids}),
            "as_of": (backend._q.asserts_around((False, True, False, True, True)), by_subject),
            "timeline": (backend._q.asserts_around((False, True, False, False, False)), by_subject),
        }[read]
        plan = "\n".join(r[0] for r in backend._raw.execute("EXPLAIN " + q.sql, q.args(params)))
        stats = backend._raw.execute(
            "SELECT last_analyze, last_autoanalyze FROM pg_stat_user_tables WHERE relname = %s",
            (table,),
        ).fetchone()
        if read == "as_of":  # the statement's answer is the ledger's (and the fact is found)
            assert [f.fact_id for f in ledger.as_of(subject="s7")] == [fact.fact_id]
    assert stats == (None, None)
    assert "Seq Scan" not in plan, plan
    # Nor a scan of the time index for "tx_time <= now" (every entry), ANDed with the subject's.
    assert "Index Cond: (tx_time" not in plan, plan


def test_the_head_is_read_with_the_order_lock_as_one_backward_probe(postgres_url: str) -> None:
    """The head read that rides with the order lock is sent unprepared, so the server plans it
    at every write: it is the first entry of a backward scan of the primary key, not the row
    whose ``seq`` is a ``max()`` subquery (an InitPlan: 45-55 µs more server CPU per write to
    plan, measured on the embedded server)."""
    with Ledger(f"{postgres_url}&table=head_probe", chain=False) as ledger:
        ledger.assert_many(
            [{"subject": f"s{i}", "predicate": "p", "value": i, "space": "o", "actor": "a"}
             for i in range(50)]
        )  # fmt: skip
        backend: Any = ledger.backend
        plan = "\n".join(r[0] for r in backend._raw.execute("EXPLAIN " + backend._q.last.sql))
        head = backend._rows(backend._q.last)
        last = list(ledger.export())[-1]
    assert "Index Scan Backward using head_probe_pkey" in plan, plan
    assert "InitPlan" not in plan and "SubPlan" not in plan, plan
    assert [(json.loads(r[1])["eventId"], r[2]) for r in head] == [
        (last.event_id, wire_time_key(last.tx_time))
    ]


def test_a_raised_stamp_is_the_normal_form_of_the_last_time(postgres_url: str) -> None:
    """A write stamped after another's later time takes that time in its normal form (the
    row's ``tx_time`` column), not the last event's text as it was written (an offset)."""
    with Ledger(f"{postgres_url}&table=raised") as ledger:
        first = ledger.assert_fact(subject="s", predicate="p", value=1, space="o", actor="a")
        later = AssertEvent(
            "e-later", "2999-01-01T02:00:00+02:00", first.fact.with_(fact_id="f-later")
        )
        backend: Any = ledger.backend
        with backend.transaction():
            backend.append([later])
        assert backend.last_tx_time() == "2999-01-01T00:00:00.000Z"
        after = ledger.assert_fact(subject="s", predicate="q", value=2, space="o", actor="a")
    assert after.tx_time == "2999-01-01T00:00:00.000Z"


def test_a_section_outlives_its_prepared_walk_being_deallocated(postgres_url: str) -> None:
    """The walk a section's opening carries is ``EXECUTE`` of a statement prepared on the
    connection; a ``DEALLOCATE ALL`` (psycopg sends one after some statements) leaves the next
    section to end its aborted first round trip and send it again, prepared anew."""
    fact = {"subject": "s", "predicate": "p", "space": "org", "actor": "a"}
    with Ledger(f"{postgres_url}&table=dealloc") as ledger:
        first = ledger.assert_fact(**fact, value=1)
        second = ledger.assert_fact(**fact, value=2, supersedes=first.fact_id)  # prepares
        backend: Any = ledger.backend
        backend._raw.execute("DEALLOCATE ALL")
        third = ledger.assert_fact(**fact, value=3, supersedes=second.fact_id)
        assert [f.fact_id for f in ledger.as_of(subject="s")] == [third.fact.fact_id]
        assert [e.event_id for e in ledger.export()][-1] == third.event_id
