"""A removal blocked by a lock held elsewhere fails in bounded time, naming the cause.

Store calls run in worker threads that cannot be cancelled, and the custody flows are shielded,
so an unbounded statement would hang the retract or forget for as long as the other session
keeps its lock (a migration, an open transaction of another service).
"""

from __future__ import annotations

import threading
import time

import anyio
import psycopg
import pytest

from agent_custody_state.stores import StoreSet
from agent_custody_state_conformance.embeddings import embed_8
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_pgvector.settings import PgvectorSettings
from agent_custody_state_pgvector.store import PgvectorStore

LOCK_SECONDS = 6.0


def test_the_setting_defaults_to_a_bound() -> None:
    settings = PgvectorSettings.model_validate({"dsn_env": "X", "dimensions": 8, "embed": "m:f"})
    assert settings.statement_timeout == 30.0


@pytest.mark.postgres
def test_a_locked_table_fails_the_removal_instead_of_hanging(postgres_url: str) -> None:
    store = PgvectorStore(
        "vectors", postgres_url, embed_8, dimensions=8, table="facts", statement_timeout=0.5
    )
    fact = make_fact()
    locked, release = threading.Event(), threading.Event()

    def hold_lock() -> None:
        with psycopg.connect(postgres_url) as conn:
            conn.execute("LOCK TABLE facts IN ACCESS EXCLUSIVE MODE")
            locked.set()
            release.wait(LOCK_SECONDS)

    try:
        held = fact.with_(external={"vectors": anyio.run(store.put, fact)})
        holder = threading.Thread(target=hold_lock)
        holder.start()
        assert locked.wait(10)
        started = time.monotonic()
        report = anyio.run(StoreSet([store]).remove_all, held)
        elapsed = time.monotonic() - started
        release.set()
        holder.join()
        assert elapsed < LOCK_SECONDS / 2, f"the removal waited {elapsed:.1f}s for the lock"
        assert report.verification == {"vectors": "failed"}
        assert "statement timeout" in report.still_held["vectors"]
        # Nothing was removed: the row is still there, and verification says so.
        assert anyio.run(store.verify_removed, fact.fact_id, held) is False
    finally:
        release.set()
        store.close()
