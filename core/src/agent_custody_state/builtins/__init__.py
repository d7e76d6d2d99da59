"""The builtin plugin: the JSONL and in-memory event backends and the in-memory reference store,
registered like any plugin."""

from __future__ import annotations

from .. import hookimpl
from ..hookspecs import RegisterEventBackend, RegisterStore


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


@hookimpl
def register_stores(register: RegisterStore) -> None:
    register(
        "memory",
        "agent_custody_state.builtins.memory_store:build",
        settings="agent_custody_state.builtins.memory_store:MemoryStoreSettings",
        description="in-process reference store (nothing persists); for tests and demos",
    )
