"""Write-through stores through the real HTTP server (in process): order, compensation,
removal, verification, partial failures."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger, serve_memory_http
from agent_custody_state.ledger.model import Fact
from agent_custody_state.stores import custody_metadata, fact_text
from agent_custody_state_conformance.gateway import GatewayClient

pytestmark = pytest.mark.anyio
TOKEN = "store-test-token"


class FakeStore:
    """Keeps what it is given; can refuse puts, fail removals, or stay indexed."""

    def __init__(
        self,
        name: str,
        *,
        refuse_put: bool = False,
        fail_remove: bool = False,
        stays_indexed: bool = False,
    ) -> None:
        self.name = name
        self.items: dict[str, dict[str, Any]] = {}
        self.removed: list[tuple[str, Any]] = []
        self.refuse_put, self.fail_remove, self.stays_indexed = (
            refuse_put,
            fail_remove,
            stays_indexed,
        )
        self.verifications = 0

    async def put(self, fact: Fact) -> str:
        if self.refuse_put:
            raise RuntimeError("quota exceeded")
        external = f"{self.name}-{len(self.items) + len(self.removed) + 1}"
        self.items[external] = {"text": fact_text(fact), "metadata": custody_metadata(fact)}
        return external

    async def remove(self, external_id: str, fact: Fact) -> None:
        if self.fail_remove:
            raise RuntimeError("service unavailable")
        self.removed.append((external_id, fact.value))
        if not self.stays_indexed:
            self.items.pop(external_id, None)

    async def verify_removed(self, external_id: str, fact: Fact) -> bool:
        self.verifications += 1
        return external_id not in self.items


class BlindStore(FakeStore):
    """A store that cannot be asked whether something is gone."""

    verify_removed = None  # type: ignore[assignment]


@asynccontextmanager
async def serve(
    tmp_path: Path, *stores: Any, **options: Any
) -> AsyncIterator[tuple[GatewayClient, Ledger]]:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    server = serve_memory_http(
        ledger,
        port=0,
        tokens={TOKEN: "gateway"},
        stores=list(stores),
        verify={"attempts": 2, "delay_ms": 1},
        **options,
    )
    try:
        async with GatewayClient.http(server.url, token=TOKEN) as gw:
            yield gw, ledger
    finally:
        server.close()
        ledger.close()


WRITE = {"subject": "acct:42", "predicate": "plan", "value": "pro", "space": "org"}


async def test_write_puts_into_every_store_in_order_then_records_ids(tmp_path: Path) -> None:
    a, b = FakeStore("a"), FakeStore("b")
    async with serve(tmp_path, a, b) as (gw, ledger):
        result = await gw.call("memory.write", WRITE)
        fact = result.data["fact"]
        assert fact["external"] == {"a": "a-1", "b": "b-1"}
        assert list(fact).index("external") == list(fact).index("provenance") + 1
        assert a.items["a-1"] == {
            "text": "acct:42 plan: pro",
            "metadata": {
                "factId": fact["factId"],
                "space": "org",
                "actor": "test-agent",
                "provenance": "attested",
                "receiptId": result.receipt,
                "validFrom": fact["validFrom"],
                "source": "agent-custody",
            },
        }
        stored = ledger.get(fact["factId"])
        assert stored is not None and stored.external == {"a": "a-1", "b": "b-1"}


async def test_refusing_store_fails_the_write_and_compensates(tmp_path: Path) -> None:
    a, b = FakeStore("a"), FakeStore("b", refuse_put=True)
    async with serve(tmp_path, a, b) as (gw, ledger):
        result = await gw.call("memory.write", WRITE)
        assert result.is_error
        assert result.text == (
            "store b refused the write: quota exceeded; compensated: a: removed, "
            "b: may hold a copy (cannot look up by fact id)"
        )
        assert ledger.count() == 0
        assert a.items == {} and a.removed == [("a-1", "pro")]


async def test_invalid_write_reaches_no_store(tmp_path: Path) -> None:
    a = FakeStore("a")
    async with serve(tmp_path, a) as (gw, _ledger):
        result = await gw.call("memory.write", {**WRITE, "supersedes": "nope"})
        assert result.text == "cannot supersede unknown fact nope"
        assert a.items == {} and a.removed == []


async def test_retract_removes_and_verifies(tmp_path: Path) -> None:
    a, blind = FakeStore("a"), BlindStore("blind")
    async with serve(tmp_path, a, blind) as (gw, _ledger):
        fact_id = (await gw.call("memory.write", WRITE)).data["fact"]["factId"]
        result = await gw.call("memory.retract", {"factId": fact_id, "reason": "wrong"})
        assert not result.is_error
        assert result.data["removedFrom"] == ["a", "blind"]
        assert result.data["verification"] == {"a": "verified", "blind": "unverified"}


async def test_retract_with_a_failing_store_is_an_error_with_the_json(tmp_path: Path) -> None:
    good, bad = FakeStore("good"), FakeStore("bad", fail_remove=True)
    async with serve(tmp_path, good, bad) as (gw, ledger):
        fact_id = (await gw.call("memory.write", WRITE)).data["fact"]["factId"]
        result = await gw.call("memory.retract", {"factId": fact_id, "reason": "wrong"})
        assert result.is_error and len(result.texts) == 2
        assert (
            result.texts[0] == "retracted in the ledger, but still held by bad: service unavailable"
        )
        data = json.loads(result.texts[1])
        assert data["removedFrom"] == ["good"]
        assert data["verification"] == {"good": "verified", "bad": "failed"}
        assert ledger.is_retracted(fact_id)


async def test_forget_reaches_stores_with_the_value_and_reports(tmp_path: Path) -> None:
    sticky, bad = FakeStore("sticky", stays_indexed=True), FakeStore("bad", fail_remove=True)
    async with serve(tmp_path, sticky, bad) as (gw, ledger):
        fact_id = (await gw.call("memory.write", WRITE)).data["fact"]["factId"]
        result = await gw.call("memory.forget", {"factId": fact_id, "reason": "gdpr"})
        assert result.is_error
        assert (
            result.texts[0] == "erased from the ledger, but still held by bad: service unavailable"
        )
        data = json.loads(result.texts[1])
        assert data["erasedFromLedger"] is True and data["stillHeld"] == ["bad"]
        assert data["verification"] == {"sticky": "stillIndexed", "bad": "failed"}
        assert sticky.verifications == 2  # attempts
        assert sticky.removed == [("sticky-1", "pro")]  # the store got the value to find it
        fact = ledger.get(fact_id)
        assert fact is not None and fact.value is None


async def test_sweep_reaches_stores(tmp_path: Path) -> None:
    a = FakeStore("a")
    async with serve(tmp_path, a) as (gw, _ledger):
        fact_id = (await gw.call("memory.write", WRITE)).data["fact"]["factId"]
        result = await gw.call(
            "memory.sweep", {"reason": "retention", "before": "2999-01-01T00:00:00Z"}
        )
        assert result.data["forgotten"][0]["factId"] == fact_id
        assert result.data["forgotten"][0]["removedFrom"] == ["a"]
        assert result.data["forgotten"][0]["verification"] == {"a": "verified"}
        assert a.items == {}


def test_cli_sweep_with_config_reaches_the_configured_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_plugins: Any
) -> None:
    from pydantic import BaseModel

    from agent_custody_state import cli, hookimpl

    built: list[FakeStore] = []

    class Settings(BaseModel):
        label: str

    def factory(settings: Settings, *, name: str) -> FakeStore:
        store = FakeStore(name)
        store.items["pre-1"] = {"label": settings.label}
        built.append(store)
        return store

    class Plugin:
        @hookimpl
        def register_stores(self, register: Callable[..., None]) -> None:
            register("fake", factory, settings=Settings)

    isolated_plugins.register_plugin(Plugin(), name="fake-stores")
    ledger_path = tmp_path / "ledger.jsonl"
    with Ledger(ledger_path) as ledger:
        ledger.assert_fact(
            subject="s", predicate="p", value=1, space="org", actor="a", external={"mine": "pre-1"}
        )
    config = tmp_path / "memory.toml"
    config.write_text('[[stores]]\nname = "mine"\ntype = "fake"\nlabel = "x"\n')
    code = cli.main(
        [
            "sweep",
            "--ledger",
            str(ledger_path),
            "--before",
            "2999-01-01T00:00:00Z",
            "--reason",
            "r",
            "--config",
            str(config),
        ]
    )
    assert code == 0
    assert built[0].removed == [("pre-1", 1)] and built[0].items == {}
