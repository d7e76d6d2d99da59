"""``verify``'s check of the query columns on PostgreSQL (``agent_custody_state_sql.indexcheck``):
a row whose column was edited is named by its position, on a text and on a jsonb table."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.backend import EventBackend
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
