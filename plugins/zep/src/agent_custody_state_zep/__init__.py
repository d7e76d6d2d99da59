"""Zep store plugin: registers the ``zep`` store type (episodes in a Zep v4 graph).

Only the hook lives here; ``zep-cloud`` is imported when a configured store of this type is built.
"""

from __future__ import annotations

from agent_custody_state.plugin import RegisterStore, hookimpl


@hookimpl
def register_stores(register: RegisterStore) -> None:
    register(
        "zep",
        "agent_custody_state_zep.store:build",
        settings="agent_custody_state_zep.settings:ZepSettings",
        description="Zep (v4 API): one JSON episode per fact in a user's or a named graph, "
        "custody metadata on the episode; deletes awaited as background tasks",
    )
