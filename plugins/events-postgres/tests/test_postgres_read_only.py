"""``Ledger("postgresql://...", read_only=True)``: the session is ``READ ONLY``, no table or index
is created, a missing table is a clear error, and every write is refused with code
``read_only`` (docs/backends.md, "Read-only opens")."""

from __future__ import annotations

import psycopg
import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state_events_postgres.location import libpq_url, parse_location

pytestmark = pytest.mark.postgres

FACT = {"subject": "acct:1", "predicate": "plan", "space": "org", "actor": "a"}


def _tables(postgres_url: str) -> list[str]:
    where = parse_location(f"{postgres_url}&table=events")
    with psycopg.connect(libpq_url(where.connect_url)) as db:
        rows = db.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
        ).fetchall()
    return [r[0] for r in rows]


def test_a_read_only_open_reads_refuses_writes_and_creates_nothing(postgres_url: str) -> None:
    location = f"{postgres_url}&table=ro_events"
    with Ledger(location) as writer:
        fact = writer.assert_fact(**FACT, value="basic")
    tables = _tables(postgres_url)
    with Ledger(location, read_only=True) as reader:
        assert [f.value for f in reader.as_of()] == ["basic"]
        assert len(reader.history(fact.fact_id)) == 1
        with pytest.raises(LedgerError, match="is opened read-only; retract writes") as refused:
            reader.retract(fact_id=fact.fact_id, actor="a", reason="r")
        assert refused.value.code == "read_only"
        with pytest.raises(EventBackendError, match="opened read-only; its write sections"):
            with reader.backend.transaction():
                pass
        # Beneath the refusals, the session itself is read-only.
        raw = reader.backend._raw  # type: ignore[attr-defined]
        assert raw.execute("SHOW default_transaction_read_only").fetchone()[0] == "on"
    assert _tables(postgres_url) == tables
    with Ledger(location) as writer:
        assert writer.count() == 1


def test_a_missing_table_is_refused_and_not_created(postgres_url: str) -> None:
    tables = _tables(postgres_url)
    with pytest.raises(EventBackendError, match="no events table .*a read-only open never"):
        Ledger(f"{postgres_url}&table=absent", read_only=True)
    assert _tables(postgres_url) == tables
