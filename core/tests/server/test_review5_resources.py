"""Review 5: resource subscriptions found wanting, and kept right.

- A ``resources/subscribe`` of a connection that closed stayed in the notifier for good (a
  closed connection's sends are dropped, never an error, so nothing ever removed it): memory
  grew with every connection that ever subscribed. It now leaves with its connection.
- A fact superseded by a fact of another space was announced in its superseder's space: a
  subscriber limited to the superseded fact's space never heard that its fact (and its subject's
  timeline) changed. It is announced in its own space now.
- A fact believed again because its superseder was retracted or forgotten changed (its state and
  ``validTo``) without a notification.
"""

from __future__ import annotations

import gc
import uuid
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from agent_custody_state import Ledger
from agent_custody_state.server import resources
from agent_custody_state.server.app import MemoryServer, create_memory_server
from agent_custody_state_conformance.gateway import AGENT_KEY, RECEIPT_KEY

pytestmark = pytest.mark.anyio
BASE = {"subject": "acct:7", "predicate": "plan"}


async def call(client: Client, tool: str, args: dict[str, Any]) -> Any:
    meta = {RECEIPT_KEY: f"rcpt-{uuid.uuid4()}", AGENT_KEY: "agent"}
    result = await client.call_tool(tool, args, meta=meta)  # type: ignore[arg-type]
    assert not result.is_error, result.content
    return result.structured_content


def recorder(heard: list[str]) -> Any:
    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/resources/updated":
            heard.append(str(message.params.uri))

    return on_message


