"""mem0 store plugin: registers the ``mem0`` store type (hosted platform or open-source Memory).

Only the hook lives here; ``mem0ai`` is imported when a configured store of this type is built.
"""

from __future__ import annotations

from agent_custody_state.plugin import RegisterStore, hookimpl


@hookimpl
def register_stores(register: RegisterStore) -> None:
    register(
        "mem0",
        "agent_custody_state_mem0.store:build",
        settings="agent_custody_state_mem0.settings:Mem0Settings",
        description="mem0: hosted platform (MemoryClient) or open-source Memory; one verbatim "
        "memory per fact (infer=False) with the custody metadata",
    )
