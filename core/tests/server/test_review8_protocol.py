"""Review 8: the memory server as an MCP peer, at the protocol's edges.

- A cancelled call (never answered, as the spec asks) held up the end of stdio input for 10 s.
- A request whose id is null, a fraction or a boolean was taken for a notification (silence
  over stdio, ``202`` over HTTP); both now answer ``Invalid Request`` with id null.
- The flush after a cancelled call was cancelled too: subscribers never heard of its changes.
- ``resources/list``'s cursor was an offset: forgetting a page's subjects skipped the next's.
- A subscription to a URI spelt another way (raw, lower-case escapes) was never heard of.
- One-page lists answered any cursor; a second ``initialize`` renegotiated a live session;
  ``memory.sweep`` now sends ``notifications/progress`` when asked with a ``progressToken``.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from servertest import GATEWAY_TOKEN, INIT, HttpServer, post, start_http
from test_resources import call, served
from test_review5_resources import recorder
from test_review6_server import Stalls, held

from agent_custody_state import Ledger
from agent_custody_state.server import resources
from agent_custody_state.server.app import create_memory_server
from agent_custody_state.server.rpcid import Handshake
from agent_custody_state.server.stdio import stdio_transport
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state_conformance.gateway import AGENT_KEY, RECEIPT_KEY

pytestmark = pytest.mark.anyio
META = {RECEIPT_KEY: "rcpt-1", AGENT_KEY: "agent-1"}
BAD_ID = "a request's id must be a string or an integer"
OLDER = {**INIT["params"], "protocolVersion": "2025-03-26"}  # type: ignore[dict-item]


class Peer:
    """The client's ends of two pipes: raw JSON-RPC lines out, every line the server wrote in."""

    def __init__(self, out_fd: int, in_fd: int) -> None:
        self.out_fd, self.in_fd = out_fd, in_fd
        self.got: list[dict[str, Any]] = []
        self._arrived = anyio.Event()

    def send(self, message: dict[str, Any]) -> None:
        os.write(self.out_fd, json.dumps(message).encode() + b"\n")

    def call(self, request_id: Any, tool: str, args: dict[str, Any]) -> None:
        params = {"name": tool, "arguments": args, "_meta": META}
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})

    async def pump(self) -> None:
        buffer = b""
        while True:
            await anyio.wait_readable(self.in_fd)
            chunk = os.read(self.in_fd, 1 << 16)
            if not chunk:
                return
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            self.got += [json.loads(line) for line in lines]
            self._arrived.set()
            self._arrived = anyio.Event()

    async def arrived(self) -> None:
        """Wait for the next line from the server."""
        await self._arrived.wait()

    async def answer(self, request_id: Any) -> dict[str, Any]:
        with anyio.fail_after(5):
            while True:
                for message in self.got:
                    if message.get("id") == request_id and "method" not in message:
                        return message
                await self._arrived.wait()


Body = Callable[[Peer, Ledger], Awaitable[None]]


async def over_pipes(
    tmp_path: Path, body: Body, stores: tuple[InProcessStore, ...] = ()
) -> tuple[Peer, float]:
    """Serve a fresh ledger over ``stdio_transport`` on two pipes; run ``body`` after the
    handshake, then close the client's end. Returns the peer and the seconds from that close
    to the transport's end."""
    to_server, from_client = os.pipe()
    to_client, from_server = os.pipe()
    closed: list[float] = []
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        server = create_memory_server(ledger, stores=list(stores))
        peer = Peer(from_client, to_client)

        async def serve() -> None:
            async with stdio_transport(in_fd=to_server, out_fd=from_server) as streams:
                await server.run(*streams, server.create_initialization_options())
            os.close(from_server)

        try:
            with anyio.fail_after(15):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(serve)
                    tg.start_soon(peer.pump)
                    peer.send(INIT)
                    await peer.answer(1)
                    peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
                    await body(peer, ledger)
                    os.close(from_client)
                    closed.append(anyio.current_time())
        finally:
            server.close()
            os.close(to_server)
            os.close(to_client)
    return peer, anyio.current_time() - closed[0]


