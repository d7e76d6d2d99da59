"""The shared event-backend conformance suite, run on the SQLite backend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state_conformance.backends import EventBackendConformance
from agent_custody_state_events_sqlite.store import SqliteBackend


class TestSqliteConformance(EventBackendConformance):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> Callable[..., EventBackend]:
        return lambda name="ledger": SqliteBackend(tmp_path / f"{name}.sqlite")
