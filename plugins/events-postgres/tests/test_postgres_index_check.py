"""``verify``'s check of the query columns on PostgreSQL (``agent_custody_state_sql.indexcheck``):
a row whose column was edited is named by its position, on a text and on a jsonb table, by
``index_problems`` and in the chunks ``verify``'s workers read (``stored``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict

import psycopg
import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.parallel import verify_stored, worker_pool
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state_events_postgres.location import parse_location

pytestmark = pytest.mark.postgres

FACT = {"predicate": "plan", "space": "org", "actor": "a"}


@pytest.mark.parametrize("jsonb", [False, True])
def test_an_edited_column_is_named_by_its_position(
    pg_factory: Callable[..., EventBackend], postgres_url: str, jsonb: bool
) -> None:
    table = f"cols_{'jsonb' if jsonb else 'text'}"
    where = parse_location(f"{postgres_url}&table={table}")
    url = where.connect_url.replace("postgresql+psycopg", "postgresql")
    with Ledger(pg_factory(table)) as ledger:
        ids = [ledger.assert_fact(subject=f"s{i}", value=i, **FACT).fact_id for i in range(3)]
        ledger.retract(fact_id=ids[0], actor="a", reason="r")
        assert ledger.backend.index_problems() == []
        with psycopg.connect(url) as conn:
            if jsonb:  # an older writer's table
                conn.execute(f"ALTER TABLE {table} ALTER COLUMN json TYPE jsonb USING json::jsonb")
            conn.execute(f"UPDATE {table} SET kind = 'retract' WHERE seq = 2")
            conn.execute(f"UPDATE {table} SET supersedes = 'x' WHERE seq = 4")
        found = ledger.backend.index_problems()
    assert [position for position, _ in found] == [2, 4]
    assert found[0][1].startswith("its kind column reads 'retract' but the event says 'assert'")
    assert found[1][1].startswith("its supersedes column reads 'x' but the event says None")


@pytest.mark.parametrize("jsonb", [False, True])
def test_workers_read_chunks_and_name_what_one_process_names(
    pg_factory: Callable[..., EventBackend], postgres_url: str, jsonb: bool
) -> None:
    """``verify``'s workers read their chunks on connections of their own (the password
    travels pickled to them, never on a command line) and name, at the same positions, what
    the sequential pass and ``index_problems`` name: an edited column, and on a text table a
    row that is not JSON (the database's cast stops at it; the chunk is compared here)."""
    table = f"chunks_{'jsonb' if jsonb else 'text'}"
    where = parse_location(f"{postgres_url}&table={table}")
    url = where.connect_url.replace("postgresql+psycopg", "postgresql")
    with Ledger(pg_factory(table)) as ledger:
        for i in range(10):
            ledger.assert_fact(subject=f"s{i}", value=i, **FACT)
    with psycopg.connect(url) as conn:
        if jsonb:
            conn.execute(f"ALTER TABLE {table} ALTER COLUMN json TYPE jsonb USING json::jsonb")
        else:
            conn.execute(f"UPDATE {table} SET json = left(json, 30) WHERE seq = 8")
        conn.execute(f"UPDATE {table} SET subject = 'other' WHERE seq = 3")
    with Ledger(pg_factory(table), chain=False, forget_mode="plain") as ledger:
        backend = ledger.backend
        expected = verify_lines(backend.stored_events())
        for position, reason in backend.index_problems():
            expected.add(position, reason)
        with worker_pool(2) as pool:
            report = verify_stored(backend.stored_chunks(3), executor=pool)
    assert asdict(report) == asdict(expected)
    assert [p.seq for p in sorted(report.problems)] == ([3] if jsonb else [3, 8])
    assert report.first is not None and report.first.reason.startswith(
        "its subject column reads 'other'"
    )


@pytest.mark.parametrize("seq", [0, -(2**63)])
def test_a_row_below_the_sequence_start_is_verified(
    pg_factory: Callable[..., EventBackend], postgres_url: str, seq: int
) -> None:
    """A row written by hand below the sequence's start is read by the reads that go by a
    column, so ``verify`` reads it too, in one process and in the workers' chunks: the chain no
    longer starts at the first event."""
    table = f"below_{abs(seq) % 1000}"
    where = parse_location(f"{postgres_url}&table={table}")
    url = where.connect_url.replace("postgresql+psycopg", "postgresql")
    with Ledger(pg_factory(table)) as ledger:
        for i in range(5):
            ledger.assert_fact(subject=f"s{i}", value=i, **FACT)
    with psycopg.connect(url) as conn:
        conn.execute(
            f"INSERT INTO {table} SELECT %s, 'e-f', kind, tx_time, fact_id, space, 'forged', "
            f"predicate, supersedes, replace(json::text, '\"s2\"', '\"forged\"') "
            f"FROM {table} WHERE seq = 3",
            (seq,),
        )
    with Ledger(pg_factory(table)) as ledger:
        backend = ledger.backend
        assert [f.subject for f in ledger.as_of(subject="forged")] == ["forged"]
        assert sum(1 for _ in backend.iter_events()) == 6
        alone = verify_lines(backend.stored_events())
        with worker_pool(2) as pool:
            report = verify_stored(backend.stored_chunks(4), executor=pool)
    for found in (alone, report):
        assert found.events == 6 and found.first is not None and found.first.seq == 1
