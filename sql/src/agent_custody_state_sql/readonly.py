"""A SQL event backend opened read-only (``read_only=True``): no DDL, no writes, and the
database told so.

The dialect sets ``read_only`` before the shared layers open the connection. Then every
connection the backend makes is put in the database's own read-only mode (``SESSION``), so a
statement that would write fails in the database even if some path forgot to ask; the schema
is inspected, never created or migrated (``check_schema``); and a write section is refused
before it begins (``SqlConnection._begin``).
"""

from __future__ import annotations

from typing import Any

from agent_custody_state.plugin import EventBackendError

#: The statement that makes a session read-only, by SQLAlchemy dialect name. PostgreSQL makes
#: every later transaction ``READ ONLY`` (``default_transaction_read_only``); SQLite, already
#: opened with ``mode=ro``, refuses any statement that changes the file (``query_only``).
SESSION = {
    "postgresql": "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
    "sqlite": "PRAGMA query_only=ON",
}


def enter(raw: Any, dialect: str) -> None:
    """Put the driver connection ``raw`` of ``dialect`` in read-only mode, if it has one."""
    statement = SESSION.get(dialect)
    if statement is not None:
        raw.execute(statement)


def check_schema(location: str, table: str, columns: set[str] | None, missing: list[str]) -> None:
    """What a read-only open does with a schema a writer would create or migrate: a missing
    table or query columns are an error (the reads need them); missing indexes are left
    missing (the reads scan, with the same answers)."""
    if columns is None:
        raise EventBackendError(
            f"{location}: no events table {table}; a read-only open never creates one (check "
            "the location and ?table=)"
        )
    if missing:
        raise EventBackendError(
            f"{location}: the table {table} has an older layout (no {', '.join(missing)} "
            "columns); a read-only open does not migrate it: open it once for writing"
        )


def refuse_section(read_only: bool, location: str) -> None:
    """Refuse a write section of a backend opened read-only."""
    if read_only:
        raise EventBackendError(f"{location} is opened read-only; its write sections are refused")
