"""agent-custody-state-pgvector: registers the ``pgvector`` store type.

Hookimpls only: psycopg and pgvector are imported when a configured store is built.
"""

from __future__ import annotations

from agent_custody_state.plugin import RegisterStore, hookimpl


@hookimpl
def register_stores(register: RegisterStore) -> None:
    register(
        "pgvector",
        "agent_custody_state_pgvector.store:build",
        settings="agent_custody_state_pgvector.settings:PgvectorSettings",
        description="PostgreSQL + pgvector: one row per fact (text, embedding, custody jsonb)",
    )
