"""The conformance suite proves itself on the two builtin backends."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agent_custody_state.backends.jsonl import JsonlBackend
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state_conformance.backends import EventBackendConformance
from agent_custody_state_conformance.multiprocess import MultiProcessConformance


class TestJsonlConformance(EventBackendConformance):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> Callable[..., EventBackend]:
        return lambda name="ledger": JsonlBackend(tmp_path / f"{name}.jsonl")


class TestJsonlProcesses(MultiProcessConformance):
    """JSONL shares a file between processes (a lock file, lines read as they come)."""

    @pytest.fixture
    def shared_location(self, tmp_path: Path) -> str:
        return str(tmp_path / "shared.jsonl")


class TestMemoryConformance(EventBackendConformance):
    @pytest.fixture
    def store_factory(self) -> Callable[..., EventBackend]:
        stores: dict[str, MemoryBackend] = {}

        def factory(name: str = "ledger") -> EventBackend:
            # One shared object per name stands in for "the same location".
            return stores.setdefault(name, _Shared(stores, name))

        return factory


class _Shared(MemoryBackend):
    """A memory store that survives close(), so reopen tests see the same events."""

    def __init__(self, registry: dict[str, MemoryBackend], name: str) -> None:
        super().__init__(f"memory:{name}")

    def close(self) -> None:
        pass
