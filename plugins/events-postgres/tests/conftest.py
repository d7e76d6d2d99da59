"""Fixtures for the Postgres backend tests: a fresh database per test on the embedded server."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state_events_postgres.store import PostgresBackend


@pytest.fixture
def pg_factory(postgres_url: str) -> Callable[..., EventBackend]:
    """``factory(name="ledger")``: the table ``<name>`` (a valid identifier) in this test's database."""

    def factory(name: str = "ledger", **params: str) -> EventBackend:
        table = name.replace("-", "_")
        extra = "".join(f"&{k}={v}" for k, v in params.items())
        return PostgresBackend(f"{postgres_url}&table={table}{extra}")

    return factory
