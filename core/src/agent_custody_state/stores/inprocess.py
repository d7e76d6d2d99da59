"""The in-memory reference store (store type ``memory``): a write-through store with no vendor.

It exists so that the store machinery (orchestration, mirroring, configuration, the conformance
suite) can be shown and tested without a network service, and as the smallest complete example
of a store adapter. Nothing persists: the "vendor" is a dict living in the server process.

The adapter talks to :class:`MemoryVendor` only through a narrow, vendor-like interface (insert a
record and get an id back, delete by id, read by id, search by metadata: ``held_ids`` is that
search by the fact id), so the conformance
suite's backdoor can read ``MemoryVendor.rows`` directly, the way a real backdoor reads a
vendor's tables without going through the adapter. Two switches model real vendors' failure
modes: ``lag_checks`` (a deleted record stays visible to searches for the next N searches, like a
lagging index) and ``fail`` (every call raises, like a vendor answering 500).
"""

from __future__ import annotations

import copy
import threading
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent_custody_state.ledger.model import Fact
from agent_custody_state.stores.base import StoreError, custody_metadata, fact_text
from agent_custody_state.stores.residual import process_memory


class InProcessStoreSettings(BaseModel):
    """Settings of a ``[[stores]]`` table with ``type = "memory"``."""

    model_config = ConfigDict(extra="forbid")

    lag_checks: int = Field(
        0, ge=0, description="searches that still see a deleted record (simulates index lag)"
    )
    fail: bool = Field(False, description="every call fails (simulates a vendor outage)")


class VendorError(RuntimeError):
    """What the pretend vendor raises when ``fail`` is set (the adapter maps it to StoreError)."""


class MemoryVendor:
    """The pretend vendor: records by id, with a lagging search index and an outage switch."""

    def __init__(self, *, lag_checks: int = 0, fail: bool = False) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        self.lag_checks = lag_checks
        self.fail = fail
        self._ghosts: dict[str, list[Any]] = {}  # id -> [record, searches left]
        self._lock = threading.Lock()

    def _check(self, op: str) -> None:
        if self.fail:
            raise VendorError(f"memory vendor unavailable during {op}")

    def insert(self, record: dict[str, Any]) -> str:
        self._check("insert")
        with self._lock:
            record_id = f"mem-{uuid.uuid4().hex}"
            self.rows[record_id] = copy.deepcopy(record)
            return record_id

    def delete(self, record_id: str) -> None:
        self._check("delete")
        with self._lock:
            record = self.rows.pop(record_id, None)
            if record is not None and self.lag_checks > 0:
                self._ghosts[record_id] = [record, self.lag_checks]

    def get(self, record_id: str) -> dict[str, Any] | None:
        self._check("get")
        with self._lock:
            record = self.rows.get(record_id)
            return copy.deepcopy(record) if record is not None else None

    def search(self, **metadata: Any) -> list[tuple[str, dict[str, Any]]]:
        """Records whose metadata has every given key/value; lagging ghosts included."""
        self._check("search")
        with self._lock:
            hits = [(rid, r) for rid, r in self.rows.items() if _matches(r, metadata)]
            for rid, ghost in list(self._ghosts.items()):
                if _matches(ghost[0], metadata):
                    hits.append((rid, ghost[0]))
                ghost[1] -= 1
                if ghost[1] <= 0:
                    del self._ghosts[rid]
            return [(rid, copy.deepcopy(r)) for rid, r in hits]


def _matches(record: dict[str, Any], metadata: dict[str, Any]) -> bool:
    stored = record.get("metadata", {})
    return all(stored.get(k) == v for k, v in metadata.items())


class InProcessStore:
    """A ``Store`` over :class:`MemoryVendor`: one record per fact, text + value + custody."""

    #: its check reads by id and searches by fact id, never by the value (``outbox``)
    verify_without_value = True
    #: a removed record's objects are freed, not overwritten (``Store.residual``)
    residual = (process_memory(),)

    def __init__(self, name: str = "memory", vendor: MemoryVendor | None = None) -> None:
        self.name = name
        self.vendor = vendor if vendor is not None else MemoryVendor()

    def _error(self, exc: Exception) -> StoreError:
        return StoreError(self.name, str(exc))

    async def put(self, fact: Fact) -> str:
        record = {"text": fact_text(fact), "value": fact.value, "metadata": custody_metadata(fact)}
        try:
            return self.vendor.insert(record)
        except VendorError as exc:
            raise self._error(exc) from exc

    async def remove(self, external_id: str, fact: Fact) -> None:
        try:
            self.vendor.delete(external_id)
        except VendorError as exc:
            raise self._error(exc) from exc

    async def verify_removed(self, external_id: str, fact: Fact) -> bool:
        # Two checks, as every adapter should: the id is gone, and no search by the fact id
        # (which a lagging index may still answer) returns any record of the fact, under this
        # id or another: a vendor that answered "ok" for an id it never had still holds it.
        try:
            if self.vendor.get(external_id) is not None:
                return False
            hits = self.vendor.search(factId=fact.fact_id)
        except VendorError as exc:
            raise self._error(exc) from exc
        return not hits

    async def held_ids(self, fact: Fact) -> list[str]:
        # The search by fact id, less what a lagging index still shows after a delete.
        try:
            hits = self.vendor.search(factId=fact.fact_id)
            return [rid for rid, _ in hits if self.vendor.get(rid) is not None]
        except VendorError as exc:
            raise self._error(exc) from exc


def build(settings: InProcessStoreSettings, *, name: str) -> InProcessStore:
    """The registered factory: ``factory(settings, name=...)``."""
    vendor = MemoryVendor(lag_checks=settings.lag_checks, fail=settings.fail)
    return InProcessStore(name, vendor)
