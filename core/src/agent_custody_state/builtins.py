"""The builtin plugin: the JSONL and in-memory event backends and the in-memory reference store,
registered like any plugin."""

from __future__ import annotations

from agent_custody_state.hookspecs import RegisterEventBackend, RegisterStore, hookimpl


@hookimpl
def register_event_backends(register: RegisterEventBackend) -> None:
    register(
        "memory",
        "agent_custody_state.backends.memory:MemoryBackend",
        schemes=("memory",),
        suffixes=(":memory:",),
        description="in-memory reference backend (nothing persists); location memory: or :memory:",
    )
    register(
        "jsonl",
        "agent_custody_state.backends.jsonl:JsonlBackend",
        description="one JSON event per line; the default for any path that is not .sqlite/.db",
        fallback=True,
    )


@hookimpl
def register_stores(register: RegisterStore) -> None:
    register(
        "memory",
        "agent_custody_state.stores.inprocess:build",
        settings="agent_custody_state.stores.inprocess:InProcessStoreSettings",
        description="in-process reference store (nothing persists); for tests and demos",
    )
