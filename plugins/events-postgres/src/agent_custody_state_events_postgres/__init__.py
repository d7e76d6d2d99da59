"""PostgreSQL event backend plugin: registers ``postgres`` for ``postgres://`` URLs.

Only the hook lives here; SQLAlchemy and psycopg are imported when a Postgres ledger is opened.
"""

from __future__ import annotations

from agent_custody_state.plugin import RegisterEventBackend, hookimpl


@hookimpl
def register_event_backends(register: RegisterEventBackend) -> None:
    register(
        "postgres",
        "agent_custody_state_events_postgres.store:PostgresBackend",
        schemes=("postgres", "postgresql"),
        description="PostgreSQL table; postgres[ql]://user@host/db?table=schema.events&vacuum=false",
    )
