"""Taking in a POST (``server/intake.py``): the in-flight limit before the body, the body cap while
reading, and JSON-RPC batches refused; on the guard alone, in process, and on a served process.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from servertest import GATEWAY_TOKEN, HEADERS, INIT, start_http

from agent_custody_state import Ledger, serve_memory_http
from agent_custody_state.server.guard import HostPolicy, HttpGuard, normalize_tokens

pytestmark = pytest.mark.anyio
TOKEN = "gateway-token-0123"
WRITE = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {
        "name": "memory.write",
        "arguments": {"subject": "s", "predicate": "p", "value": 1, "space": "org"},
    },
}


class App:
    """The inner app: counts the requests that reach it and answers 200."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.calls += 1
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


class Exchange:
    """One request driven by hand: its body chunks are handed out on demand, what the guard
    sends back is kept, and every ``receive`` is counted."""

    def __init__(self, chunks: list[bytes] | None = None, length: int | None = None) -> None:
        self.chunks = chunks
        self.received = 0
        self.sent: list[dict[str, Any]] = []
        self.more = anyio.Event()
        headers = [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {TOKEN}".encode())]
        if length is not None:
            headers.append((b"content-length", str(length).encode()))
        self.scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}

    async def receive(self) -> dict[str, Any]:
        self.received += 1
        if self.chunks is None:  # a client that sends its body only when told to
            await self.more.wait()
            return {"type": "http.request", "body": INIT_BYTES, "more_body": False}
        if not self.chunks:  # an endless body, 10 bytes at a time
            return {"type": "http.request", "body": b"z" * 10, "more_body": True}
        return {"type": "http.request", "body": self.chunks.pop(0), "more_body": bool(self.chunks)}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def body(self) -> Any:
        return json.loads(self.sent[1]["body"])


INIT_BYTES = json.dumps(INIT).encode()


def guard(app: Any, **kw: Any) -> HttpGuard:
    options: dict[str, Any] = {
        "tokens": normalize_tokens({TOKEN: "gateway"}),
        "hosts": HostPolicy(["127.0.0.1"]),
        "max_request_bytes": 100,
        "max_concurrency": 1,
        **kw,
    }
    return HttpGuard(app, **options)


async def test_a_request_still_sending_its_body_holds_its_place() -> None:
    """Over ``max_concurrency`` a request gets 503 before a byte of its body is read, and a
    request whose body is still arriving counts as in flight (it did not: bodies were read
    first and counted after, so any number of slow bodies were buffered at once)."""
    app = App()
    front = guard(app, max_request_bytes=10_000)
    slow, late = Exchange(), Exchange([INIT_BYTES], len(INIT_BYTES))
    async with anyio.create_task_group() as tg:
        tg.start_soon(front, slow.scope, slow.receive, slow.send)
        with anyio.fail_after(5):
            while not slow.received:
                await anyio.sleep(0.01)
        await front(late.scope, late.receive, late.send)
        assert late.status == 503 and late.received == 0
        assert (b"retry-after", b"1") in late.sent[0]["headers"]
        assert late.body["error"]["code"] == -32000
        assert "overloaded: 1 calls in flight (max_concurrency 1)" in late.body["error"]["message"]
        assert front.intake.in_flight == 1 and front.intake.refused_overload == 1
        slow.more.set()
    assert slow.status == 200 and app.calls == 1 and front.intake.in_flight == 0
    again = Exchange([INIT_BYTES], len(INIT_BYTES))
    await front(again.scope, again.receive, again.send)
    assert again.status == 200 and app.calls == 2


async def test_the_body_cap_is_enforced_while_reading() -> None:
    """Already so before the review: a declared length over the cap is refused unread, and a
    body without one is read only until it passes the cap."""
    app = App()
    front = guard(app)
    declared = Exchange([b"{}"], 101)
    await front(declared.scope, declared.receive, declared.send)
    assert declared.status == 413 and declared.received == 0
    assert "max_request_bytes" in declared.body["error"]["message"]
    endless = Exchange([])  # chunked: no length, never ends
    await front(endless.scope, endless.receive, endless.send)
    assert endless.status == 413 and endless.received == 11  # 110 bytes: one chunk past 100
    assert app.calls == 0 and front.intake.in_flight == 0


