"""The shared event-backend conformance suite, run on the SQLite backend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from agent_custody_state.eventstore import EventStore
from agent_custody_state_conformance.backends import EventBackendConformance
from agent_custody_state_events_sqlite.store import SqliteStore


class TestSqliteConformance(EventBackendConformance):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> Callable[..., EventStore]:
        return lambda name="ledger": SqliteStore(tmp_path / f"{name}.sqlite")
