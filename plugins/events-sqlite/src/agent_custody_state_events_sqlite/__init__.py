"""SQLite event backend plugin: registers ``sqlite`` for ``.sqlite`` and ``.db`` paths.

Only the hook lives here; SQLAlchemy is imported when a SQLite ledger is opened.
"""

from __future__ import annotations

from agent_custody_state.plugin import RegisterEventBackend, hookimpl


@hookimpl
def register_event_backends(register: RegisterEventBackend) -> None:
    register(
        "sqlite",
        "agent_custody_state_events_sqlite.store:SqliteBackend",
        suffixes=(".sqlite", ".db"),
        description="SQLite file (WAL, synchronous=FULL, secure_delete); paths ending .sqlite/.db",
    )
