"""Letta write-through store plugin: registers the ``letta`` store type.

Only the hook lives here; ``letta-client`` is imported when a configured store is built.
"""

from __future__ import annotations

from agent_custody_state.plugin import RegisterStore, hookimpl


@hookimpl
def register_stores(register: RegisterStore) -> None:
    register(
        "letta",
        "agent_custody_state_letta.store:build",
        settings="agent_custody_state_letta.settings:LettaSettings",
        description="Letta agent archival memory: one passage per fact, custody carried as tags",
    )