async def subscribe(client: Client, *uris: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resources/subscribe is deprecated on 2026-07-28
        for uri in uris:
            await client.subscribe_resource(uri)


@asynccontextmanager
async def server_on(ledger: Ledger, spaces: list[str] | None = None) -> AsyncIterator[MemoryServer]:
    server = create_memory_server(ledger, require_gateway=False, stream_spaces=spaces)
    try:
        yield server
    finally:
        server.close()


async def test_a_closed_connection_leaves_its_subscriptions_behind_no_more(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        async with server_on(ledger) as server:
            async with Client(server) as writer:
                await call(writer, "memory.write", {**BASE, "value": 1, "space": "org"})
                for _ in range(5):
                    async with Client(server, mode="legacy") as client:
                        await subscribe(client, resources.subject_uri("acct:7"))
                        assert len(server.notifier.legacy) == 1
                await call(writer, "memory.write", {**BASE, "value": 2, "space": "org"})
            gc.collect()
            assert server.notifier.legacy == {} and server.notifier.legacy_scope == {}


async def test_a_fact_superseded_from_another_space_is_announced_in_its_own(
    tmp_path: Path,
) -> None:
    heard: list[str] = []
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        async with server_on(ledger, ["team:a"]) as scoped, server_on(ledger) as unscoped:
            async with (
                Client(unscoped) as writer,
                Client(scoped, mode="legacy", message_handler=recorder(heard)) as reader,
            ):
                a = await call(writer, "memory.write", {**BASE, "value": 1, "space": "team:a"})
                a_id = a["fact"]["factId"]
                fact, subject = resources.fact_uri(a_id), resources.subject_uri("acct:7")
                await scoped.notifier.flush()  # the write above, heard before subscribing
                await subscribe(reader, fact, subject)
                await call(
                    writer,
                    "memory.write",
                    {**BASE, "value": 2, "space": "team:b", "supersedes": a_id},
                )
                await scoped.notifier.flush()
                await anyio.sleep(0.05)
                assert sorted(heard) == sorted([fact, subject])
                # ... and what it heard of is what changed in what it can read
                assert '"state":"superseded"' in await text_of(reader, fact)


@pytest.mark.parametrize("withdraw", ["memory.retract", "memory.forget"])
async def test_a_fact_believed_again_is_announced(tmp_path: Path, withdraw: str) -> None:
    heard: list[str] = []
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        async with (
            server_on(ledger) as server,
            Client(server, mode="legacy", message_handler=recorder(heard)) as client,
        ):
            a = await call(client, "memory.write", {**BASE, "value": 1, "space": "org"})
            fact = resources.fact_uri(a["fact"]["factId"])
            await subscribe(client, fact)
            b = await call(
                client,
                "memory.write",
                {**BASE, "value": 2, "space": "org", "supersedes": a["fact"]["factId"]},
            )
            await call(client, withdraw, {"factId": b["fact"]["factId"], "reason": "wrong"})
            await anyio.sleep(0.05)
            assert heard == [fact, fact]  # superseded, then believed again


async def text_of(client: Client, uri: str) -> str:
    return (await client.read_resource(uri)).contents[0].text  # type: ignore[union-attr]


async def test_a_scoped_view_names_no_fact_of_another_space(tmp_path: Path) -> None:
    """A fact of team:b superseding one of team:a: team:b's views of its fact and its subject
    said ``supersedes: <the team:a fact's id>``, naming a fact it cannot see."""
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        async with server_on(ledger, ["team:b"]) as scoped, server_on(ledger) as unscoped:
            async with Client(unscoped) as writer, Client(scoped) as reader:
                a = await call(writer, "memory.write", {**BASE, "value": 1, "space": "team:a"})
                a_id = a["fact"]["factId"]
                b = await call(
                    writer,
                    "memory.write",
                    {**BASE, "value": 2, "space": "team:b", "supersedes": a_id},
                )
                b_uri = resources.fact_uri(b["fact"]["factId"])
                subject = resources.subject_uri("acct:7")
                for uri in (b_uri, subject):
                    text = await text_of(reader, uri)
                    assert a_id not in text, uri
                    assert '"supersedes":null' in text
                # the unscoped caller sees the link
                assert a_id in await text_of(writer, b_uri)
                assert a_id in await text_of(writer, subject)
                # and memory.history answers as the resources do
                b_id = b["fact"]["factId"]
                seen = await call(reader, "memory.history", {"factId": b_id})
                assert [e.get("supersedes") for e in seen["events"]] == [None]
                assert a_id not in str(seen)
                full = await call(writer, "memory.history", {"factId": b_id})
                assert a_id in str(full)


async def test_resources_list_offers_no_subject_whose_facts_are_all_forgotten(
    tmp_path: Path,
) -> None:
    """Completions never offer a forgotten fact's subject (it may be personal data); the
    listing offered it all the same."""
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        async with server_on(ledger) as server, Client(server) as client:
            gone = await call(
                client,
                "memory.write",
                {"subject": "jane.doe@example.com", "predicate": "p", "value": 1, "space": "org"},
            )
            await call(client, "memory.write", {**BASE, "value": 1, "space": "org"})
            await call(client, "memory.forget", {"factId": gone["fact"]["factId"], "reason": "x"})
            listed = [str(r.uri) for r in (await client.list_resources()).resources]
            assert listed == [resources.HEAD_URI, resources.subject_uri("acct:7")]
            done = await client.complete(
                types.ResourceTemplateReference(uri="memory://subject/{subject}"),
                {"name": "subject", "value": "jane"},
            )
            assert done.completion.values == []


async def test_the_ledger_head_is_announced_to_its_subscribers(tmp_path: Path) -> None:
    """The head (its event count, its chain head) changes with every append; a subscription
    to it was accepted and never heard of anything."""
    heard: list[str] = []
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        async with (
            server_on(ledger) as server,
            Client(server, mode="legacy", message_handler=recorder(heard)) as client,
        ):
            await subscribe(client, resources.HEAD_URI)
            await call(client, "memory.write", {**BASE, "value": 1, "space": "org"})
            async with (
                Client(server) as modern,
                modern.listen(resource_subscriptions=[resources.HEAD_URI]) as sub,
            ):
                events = aiter(sub)
                await call(modern, "memory.write", {**BASE, "value": 2, "space": "org"})
                with anyio.fail_after(5):
                    assert (await anext(events)).uri == resources.HEAD_URI  # type: ignore[union-attr]
            await anyio.sleep(0.05)
            assert heard == [resources.HEAD_URI] * 2


async def test_a_scoped_listener_never_hears_of_the_head(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        async with server_on(ledger, ["team:a"]) as server, Client(server) as client:
            async with client.listen(
                resource_subscriptions=[resources.HEAD_URI, resources.subject_uri("acct:7")]
            ) as sub:
                events = aiter(sub)
                await call(client, "memory.write", {**BASE, "value": 1, "space": "team:a"})
                with anyio.fail_after(5):
                    got = await anext(events)
                assert got.uri == resources.subject_uri("acct:7")  # type: ignore[union-attr]
                with anyio.move_on_after(0.2):
                    extra = await anext(events)
                    pytest.fail(f"heard {extra}")