async def test_a_cancelled_call_is_unanswered_whole_and_does_not_hold_up_the_end(
    tmp_path: Path,
) -> None:
    store = Stalls("slow", at="put")

    async def body(peer: Peer, ledger: Ledger) -> None:
        args = {"subject": "acct:1", "predicate": "plan", "value": "pro", "space": "org"}
        peer.call(2, "memory.write", args)
        await store.reached.wait()
        peer.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
        )
        peer.call(3, "memory.read", {})  # served while the write waits on its store
        assert not (await peer.answer(3))["result"]["isError"]
        store.go.set()

    peer, took = await over_pipes(tmp_path, body, (store,))
    assert took < 3, f"the end of input waited {took:.1f} s for a cancelled call"
    assert [m for m in peer.got if m.get("id") == 2] == []  # never answered
    # The write finished whole: in the ledger and in the store.
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        facts = ledger.as_of(include="all")
    assert len(facts) == 1 and [f.fact_id for f in facts] == held(store)


async def test_subscribers_hear_of_what_a_cancelled_call_changed(tmp_path: Path) -> None:
    """The flow finished whole, but the cancel hit the flush after it: the changes were taken
    off the queue, then dropped, and no subscriber ever heard of them."""
    store = Stalls("slow", at="")
    subject = resources.subject_uri("acct:1")

    async def body(peer: Peer, ledger: Ledger) -> None:
        args = {"subject": "acct:1", "predicate": "plan", "value": 1, "space": "org"}
        peer.call(2, "memory.write", args)
        await peer.answer(2)
        params = {"uri": subject, "_meta": META}
        peer.send({"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": params})
        assert (await peer.answer(3))["result"] == {}
        store.at = "put"
        peer.call(4, "memory.write", {**args, "value": 2})
        await store.reached.wait()
        peer.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}}
        )
        store.go.set()
        with anyio.fail_after(5):
            while not any(m.get("method") == "notifications/resources/updated" for m in peer.got):
                await peer.arrived()

    peer, _ = await over_pipes(tmp_path, body, (store,))
    updates = [m for m in peer.got if m.get("method") == "notifications/resources/updated"]
    assert updates[0]["params"]["uri"] == subject
    assert [m for m in peer.got if m.get("id") == 4] == []


BAD_IDS = [None, 1.5, True, [4]]


async def test_a_request_whose_id_is_not_a_string_or_integer_is_answered_over_stdio(
    tmp_path: Path,
) -> None:
    async def body(peer: Peer, ledger: Ledger) -> None:
        for bad in BAD_IDS:
            peer.send({"jsonrpc": "2.0", "id": bad, "method": "ping"})
        peer.send({"jsonrpc": "2.0", "id": None, "method": "notifications/initialized"})  # sloppy
        peer.send({"jsonrpc": "2.0", "id": "after", "method": "ping"})
        assert (await peer.answer("after"))["result"] == {}

    peer, _ = await over_pipes(tmp_path, body)
    refused = [m for m in peer.got if m.get("id") is None and "error" in m]
    assert len(refused) == len(BAD_IDS), peer.got
    for message in refused:
        assert message["error"]["code"] == -32600
        assert BAD_ID in message["error"]["message"]


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("review8")
    server = start_http("--ledger", str(folder / "h.jsonl"), "--token-env", "MEMORY_TOKEN")
    yield server
    server.stop()


def _session(server: HttpServer) -> dict[str, str]:
    """The headers of a new session on ``server`` (initialized by the gateway)."""
    opened = post(server.url, GATEWAY_TOKEN)
    return {
        "mcp-session-id": opened.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-06-18",
    }


