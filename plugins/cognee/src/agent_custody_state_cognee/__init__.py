"""Cognee write-through store plugin: registers the ``cognee`` store type.

Only the hook lives here; the adapter (and ``httpx``) is imported when a configured store is built.
"""

from __future__ import annotations

from agent_custody_state.plugin import RegisterStore, hookimpl


@hookimpl
def register_stores(register: RegisterStore) -> None:
    register(
        "cognee",
        "agent_custody_state_cognee.store:build",
        settings="agent_custody_state_cognee.settings:CogneeSettings",
        description="Cognee dataset over its REST API: one data item per fact, custody as "
        "external metadata",
    )
