"""Fixtures for the Postgres backend tests: a fresh database per test on the embedded server."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from agent_custody_state.eventstore import EventStore
from agent_custody_state_events_postgres.store import PostgresStore


@pytest.fixture
def pg_factory(postgres_url: str) -> Callable[..., EventStore]:
    """``factory(name="ledger")``: the table ``<name>`` (a valid identifier) in this test's database."""

    def factory(name: str = "ledger", **params: str) -> EventStore:
        table = name.replace("-", "_")
        extra = "".join(f"&{k}={v}" for k, v in params.items())
        return PostgresStore(f"{postgres_url}&table={table}{extra}")

    return factory
