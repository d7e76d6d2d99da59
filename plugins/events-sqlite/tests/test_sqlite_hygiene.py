"""The plugin's entry point resolves, registers ``sqlite`` and imports no SQLAlchemy."""

from __future__ import annotations

from typing import ClassVar

from agent_custody_state_conformance.hygiene import PluginHygiene


class TestSqliteHygiene(PluginHygiene):
    entry_point = "events-sqlite"
    registers: ClassVar[set[str]] = {"event backend sqlite"}
    heavy_modules = (
        "sqlalchemy",
        "sqlite3",
        "agent_custody_state_sql.backend",
        "agent_custody_state_sql.schema",
    )
