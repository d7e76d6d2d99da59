"""agent-custody-state-langgraph: registers the ``langgraph`` store type.

Hookimpls only: LangGraph is imported when a configured store is built.
"""

from __future__ import annotations

from agent_custody_state.plugin import RegisterStore, hookimpl


@hookimpl
def register_stores(register: RegisterStore) -> None:
    register(
        "langgraph",
        "agent_custody_state_langgraph.store:build",
        settings="agent_custody_state_langgraph.settings:LangGraphSettings",
        description="a LangGraph BaseStore (memory, SQLite or PostgreSQL): one item per fact",
    )
