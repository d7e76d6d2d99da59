"""Stores mirror the present, through the memory server's tools (in-process HTTP, real client).

The reference store's vendor rows are read directly, so each assertion is about what a
retrieval would find, not about what the server reports.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger, serve_memory_http
from agent_custody_state.config import StoreConfig
from agent_custody_state.storebuild import build_stores
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.inprocess import InProcessStore, MemoryVendor
from agent_custody_state_conformance.gateway import GatewayClient

pytestmark = pytest.mark.anyio
TOKEN = "mirror-test-token"
WRITE = {"subject": "acct:42", "predicate": "plan", "space": "org"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def held(store: InProcessStore) -> dict[str, Any]:
    return {r["metadata"]["factId"]: r["value"] for r in store.vendor.rows.values()}


@asynccontextmanager
async def serve(tmp_path: Path, stores: StoreSet) -> AsyncIterator[tuple[GatewayClient, Ledger]]:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    server = serve_memory_http(ledger, port=0, tokens={TOKEN: "gateway"}, stores=stores)
    try:
        async with GatewayClient.http(server.url, token=TOKEN) as gw:
            yield gw, ledger
    finally:
        server.close()
        ledger.close()


async def test_supersede_retract_forget_sweep(tmp_path: Path) -> None:
    mirror, log = InProcessStore("mirror"), InProcessStore("log")
    stores = StoreSet([mirror, log], VerifyPolicy(attempts=2, delay=0.001), append_only={"log"})
    async with serve(tmp_path, stores) as (gw, _ledger):
        a = (await gw.call("memory.write", {**WRITE, "value": "pro"})).data
        assert "mirror" not in a
        a_id = a["fact"]["factId"]
        b = await gw.call("memory.write", {**WRITE, "value": "enterprise", "supersedes": a_id})
        assert not b.is_error, b.text
        b_id = b.data["fact"]["factId"]
        assert b.data["mirror"] == {
            "factId": a_id,
            "removedFrom": ["mirror"],
            "stillHeld": [],
            "verification": {"mirror": "verified"},
        }
        assert held(mirror) == {b_id: "enterprise"}
        assert held(log) == {a_id: "pro", b_id: "enterprise"}

        undo = await gw.call("memory.retract", {"factId": b_id, "reason": "wrong plan"})
        assert not undo.is_error, undo.text
        assert undo.data["removedFrom"] == ["mirror", "log"]
        restored = undo.data["restored"]
        assert restored["factId"] == a_id and restored["failed"] == {}
        assert held(mirror) == {a_id: "pro"}
        assert held(log) == {a_id: "pro"}
        events = (await gw.call("memory.history", {"factId": b_id})).data["events"]
        assert events[-1]["kind"] == "retract"
        assert events[-1]["restored"] == {"factId": a_id, "external": restored["external"]}

        # A sweep reaches the record the fact was put back under.
        swept = await gw.call(
            "memory.sweep", {"reason": "retention", "before": "2999-01-01T00:00:00Z"}
        )
        assert not swept.is_error, swept.text
        entry = next(e for e in swept.data["forgotten"] if e["factId"] == a_id)
        assert entry["verification"] == {"mirror": "verified", "log": "verified"}
        assert held(mirror) == {} and held(log) == {}
    # The restored ids are in the ledger file: a reopened ledger knows them.
    with Ledger(tmp_path / "ledger.jsonl") as again:
        assert again.current_external(a_id)["mirror"] == restored["external"]["mirror"]


async def test_forget_of_the_head_puts_back_and_retract_failure_is_named(tmp_path: Path) -> None:
    mirror = InProcessStore("mirror")
    stores = StoreSet([mirror], VerifyPolicy(attempts=1, delay=0))
    async with serve(tmp_path, stores) as (gw, _ledger):
        a_id = (await gw.call("memory.write", {**WRITE, "value": "pro"})).data["fact"]["factId"]
        b = (await gw.call("memory.write", {**WRITE, "value": "max", "supersedes": a_id})).data
        gone = await gw.call("memory.forget", {"factId": b["fact"]["factId"], "reason": "gdpr"})
        assert not gone.is_error, gone.text
        assert gone.data["restored"]["factId"] == a_id
        assert held(mirror) == {a_id: "pro"}
        mirror.vendor.fail = True
        failed = await gw.call("memory.retract", {"factId": a_id, "reason": "wrong"})
        assert failed.is_error
        assert failed.texts[0].startswith("retracted in the ledger, but still held by mirror:")
        assert "restored" not in failed.data  # a root uncovers nothing


async def test_config_mirror_false_is_append_only() -> None:
    tables = [
        StoreConfig(name="plain", type="memory", mirror=False),
        StoreConfig(name="mirrored", type="memory", lag_checks=1),
    ]
    built = build_stores(tables)
    assert [s.name for s in built] == ["plain", "mirrored"]
    assert [s.name for s in StoreSet(built).mirroring()] == ["mirrored"]
    assert isinstance(built[1].vendor, MemoryVendor) and built[1].vendor.lag_checks == 1


async def test_a_sweep_puts_back_the_fact_its_swept_head_superseded(tmp_path: Path) -> None:
    mirror = InProcessStore("mirror")
    stores = StoreSet([mirror], VerifyPolicy(attempts=1, delay=0))
    async with serve(tmp_path, stores) as (gw, _ledger):
        a_id = (await gw.call("memory.write", {**WRITE, "value": "pro"})).data["fact"]["factId"]
        team = {**WRITE, "space": "team:x", "value": "max", "supersedes": a_id}
        b_id = (await gw.call("memory.write", team)).data["fact"]["factId"]
        assert held(mirror) == {b_id: "max"}
        swept = await gw.call(
            "memory.sweep",
            {"reason": "retention", "before": "2999-01-01T00:00:00Z", "space": "team:x"},
        )
        assert not swept.is_error, swept.text
        (entry,) = swept.data["forgotten"]
        assert entry["factId"] == b_id and entry["restored"]["factId"] == a_id
        assert held(mirror) == {a_id: "pro"}
        events = (await gw.call("memory.history", {"factId": b_id})).data["events"]
        assert events[-1]["kind"] == "forget"
        assert events[-1]["restored"]["external"] == entry["restored"]["external"]
