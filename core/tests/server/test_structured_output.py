"""Annotations and structured output: every tool's result validates against its own schema.

The official client talks to the server in process (``mcp.Client(server)``); each result's
``structuredContent`` is checked with ``jsonschema`` against the ``outputSchema`` the server
listed for that tool, for successes, refusals and half-done removals alike, and the first text
item must still be the JSON the original server answers.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema
import mcp_types as types
import pytest
from mcp import Client

from agent_custody_state import Ledger
from agent_custody_state.server.app import create_memory_server
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state_conformance.gateway import AGENT_KEY, RECEIPT_KEY

pytestmark = pytest.mark.anyio
WRITE = {"subject": "acct:7", "predicate": "plan", "space": "org"}
READS = {"memory.read", "memory.get", "memory.history"}


class Caller:
    """Calls tools and checks every result against the listed output schema."""

    def __init__(self, client: Client, tools: dict[str, types.Tool]) -> None:
        self.client = client
        self.tools = tools
        self.checked: set[tuple[str, str]] = set()

    async def call(self, tool: str, args: dict[str, Any], *, gateway: bool = True) -> Any:
        meta = {RECEIPT_KEY: f"rcpt-{uuid.uuid4()}", AGENT_KEY: "agent"} if gateway else None
        result = await self.client.call_tool(tool, args, meta=meta)  # type: ignore[arg-type]
        schema = self.tools[tool].output_schema
        assert schema is not None
        jsonschema.Draft202012Validator.check_schema(schema)
        jsonschema.validate(result.structured_content, schema)
        texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
        structured = result.structured_content
        if not result.is_error:
            assert json.loads(texts[0]) == {
                k: v for k, v in structured.items() if k != "hiddenClaimed"
            }
            kind = "ok"
        elif "partial" in structured:
            assert texts == [structured["error"], texts[1]]
            assert json.loads(texts[1]) == structured["partial"]
            kind = "partial"
        else:
            assert texts == [structured["error"]]
            kind = "error"
        self.checked.add((tool, kind))
        return result


@asynccontextmanager
async def caller(tmp_path: Path, stores: StoreSet | None = None) -> AsyncIterator[Caller]:
    tmp_path.mkdir(exist_ok=True)
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        server = create_memory_server(
            ledger, require_gateway=False, stores=stores or (), retention="sweep:*=PT0S"
        )
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            yield Caller(client, tools)
        server.memory.close()


async def test_every_tool_is_annotated(tmp_path: Path) -> None:
    async with caller(tmp_path) as bare:
        plain = bare.tools
    async with caller(tmp_path / "s", StoreSet([InProcessStore("mirror")])) as stored:
        with_stores = stored.tools
    assert len(plain) == 10
    for name, tool in plain.items():
        hints = tool.annotations
        assert hints is not None and hints.title and tool.title == hints.title
        assert hints.read_only_hint is (name in READS)
        assert hints.destructive_hint is (name in {"memory.forget", "memory.sweep"})
        assert hints.open_world_hint is False  # no stores configured: nothing leaves the ledger
        store_writer = name in {"memory.write", "memory.retract", "memory.forget", "memory.sweep"}
        assert with_stores[name].annotations.open_world_hint is store_writer  # type: ignore[union-attr]
        if name in READS:
            assert hints.idempotent_hint is True
    assert plain["memory.retract"].annotations.idempotent_hint is False  # type: ignore[union-attr]
    assert plain["memory.release"].annotations.idempotent_hint is False  # type: ignore[union-attr]


async def test_every_result_validates_against_its_schema(tmp_path: Path) -> None:
    async with caller(tmp_path) as c:
        a = (await c.call("memory.write", {**WRITE, "value": "pro"})).structured_content
        a_id = a["fact"]["factId"]
        b = await c.call("memory.write", {**WRITE, "value": "max", "supersedes": a_id})
        b_id = b.structured_content["fact"]["factId"]
        claimed = await c.call("memory.write", {**WRITE, "value": "x"}, gateway=False)
        claimed_id = claimed.structured_content["fact"]["factId"]
        await c.call("memory.read", {"subject": "acct:7", "includeClaimed": True})
        await c.call("memory.confirm", {"factId": claimed_id})
        await c.call("memory.confirm", {"factId": claimed_id})  # already attested: refused
        await c.call("memory.hold", {"factId": b_id, "reason": "case 1"})
        await c.call("memory.forget", {"factId": b_id, "reason": "gdpr"})  # on hold: refused
        await c.call("memory.release", {"factId": b_id, "reason": "case closed"})
        await c.call("memory.retract", {"factId": b_id, "reason": "wrong"})
        await c.call("memory.forget", {"factId": a_id, "reason": "gdpr"})
        await c.call("memory.get", {"factId": a_id})
        await c.call("memory.get", {"factId": "no-such-fact"})
        await c.call("memory.history", {"factId": b_id})
        await c.call("memory.write", {**WRITE, "space": "sweep:1", "value": 1})
        await c.call("memory.sweep", {"reason": "retention"})
        await c.call("memory.sweep", {"reason": "x"}, gateway=False)  # direct: refused
        await c.call("memory.write", {"subject": "s"})  # invalid arguments
        await c.call("memory.retract", {"factId": "nope", "reason": "x"})
        await c.call("memory.history", {"factId": ""})  # invalid arguments
        await c.call("memory.read", {"validAt": "not a time"})
        await c.call("memory.release", {"factId": b_id, "reason": "again"})
        await c.call("memory.hold", {"factId": "nope", "reason": "x"})
    oks = {tool for tool, kind in c.checked if kind == "ok"}
    assert oks == set(c.tools), set(c.tools) - oks
    assert {tool for tool, kind in c.checked if kind == "error"} >= {
        "memory.confirm",
        "memory.forget",
        "memory.get",
        "memory.write",
        "memory.retract",
        "memory.history",
        "memory.read",
        "memory.release",
        "memory.hold",
        "memory.sweep",
    }


async def test_half_done_removals_carry_the_partial_result(tmp_path: Path) -> None:
    mirror = InProcessStore("mirror")
    stores = StoreSet([mirror], VerifyPolicy(attempts=1, delay=0.001))
    async with caller(tmp_path, stores) as c:
        ids = []
        for space in ("org", "org", "sweep:2"):
            written = await c.call("memory.write", {**WRITE, "space": space, "value": space})
            ids.append(written.structured_content["fact"]["factId"])
        mirror.vendor.fail = True
        retracted = await c.call("memory.retract", {"factId": ids[0], "reason": "x"})
        forgotten = await c.call("memory.forget", {"factId": ids[1], "reason": "x"})
        swept = await c.call("memory.sweep", {"reason": "retention", "space": "sweep:2"})
    for result in (retracted, forgotten, swept):
        assert result.is_error and "partial" in result.structured_content
    assert forgotten.structured_content["partial"]["erasedFromLedger"] is True
    assert {tool for tool, kind in c.checked if kind == "partial"} == {
        "memory.retract",
        "memory.forget",
        "memory.sweep",
    }


async def test_a_direct_read_says_how_many_claimed_facts_it_hid(tmp_path: Path) -> None:
    async with caller(tmp_path) as c:
        await c.call("memory.write", {**WRITE, "value": "attested"})
        for value in ("c1", "c2"):
            await c.call("memory.write", {**WRITE, "value": value}, gateway=False)
        direct = await c.call("memory.read", {"subject": "acct:7"}, gateway=False)
        via_gateway = await c.call("memory.read", {"subject": "acct:7"})
        everything = await c.call(
            "memory.read", {"subject": "acct:7", "includeClaimed": True}, gateway=False
        )
    assert direct.structured_content["hiddenClaimed"] == 2
    assert [f["value"] for f in direct.structured_content["facts"]] == ["attested"]
    first, hint = (item.text for item in direct.content)  # type: ignore[union-attr]
    assert json.loads(first) == {"facts": direct.structured_content["facts"]}
    assert "hiddenClaimed: 2" in hint and "includeClaimed" in hint
    # The gateway's own reads and reads that asked for everything are as they always were.
    assert "hiddenClaimed" not in via_gateway.structured_content
    assert len(via_gateway.content) == 1
    assert "hiddenClaimed" not in everything.structured_content
    assert len(everything.structured_content["facts"]) == 3
