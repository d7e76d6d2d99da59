"""Several processes on one SQLite file: visibility, no lost appends, the supersession race."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_custody_state_conformance.multiprocess import MultiProcessConformance


class TestSqliteProcesses(MultiProcessConformance):
    @pytest.fixture
    def shared_location(self, tmp_path: Path) -> str:
        return str(tmp_path / "shared.sqlite")
