"""The store conformance suite proves itself on the builtin in-memory reference store."""

from __future__ import annotations

from typing import Any

import pytest

from agent_custody_state.stores.inprocess import InProcessStore, MemoryVendor
from agent_custody_state_conformance.stores import StoreConformance


class MemoryBackdoor:
    """Reads ``MemoryVendor.rows`` directly: the primary data, never the lagging search."""

    def __init__(self, vendor: MemoryVendor) -> None:
        self.vendor = vendor

    def find(self, fact_id: str) -> dict[str, Any] | None:
        for record_id, record in self.vendor.rows.items():
            if record["metadata"].get("factId") == fact_id:
                return {"id": record_id, **record}
        return None


class TestMemoryStoreConformance(StoreConformance):
    capabilities = frozenset({"verify", "lag", "fail", "held"})

    @pytest.fixture
    def vendor(self) -> MemoryVendor:
        return MemoryVendor()

    @pytest.fixture
    def store(self, vendor: MemoryVendor) -> InProcessStore:
        return InProcessStore("memory", vendor)

    @pytest.fixture
    def backdoor(self, vendor: MemoryVendor) -> MemoryBackdoor:
        return MemoryBackdoor(vendor)

    @pytest.fixture
    def lagging_store(self) -> InProcessStore:
        return InProcessStore("memory", MemoryVendor(lag_checks=2))

    @pytest.fixture
    def failing_store(self) -> InProcessStore:
        return InProcessStore("memory", MemoryVendor(fail=True))