def test_a_request_whose_id_is_not_a_string_or_integer_is_answered_over_http(
    http_server: HttpServer,
) -> None:
    session = _session(http_server)
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized", "id": None}
    assert post(http_server.url, GATEWAY_TOKEN, initialized, **session).status_code == 202
    ping = {"jsonrpc": "2.0", "method": "ping"}
    for bad in BAD_IDS:
        answer = post(http_server.url, GATEWAY_TOKEN, {**ping, "id": bad}, **session)
        assert answer.status_code == 400, (bad, answer.status_code, answer.text)
        error = answer.json()
        assert error["id"] is None and error["error"]["code"] == -32600
        assert BAD_ID in error["error"]["message"]
    # A value holding such a member is no request id: the write goes through.
    args = {"subject": "acct:1", "predicate": "p", "value": {"id": None}, "space": "org"}
    params = {"name": "memory.write", "arguments": args, "_meta": META}
    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
    answer = post(http_server.url, GATEWAY_TOKEN, call, **session)
    assert answer.status_code == 200 and '"isError":false' in answer.text, answer.text


async def test_forgetting_what_a_listing_offered_skips_nothing_on_the_next_page(
    tmp_path: Path,
) -> None:
    """An erasure job: list a page of subjects, forget each, ask for the next page."""
    count = resources.PAGE_SIZE * 2 + 3
    async with served(tmp_path) as server, Client(server) as client:
        ids = {}
        for i in range(count):
            args = {"subject": f"s{i:03}", "predicate": "p", "value": i, "space": "org"}
            ids[f"s{i:03}"] = (await call(client, "memory.write", args))["fact"]["factId"]
        seen: list[str] = []
        cursor = None
        while True:
            page = await client.list_resources(cursor=cursor)
            for resource in page.resources:
                uri = str(resource.uri)
                if uri == resources.HEAD_URI:
                    continue
                subject = uri.removeprefix(resources.SUBJECT_PREFIX)
                seen.append(subject)
                forget = {"factId": ids[subject], "reason": "erasure request"}
                await call(client, "memory.forget", forget)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert seen == sorted(ids)
        # Everything forgotten: nothing but the head is offered, a cursor past the end is empty.
        listed = await client.list_resources()
        assert [str(r.uri) for r in listed.resources] == [resources.HEAD_URI]
        assert (await client.list_resources(cursor="999")).resources == []


async def test_a_cursor_the_server_never_gave_is_invalid_params(tmp_path: Path) -> None:
    async with served(tmp_path) as server, Client(server) as client:
        for cursor in ("zzz", "-5", " 1", "1_0", "\u0663", "9" * 40):
            with pytest.raises(MCPError) as caught:
                await client.list_resources(cursor=cursor)
            assert caught.value.error.code == -32602, cursor
            assert len(caught.value.error.message) < 80


async def test_a_subscription_spelt_another_way_is_heard(tmp_path: Path) -> None:
    """A subject URI written raw or with lower-case escapes reads the same resource; its
    subscription was acknowledged and never heard of anything."""
    subject = "acct 7/\u00fc"
    raw = resources.SUBJECT_PREFIX + subject
    lower = resources.subject_uri(subject).lower()  # %2f%c3%bc
    base = {"subject": subject, "predicate": "plan", "space": "org"}
    heard: list[str] = []
    async with served(tmp_path) as server:
        async with (
            Client(server) as writer,
            Client(server, mode="legacy", message_handler=recorder(heard)) as reader,
        ):
            await call(writer, "memory.write", {**base, "value": 1})
            for uri in (raw, lower):
                assert (await reader.read_resource(uri)).contents  # the same resource
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # deprecated on 2026-07-28
                    await reader.subscribe_resource(uri)
            await call(writer, "memory.write", {**base, "value": 2})
            with anyio.fail_after(5):
                while len(heard) < 2:
                    await anyio.sleep(0.01)
            assert sorted(heard) == sorted([raw, lower])  # each in the client's own spelling
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await reader.unsubscribe_resource(raw)
                await reader.unsubscribe_resource(lower)
            assert server.notifier.legacy and not any(s for _, s in server.notifier.legacy.values())
        async with Client(server) as listener:
            async with listener.listen(resource_subscriptions=[raw]) as stream:
                events = aiter(stream)
                await call(listener, "memory.write", {**base, "value": 3})
                with anyio.fail_after(5):
                    updated = await anext(events)
        assert updated.uri == resources.subject_uri(subject)  # type: ignore[union-attr]


