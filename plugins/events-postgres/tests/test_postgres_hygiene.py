"""The plugin's entry point resolves, registers ``postgres`` and imports no driver."""

from __future__ import annotations

from typing import ClassVar

from agent_custody_state_conformance.hygiene import PluginHygiene


class TestPostgresHygiene(PluginHygiene):
    entry_point = "events-postgres"
    registers: ClassVar[set[str]] = {"event backend postgres"}
    heavy_modules = (
        "sqlalchemy",
        "psycopg",
        "agent_custody_state_sql.backend",
        "agent_custody_state_sql.schema",
    )
