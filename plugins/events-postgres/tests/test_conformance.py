"""The shared event-backend conformance suite, run on the Postgres backend (embedded server)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state_conformance.backends import EventBackendConformance

pytestmark = pytest.mark.postgres


class TestPostgresConformance(EventBackendConformance):
    @pytest.fixture
    def store_factory(self, pg_factory: Callable[..., EventBackend]) -> Callable[..., EventBackend]:
        return pg_factory