async def test_a_cursor_on_a_list_of_one_page_is_invalid_params(tmp_path: Path) -> None:
    async with served(tmp_path) as server, Client(server) as client:
        assert (await client.list_tools()).tools
        assert (await client.list_resource_templates()).resource_templates
        for listing in (client.list_tools, client.list_resource_templates):
            with pytest.raises(MCPError) as caught:
                await listing(cursor="50")
            assert caught.value.error.code == -32602


async def test_a_second_initialize_on_a_live_connection_is_refused_over_stdio(
    tmp_path: Path,
) -> None:
    """The SDK answered it, renegotiating the version (to an older one here) amid the
    connection; the TypeScript SDK refuses it."""

    async def body(peer: Peer, ledger: Ledger) -> None:
        peer.send({**INIT, "id": "again", "params": OLDER})
        refused = await peer.answer("again")
        assert refused["error"]["code"] == -32600
        assert "already initialized" in refused["error"]["message"]
        peer.send({"jsonrpc": "2.0", "id": "after", "method": "ping"})
        assert (await peer.answer("after"))["result"] == {}

    await over_pipes(tmp_path, body)


def test_an_initialize_that_failed_may_be_sent_again() -> None:
    handshake = Handshake()
    assert not handshake.refuses("ping", 1)
    assert not handshake.refuses("initialize", 2)
    handshake.answered(3, ok=False)  # another request's error
    assert handshake.refuses("initialize", 4)
    handshake.answered(2, ok=False)  # the initialize was refused (bad params): may come again
    assert not handshake.refuses("initialize", 5)
    handshake.answered(5, ok=True)
    assert handshake.refuses("initialize", 5)
    handshake.answered(5, ok=False)  # the refusal of a second one with the same id
    assert handshake.refuses("initialize", 6)


def test_a_second_initialize_on_a_live_session_is_refused_over_http(
    http_server: HttpServer,
) -> None:
    session = _session(http_server)
    again = {**INIT, "id": 2, "params": OLDER}
    answer = post(http_server.url, GATEWAY_TOKEN, again, **session)
    assert answer.status_code == 400, answer.text
    assert answer.json()["id"] == 2 and answer.json()["error"]["code"] == -32600
    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    assert post(http_server.url, GATEWAY_TOKEN, ping, **session).json()["result"] == {}
    # A new session is opened as ever: an initialize without a session id.
    assert post(http_server.url, GATEWAY_TOKEN).status_code == 200


async def test_a_sweep_asked_for_progress_reports_it_in_order_before_its_result(
    tmp_path: Path,
) -> None:
    """A sweep over slow stores runs past a client's request timeout; with a ``progressToken``
    it now says how far it is (the client may reset its timeout on progress)."""
    store = InProcessStore("vectors")

    async def body(peer: Peer, ledger: Ledger) -> None:
        for i in range(4):
            args = {"subject": f"acct:{i}", "predicate": "plan", "value": i, "space": "org"}
            peer.call(10 + i, "memory.write", args)
            await peer.answer(10 + i)
        sweep = {"reason": "retention", "before": "2999-01-01T00:00:00Z"}
        params = {"name": "memory.sweep", "arguments": sweep, "_meta": {**META, "progressToken": 7}}
        peer.send({"jsonrpc": "2.0", "id": "sweep", "method": "tools/call", "params": params})
        assert not (await peer.answer("sweep"))["result"]["isError"]
        peer.call("quiet", "memory.sweep", sweep)  # no token: no progress
        await peer.answer("quiet")

    peer, _ = await over_pipes(tmp_path, body, (store,))
    lines = [m for m in peer.got if m.get("method") == "notifications/progress"]
    assert [m["params"]["progressToken"] for m in lines] == [7] * len(lines)
    values = [m["params"]["progress"] for m in lines]
    assert values == sorted(set(values)) and values[-1] == 8  # 4 forgotten, then 4 removed
    assert lines[-1]["params"]["message"] == "removing from the stores: 4 of 4"
    result = next(i for i, m in enumerate(peer.got) if m.get("id") == "sweep")
    assert peer.got.index(lines[-1]) < result  # every notification before the result
    assert held(store) == []
