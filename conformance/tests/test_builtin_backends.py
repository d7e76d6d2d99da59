"""The conformance suite proves itself on the two builtin backends."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from agent_custody_state.builtins.jsonl import JsonlStore
from agent_custody_state.builtins.memory import MemoryStore
from agent_custody_state.eventstore import EventStore
from agent_custody_state_conformance.backends import EventBackendConformance


class TestJsonlConformance(EventBackendConformance):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> Callable[..., EventStore]:
        return lambda name="ledger": JsonlStore(tmp_path / f"{name}.jsonl")


class TestMemoryConformance(EventBackendConformance):
    @pytest.fixture
    def store_factory(self) -> Callable[..., EventStore]:
        stores: dict[str, MemoryStore] = {}

        def factory(name: str = "ledger") -> EventStore:
            # One shared object per name stands in for "the same location".
            return stores.setdefault(name, _Shared(stores, name))

        return factory


class _Shared(MemoryStore):
    """A memory store that survives close(), so reopen tests see the same events."""

    def __init__(self, registry: dict[str, MemoryStore], name: str) -> None:
        super().__init__(f"memory:{name}")

    def close(self) -> None:
        pass
