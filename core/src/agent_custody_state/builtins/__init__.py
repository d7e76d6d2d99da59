"""The builtin plugin: the JSONL and in-memory event backends, registered like any plugin."""

from __future__ import annotations

from .. import hookimpl
from ..hookspecs import RegisterEventBackend


@hookimpl
def register_event_backends(register: RegisterEventBackend) -> None:
    register(
        "memory",
        "agent_custody_state.builtins.memory:MemoryStore",
        schemes=("memory",),
        suffixes=(":memory:",),
        description="in-memory reference backend (nothing persists); location memory: or :memory:",
    )
    register(
        "jsonl",
        "agent_custody_state.builtins.jsonl:JsonlStore",
        description="one JSON event per line; the default for any path that is not .sqlite/.db",
    )
