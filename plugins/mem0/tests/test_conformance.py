"""The shared store suite on the mem0 store: the platform through the real ``MemoryClient`` on
the loopback fake (synchronous and asynchronous adds), and the real local ``Memory``."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import local_settings

from agent_custody_state_conformance.hygiene import PluginHygiene
from agent_custody_state_conformance.stores import StoreConformance
from agent_custody_state_mem0.store import Mem0Store, build
from agent_custody_state_mem0.testing import FakeMem0

_MARKER = re.compile(r" \(fact ([^()]+)\)$")


def decoded(text: str, fact_id: str) -> str:
    """The fact text without the ``(fact <id>)`` marker the adapter adds against de-dup."""
    match = _MARKER.search(text)
    return text[: match.start()] if match and match.group(1) == fact_id else text


class FakeBackdoor:
    """Reads the fake platform's primary records directly, never through the SDK."""

    def __init__(self, fake: FakeMem0) -> None:
        self.fake = fake

    def find(self, fact_id: str) -> dict[str, Any] | None:
        with self.fake.lock:
            records = [
                r
                for r in self.fake.items.values()
                if (r.get("metadata") or {}).get("factId") == fact_id
            ]
        assert len(records) <= 1, f"fact {fact_id} is held by {len(records)} memories"
        if not records:
            return None
        record = records[0]
        return {
            "id": record["id"],
            "text": decoded(record["memory"], fact_id),
            "metadata": record["metadata"],
        }


class TestMem0Platform(StoreConformance):
    """Direct import (``infer=False``) answered synchronously, with the fake's de-dup on."""

    capabilities = frozenset({"verify", "held", "lag", "fail", "relocate"})

    @pytest.fixture
    def store(self, make_store: Callable[..., Mem0Store]) -> Mem0Store:
        return make_store()

    @pytest.fixture
    def relocated_store(self, make_store: Callable[..., Mem0Store]) -> Mem0Store:
        return make_store(user_id="u-other")

    @pytest.fixture
    def backdoor(self, fake: FakeMem0) -> FakeBackdoor:
        return FakeBackdoor(fake)

    @pytest.fixture
    def lagging_store(self, fake: FakeMem0, make_store: Callable[..., Mem0Store]) -> Mem0Store:
        fake.lag_checks = 2  # two index reads; one verify makes one or two
        return make_store()

    @pytest.fixture
    def failing_store(self, fake: FakeMem0, make_store: Callable[..., Mem0Store]) -> Mem0Store:
        fake.fail = True
        return make_store()


class TestMem0PlatformAsyncAdd(TestMem0Platform):
    """Every add answered ``PENDING``: ids come from polling the add event."""

    @pytest.fixture
    def fake(self, fake: FakeMem0) -> FakeMem0:
        fake.async_add = True
        fake.event_polls_pending = 2
        return fake


class LocalBackdoor:
    """Reads the embedded qdrant collection with qdrant's own client (no mem0 code)."""

    def __init__(self, store: Mem0Store) -> None:
        vector_store = store.backend._memory.vector_store  # type: ignore[attr-defined]
        self.client = vector_store.client
        self.collection = vector_store.collection_name

    def find(self, fact_id: str) -> dict[str, Any] | None:
        from qdrant_client import models

        points, _ = self.client.scroll(
            self.collection,
            scroll_filter=models.Filter(
                must=[models.FieldCondition(key="factId", match=models.MatchValue(value=fact_id))]
            ),
            with_payload=True,
            limit=10,
        )
        assert len(points) <= 1, f"fact {fact_id} is held by {len(points)} points"
        if not points:
            return None
        payload = dict(points[0].payload or {})
        return {
            "id": str(points[0].id),
            "text": decoded(payload["data"], fact_id),
            "metadata": payload,
        }


class TestMem0Local(StoreConformance):
    """The real open-source ``Memory``: embedded qdrant on disk, deterministic embeddings.

    No "lag" or "fail": a real engine cannot be told to lag or to fail on demand (the platform
    classes above cover both paths of the shared store code).
    """

    capabilities = frozenset({"verify", "held", "relocate"})

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[Mem0Store]:
        store = build(local_settings(tmp_path), name="mem0-local")
        yield store
        store.close()

    @pytest.fixture
    def relocated_store(self, tmp_path: Path) -> Iterator[Mem0Store]:
        # Another vector store location: embedded qdrant locks its folder to one client.
        store = build(local_settings(tmp_path / "other"), name="mem0-local")
        yield store
        store.close()

    @pytest.fixture
    def backdoor(self, store: Mem0Store) -> LocalBackdoor:
        return LocalBackdoor(store)


class TestHygiene(PluginHygiene):
    entry_point = "mem0"
    registers = {"store mem0"}  # noqa: RUF012 - the suite's own class attribute
    heavy_modules = ("mem0",)
