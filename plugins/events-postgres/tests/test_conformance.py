"""The shared event-backend conformance suite, run on the Postgres backend (embedded server)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state_conformance.backends import EventBackendConformance, KeyStoreFactory

pytestmark = pytest.mark.postgres


class TestPostgresConformance(EventBackendConformance):
    @pytest.fixture(autouse=True)
    def _scannable(self, request: pytest.FixtureRequest, embedded_postgres: Any) -> Iterator[None]:
        # The certificate rules (CE-*) scan the relation files, which needs what a local
        # operator's role has (data_directory, CHECKPOINT); without it they would pass unscanned.
        if "local_files" not in request.node.name and "certificate" not in request.node.name:
            yield
            return
        with embedded_postgres.scannable():
            yield

    @pytest.fixture
    def store_factory(self, pg_factory: Callable[..., EventBackend]) -> Callable[..., EventBackend]:
        return pg_factory

    @pytest.fixture
    def key_store_factory(
        self, embedded_postgres: Any, postgres_url: str
    ) -> Iterator[KeyStoreFactory]:
        # The default key store is the database <db>_keys, which the test role (no CREATEDB,
        # like an application role on a hosted server) cannot create itself.
        keys_db = postgres_url.split("@/", 1)[1].split("?", 1)[0] + "_keys"
        embedded_postgres.create_database(keys_db)
        try:
            yield lambda backend: None
        finally:
            embedded_postgres.drop_database(keys_db)
