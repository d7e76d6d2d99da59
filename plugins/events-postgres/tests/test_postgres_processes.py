"""Several processes on one Postgres table: visibility, no lost appends, the supersession race."""

from __future__ import annotations

import pytest

from agent_custody_state_conformance.multiprocess import MultiProcessConformance

pytestmark = pytest.mark.postgres


class TestPostgresProcesses(MultiProcessConformance):
    @pytest.fixture
    def shared_location(self, postgres_url: str) -> str:
        return f"{postgres_url}&table=shared"