@pytest.mark.parametrize(
    "body",
    [b"[]", b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', b' \r\n\t[{"a": 1}]', b"\xef\xbb\xbf ["],
)
async def test_a_batch_is_refused_by_the_guard(body: bytes) -> None:
    app = App()
    front = guard(app)
    batch = Exchange([body], len(body))
    await front(batch.scope, batch.receive, batch.send)
    assert batch.status == 400 and app.calls == 0 and front.intake.in_flight == 0
    assert batch.body == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": "invalid request: JSON-RPC batches are not supported (MCP 2025-06-18 "
            "removed them); send each message in its own POST",
        },
    }


@pytest.mark.parametrize("stateless", [False, True])
def test_a_batch_over_http_never_reaches_the_ledger(tmp_path: Path, stateless: bool) -> None:
    """A raw client posts batches to a served app: without a session (the SDK used to open one
    for it) and inside one, holding a write; each gets 400 and the ledger stays empty."""
    ledger = Ledger(tmp_path / "ledger.jsonl")
    headers = {**HEADERS, "Authorization": f"Bearer {TOKEN}"}
    try:
        served = serve_memory_http(
            ledger, port=0, tokens={TOKEN: "gateway"}, require_gateway=False, stateless=stateless
        )
        with served as server, httpx.Client(timeout=10) as client:
            refused = client.post(server.url, json=[INIT], headers=headers)
            assert refused.status_code == 400 and "mcp-session-id" not in refused.headers
            assert refused.json()["error"]["code"] == -32600
            assert "batches are not supported" in refused.json()["error"]["message"]
            opened = client.post(server.url, json=INIT, headers=headers)
            assert opened.status_code == 200
            if not stateless:
                headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
            headers["MCP-Protocol-Version"] = "2025-06-18"
            batch = client.post(server.url, json=[WRITE, {**WRITE, "id": 3}], headers=headers)
            assert batch.status_code == 400, batch.text
            assert batch.json()["id"] is None and batch.json()["error"]["code"] == -32600
            assert ledger.count() == 0
            single = client.post(server.url, json=WRITE, headers=headers)
            assert single.status_code == 200 and "error" not in single.json(), single.text
            assert ledger.count() == 1
    finally:
        ledger.close()


def test_a_served_process_sheds_load_while_a_body_dribbles_in(module_dir: Path) -> None:
    """``serve --http --max-concurrency 1``: a client that sends its headers and part of its
    body holds the one place; another request gets the documented 503 meanwhile."""
    server = start_http(
        "--ledger",
        str(module_dir / "intake.jsonl"),
        "--token-env",
        "MEMORY_TOKEN",
        "--max-concurrency",
        "1",
        "--body-timeout",
        "20",
    )
    headers = {**HEADERS, "Authorization": f"Bearer {GATEWAY_TOKEN}"}
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    slow = socket.create_connection(("127.0.0.1", port))
    try:
        slow.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
            + GATEWAY_TOKEN.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            b'{"jsonrpc":'
        )
        with httpx.Client(timeout=10) as client:
            deadline = time.monotonic() + 10
            while True:  # until the slow request has reached the guard
                shed = client.post(server.url, json=INIT, headers=headers)
                if shed.status_code == 503 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert shed.status_code == 503, shed.text
            assert shed.headers["retry-after"] == "1"
            assert shed.json()["error"]["code"] == -32000
            slow.close()  # the client goes away: its place is freed
            deadline = time.monotonic() + 10
            while (ok := client.post(server.url, json=INIT, headers=headers)).status_code != 200:
                assert time.monotonic() < deadline, ok.text
                time.sleep(0.05)
    finally:
        slow.close()
        server.stop()
