"""Resources and subscriptions, through the official client in process.

Facts, subject timelines and the ledger head are read as resources; ``resources/list`` pages;
a client subscribed to a fact or a subject hears ``notifications/resources/updated`` when the
fact is superseded, confirmed, held, released, retracted or forgotten, both on a 2025-11-25
connection (``resources/subscribe``) and on a 2026-07-28 ``subscriptions/listen`` stream.
"""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from agent_custody_state import Ledger
from agent_custody_state.server import resources
from agent_custody_state.server.app import MemoryServer, create_memory_server
from agent_custody_state_conformance.gateway import AGENT_KEY, RECEIPT_KEY

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def served(tmp_path: Path) -> AsyncIterator[MemoryServer]:
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        server = create_memory_server(ledger, require_gateway=False)
        try:
            yield server
        finally:
            server.close()


async def call(client: Client, tool: str, args: dict[str, Any], gateway: bool = True) -> Any:
    meta = {RECEIPT_KEY: f"rcpt-{uuid.uuid4()}", AGENT_KEY: "agent"} if gateway else None
    result = await client.call_tool(tool, args, meta=meta)  # type: ignore[arg-type]
    assert not result.is_error, result.content
    return result.structured_content


async def read(client: Client, uri: str) -> Any:
    result = await client.read_resource(uri)
    return json.loads(result.contents[0].text)  # type: ignore[union-attr]


async def test_fact_subject_and_head_resources(tmp_path: Path) -> None:
    async with served(tmp_path) as server, Client(server) as client:
        a = await call(
            client,
            "memory.write",
            {"subject": "acct 1", "predicate": "plan", "value": "pro", "space": "org"},
        )
        a_id = a["fact"]["factId"]
        b = await call(
            client,
            "memory.write",
            {
                "subject": "acct 1",
                "predicate": "plan",
                "value": "max",
                "space": "org",
                "supersedes": a_id,
            },
        )
        fact = await read(client, resources.fact_uri(a_id))
        assert fact["state"] == "superseded" and fact["held"] is False
        assert [e["kind"] for e in fact["events"]] == ["assert", "assert"]
        timeline = await read(client, resources.subject_uri("acct 1"))
        assert [f["value"] for f in timeline["facts"]] == ["pro", "max"]
        assert timeline["facts"][0]["validTo"] == b["fact"]["validFrom"]  # valid time
        assert [e["txTime"] for e in timeline["events"]] == [a["txTime"], b["txTime"]]
        head = await read(client, resources.HEAD_URI)
        assert head["events"] == 2 and head["spaces"] == ["org"]
        for missing in (resources.fact_uri("nope"), resources.subject_uri("nobody"), "memory://x"):
            with pytest.raises(MCPError):
                await client.read_resource(missing)
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == [
            "memory://fact/{factId}",
            "memory://subject/{subject}",
        ]


async def test_resources_list_is_paged(tmp_path: Path) -> None:
    async with served(tmp_path) as server, Client(server) as client:
        for i in range(resources.PAGE_SIZE + 5):
            await call(
                client,
                "memory.write",
                {"subject": f"s{i}", "predicate": "p", "value": i, "space": "org"},
            )
        uris: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = await client.list_resources(cursor=cursor)
            uris += [str(r.uri) for r in page.resources]
            pages += 1
            cursor = page.next_cursor
            if cursor is None:
                break
    assert pages == 2
    assert uris[0] == resources.HEAD_URI
    assert uris[1:] == [resources.subject_uri(f"s{i}") for i in range(resources.PAGE_SIZE + 5)]


async def lifecycle(client: Client) -> tuple[str, list[str]]:
    """Write, supersede, confirm, hold, release, retract and forget; the URIs to expect."""
    base = {"subject": "acct:9", "predicate": "plan", "space": "org"}
    claimed = await call(client, "memory.write", {**base, "value": 1}, gateway=False)
    fact_id = claimed["fact"]["factId"]
    return fact_id, [resources.fact_uri(fact_id), resources.subject_uri("acct:9")]


async def drive(client: Client, fact_id: str) -> None:
    base = {"subject": "acct:9", "predicate": "plan", "space": "org"}
    await call(client, "memory.confirm", {"factId": fact_id})
    await call(client, "memory.hold", {"factId": fact_id, "reason": "case"})
    await call(client, "memory.release", {"factId": fact_id, "reason": "closed"})
    newer = await call(client, "memory.write", {**base, "value": 2, "supersedes": fact_id})
    await call(client, "memory.retract", {"factId": newer["fact"]["factId"], "reason": "no"})
    await call(client, "memory.forget", {"factId": fact_id, "reason": "gdpr"})


async def test_resources_subscribe_on_a_2025_connection(tmp_path: Path) -> None:
    heard: list[str] = []

    async def on_message(message: Any) -> None:
        params = getattr(message, "params", None)
        if getattr(message, "method", None) == "notifications/resources/updated":
            heard.append(str(params.uri))  # type: ignore[union-attr]

    async with served(tmp_path) as server:
        async with Client(server, mode="legacy", message_handler=on_message) as client:
            fact_id, (fact, subject) = await lifecycle(client)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.subscribe_resource(fact)
            await drive(client, fact_id)
            await anyio.sleep(0.05)
    # confirm, hold, release, superseded, retract of its superseder (the fact is believed
    # again: its state and validTo changed), forget: six changes of the fact.
    assert heard == [fact] * 6
    assert subject not in heard  # not subscribed


async def test_subscriptions_listen_on_a_2026_connection(tmp_path: Path) -> None:
    base = {"subject": "acct:9", "predicate": "plan", "space": "org"}
    async with served(tmp_path) as server, Client(server) as client:
        assert client.protocol_version == "2026-07-28"
        fact_id, (fact, subject) = await lifecycle(client)
        async with client.listen(resource_subscriptions=[fact]) as sub:
            events = aiter(sub)

            async def next_uri() -> str:
                with anyio.fail_after(5):
                    return (await anext(events)).uri  # type: ignore[union-attr]

            # Events are level triggers (a client may fold repeats), so each change is
            # awaited before the next one is made.
            for tool, args in (
                ("memory.confirm", {"factId": fact_id}),
                ("memory.hold", {"factId": fact_id, "reason": "case"}),
                ("memory.release", {"factId": fact_id, "reason": "closed"}),
                ("memory.write", {**base, "value": 2, "supersedes": fact_id}),
            ):
                await call(client, tool, args)
                assert await next_uri() == fact, tool
            # A change to another subject is not delivered to this stream.
            await call(client, "memory.write", {**base, "subject": "other", "value": 3})
            await call(client, "memory.forget", {"factId": fact_id, "reason": "gdpr"})
            assert await next_uri() == fact
        async with client.listen(resource_subscriptions=[subject]) as sub:
            events = aiter(sub)
            await call(client, "memory.write", {**base, "value": 4})
            with anyio.fail_after(5):
                assert (await anext(events)).uri == subject  # type: ignore[union-attr]
