"""The round trips of a write on PostgreSQL: a supersession sends five (the key locks, the
one statement that checks the rules, the order lock with the chain head, the insert, the
commit with its flush), and every statement of a write section runs on a generic plan."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from agent_custody_state import Ledger

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


def test_a_supersession_is_five_round_trips(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fact = {"subject": "s", "predicate": "p", "space": "org", "actor": "a"}
    with Ledger(f"{postgres_url}&table=trips") as ledger:
        first = ledger.assert_fact(**fact, value=1)
        sent = _sent(monkeypatch)
        second = ledger.assert_fact(**fact, value=2, supersedes=first.fact_id)
        assert ledger.get(first.fact_id).valid_to == second.fact.valid_from  # type: ignore[union-attr]
    write = sent[:5]
    assert write[0].startswith("BEGIN; SET LOCAL plan_cache_mode = force_generic_plan;")
    assert write[1].startswith("WITH RECURSIVE acs_walk")
    assert write[2].startswith("SELECT pg_advisory_xact_lock(")  # the order lock, the head
    assert write[3].startswith("INSERT INTO")
    assert write[4].startswith("COMMIT")
    assert not any(s.startswith(("BEGIN", "INSERT", "COMMIT")) for s in sent[5:]), sent


def test_a_table_locked_section_runs_on_generic_plans(postgres_url: str) -> None:
    with Ledger(f"{postgres_url}&table=generic&lock=table") as ledger:
        backend: Any = ledger.backend
        with backend.transaction():
            mode = backend._raw.execute("SHOW plan_cache_mode").fetchone()[0]
        after = backend._raw.execute("SHOW plan_cache_mode").fetchone()[0]
    assert (mode, after) == ("force_generic_plan", "auto")  # SET LOCAL: the section only
