"""The HTTP server on a hostile wire (nineteenth review): raw requests a broken client or an
attacker sends, against an in-process ``serve_memory_http``.

- a ``tools/call`` nested too deep from an OAuth token was a 500 with a traceback (the step-up
  check's parser raised ``RecursionError``); it is the parser's 400 now;
- JSON that is no JSON-RPC message was answered ``-32602`` with a pydantic dump (model names,
  documentation URLs, the body quoted back); it is ``-32600 Invalid Request``, plainly worded;
- two ``Host`` headers are a 400 (RFC 9112), and every ``Origin`` given is checked;
- a stop with an SDK client connected (its ``GET`` stream open) took uvicorn's 3 s and logged
  an ERROR with a traceback; the stream is ended first;
- an open ``subscriptions/listen`` stream held one of ``max_concurrency`` places for its life:
  eight listeners got every other caller a 503.
"""

from __future__ import annotations

import json
import logging
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.streamable_http import GET_STREAM_KEY
from servertest import HEADERS, INIT

from agent_custody_state import Ledger, serve_memory_http
from agent_custody_state.server.http import MemoryHttpServer
from agent_custody_state.server.oauth import OAuthSettings
from agent_custody_state_conformance.gateway import GatewayClient
from agent_custody_state_conformance.issuer import LocalIssuer

GW, DIRECT = "gw-token-0123456789abc", "direct-token-0123456789"
TOKENS = {GW: "gateway", DIRECT: "direct"}
AUD = "http://127.0.0.1/mcp"

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryHttpServer]:
    ledger = Ledger(tmp_path_factory.mktemp("wire") / "l.jsonl")
    running = serve_memory_http(ledger, port=0, tokens=TOKENS, require_gateway=False)
    yield running
    running.close()
    ledger.close()


def _session(url: str, token: str) -> dict[str, str]:
    """Headers of a fresh, initialized 2025-06-18 session of ``token``."""
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    opened = httpx.post(url, json=INIT, headers=headers, timeout=5)
    assert opened.status_code == 200, opened.text
    headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
    headers["MCP-Protocol-Version"] = "2025-06-18"
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert httpx.post(url, json=note, headers=headers, timeout=5).status_code == 202
    return headers


def _raw(server: MemoryHttpServer, head: bytes, body: bytes) -> tuple[int, bytes]:
    """One request written by hand (``head``: its header lines), on a connection of its own."""
    request = (
        b"POST /mcp HTTP/1.1\r\n"
        + head
        + b"Authorization: Bearer "
        + GW.encode()
        + b"\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
        + b"Connection: close\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    return status, answer.partition(b"\r\n\r\n")[2]


@pytest.mark.parametrize(
    "body",
    [
        {"id": 3, "method": "ping"},  # no "jsonrpc"
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": [1]},
        "hello",
        {"jsonrpc": "2.0", "id": 3},
    ],
)
def test_json_that_is_no_jsonrpc_message_is_an_invalid_request_without_a_dump(
    server: MemoryHttpServer, body: Any
) -> None:
    for headers in (_session(server.url, GW), {**HEADERS, "Authorization": f"Bearer {GW}"}):
        answer = httpx.post(server.url, json=body, headers=headers, timeout=5)
        assert answer.status_code == 400, answer.text
        assert answer.headers["content-type"] == "application/json"
        error = answer.json()
        assert error["id"] is None
        assert error["error"]["code"] == -32600, error
        message = error["error"]["message"]
        assert message.startswith("invalid request: not a JSON-RPC 2.0 message"), message
        for leak in ("pydantic", "Validation error", "JSONRPCRequest", "input_value"):
            assert leak not in answer.text, answer.text
        assert int(answer.headers["content-length"]) == len(answer.content)


def test_other_refusals_and_answers_keep_their_bodies(server: MemoryHttpServer) -> None:
    headers = _session(server.url, GW)
    unknown = {"jsonrpc": "2.0", "id": 4, "method": "nope/x"}
    answer = httpx.post(server.url, json=unknown, headers=headers, timeout=5)
    assert answer.json()["error"]["code"] == -32601, answer.text
    broken = httpx.post(server.url, content=b'{"jsonrpc":', headers=headers, timeout=5)
    assert broken.status_code == 400
    assert broken.json()["error"]["code"] == -32700, broken.text
    batch = httpx.post(server.url, json=[unknown], headers=headers, timeout=5)
    assert batch.status_code == 400
    assert "batches are not supported" in batch.json()["error"]["message"]


def test_two_host_headers_are_refused(server: MemoryHttpServer) -> None:
    own = f"Host: 127.0.0.1:{server.port}\r\n".encode()
    body = json.dumps(INIT).encode()
    assert _raw(server, own, body)[0] == 200
    status, answer = _raw(server, own + b"Host: evil.example\r\n", body)
    assert status == 400, answer
    assert json.loads(answer) == {"error": "bad request: more than one Host header"}
    status, _ = _raw(server, b"Host: evil.example\r\n" + own, body)
    assert status == 400


def test_every_origin_is_checked(server: MemoryHttpServer) -> None:
    own = f"Host: 127.0.0.1:{server.port}\r\n".encode()
    origin = f"Origin: http://127.0.0.1:{server.port}\r\n".encode()
    body = json.dumps(INIT).encode()
    assert _raw(server, own + origin, body)[0] == 200
    status, answer = _raw(server, own + origin + b"Origin: http://evil.example\r\n", body)
    assert status == 403, answer


def test_a_deep_tool_call_from_an_oauth_token_is_the_parsers_400(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The step-up check parses a ``tools/call`` of an OAuth reader; 100,000 levels raised
    ``RecursionError`` out of the guard: 500 and "Exception in ASGI application"."""
    issuer = LocalIssuer(tmp_path)
    (tmp_path / "ledger").mkdir()
    ledger = Ledger(tmp_path / "ledger" / "l.jsonl")
    oauth = OAuthSettings(issuer=issuer.issuer, resource=AUD, jwks_file=str(issuer.jwks))
    running = serve_memory_http(ledger, port=0, require_gateway=False, oauth=oauth)
    try:
        headers = _session(running.url, issuer.token(AUD, scope="memory:read"))
        deep = b"[" * 100_000 + b"]" * 100_000
        body = (
            b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"memory.write",'
            b'"arguments":{"value":' + deep + b"}}}"
        )
        with caplog.at_level(logging.ERROR):
            answer = httpx.post(running.url, content=body, headers=headers, timeout=5)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["code"] == -32700
        assert "Exception in ASGI application" not in caplog.text
    finally:
        running.close()
        ledger.close()


def _get_stream_open(server: MemoryHttpServer) -> bool:
    live = server.app.state.mcp_sessions._server_instances
    return any(GET_STREAM_KEY in t._request_streams for t in live.values())


async def test_a_stop_ends_the_get_streams_of_connected_clients(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every SDK client opens a ``GET`` stream, which nothing ended: uvicorn waited its 3 s
    graceful timeout at every stop, then cancelled it with an ERROR and a traceback."""
    ledger = Ledger(tmp_path / "l.jsonl")
    running = serve_memory_http(ledger, port=0, tokens=TOKENS, require_gateway=False)
    try:
        async with GatewayClient.http(running.url, token=GW) as gw:
            await gw.call("memory.read", {})
            with anyio.fail_after(5):
                while not _get_stream_open(running):
                    await anyio.sleep(0.01)
            began = time.monotonic()
            with caplog.at_level(logging.ERROR):
                await anyio.to_thread.run_sync(running.close)
            took = time.monotonic() - began
    finally:
        running.close()
        ledger.close()
    assert took < 2, took
    assert "graceful shutdown exceeded" not in caplog.text, caplog.text
    assert "Exception in ASGI application" not in caplog.text, caplog.text


async def test_an_open_listen_stream_holds_no_place_among_the_calls(tmp_path: Path) -> None:
    """With ``max_concurrency`` 1, one ``subscriptions/listen`` stream got every other caller
    (here the gateway's ``initialize``) a 503 for as long as it stayed open."""
    ledger = Ledger(tmp_path / "l.jsonl")
    running = serve_memory_http(
        ledger, port=0, tokens=TOKENS, require_gateway=False, max_concurrency=1
    )
    listening = anyio.Event()
    auth = {"Authorization": f"Bearer {DIRECT}"}

    async def listen() -> None:
        async with (
            httpx2.AsyncClient(headers=auth, timeout=30) as http,
            Client(streamable_http_client(running.url, http_client=http)) as client,
        ):
            assert client.protocol_version == "2026-07-28"
            async with client.listen(resource_subscriptions=["memory://ledger/head"]):
                listening.set()
                await anyio.sleep_forever()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(listen)
            with anyio.fail_after(10):
                await listening.wait()
            with anyio.fail_after(5):  # the handshake's places are back once answered
                while running.guard.intake.in_flight:
                    await anyio.sleep(0.005)
            async with httpx.AsyncClient(timeout=5) as http:
                headers = {**HEADERS, "Authorization": f"Bearer {GW}"}
                for _ in range(3):
                    answer = await http.post(running.url, json=INIT, headers=headers)
                    assert answer.status_code == 200, answer.text
            group.cancel_scope.cancel()
    finally:
        running.close()
        ledger.close()


def _dribbling(server: MemoryHttpServer, token: str) -> socket.socket:
    """A POST whose headers are in and whose body (100 bytes declared) has barely begun."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    sock.sendall(
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: Bearer {token}"
        "\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
        'Content-Length: 100\r\n\r\n{"jsonrpc":'.encode()
    )
    return sock


def _wait_in_flight(server: MemoryHttpServer, count: int) -> None:
    deadline = time.monotonic() + 5
    while server.guard.intake.in_flight != count:
        assert time.monotonic() < deadline, server.guard.intake.in_flight
        time.sleep(0.005)


def test_one_token_dribbling_bodies_cannot_lock_another_out(tmp_path: Path) -> None:
    """Places are taken before the body (so a flood buffers at most ``max_concurrency``
    bodies); one token holding them all with slow bodies got the gateway a 503 for as long as
    it kept them coming. A body still arriving gives its place to a token holding fewer."""
    ledger = Ledger(tmp_path / "l.jsonl")
    running = serve_memory_http(
        ledger, port=0, tokens=TOKENS, require_gateway=False, max_concurrency=2
    )
    slow = [_dribbling(running, DIRECT), _dribbling(running, DIRECT)]
    try:
        _wait_in_flight(running, 2)
        # the same token gets no place from itself
        same = httpx.post(
            running.url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {DIRECT}"}
        )
        assert same.status_code == 503, same.text
        gateway = {**HEADERS, "Authorization": f"Bearer {GW}"}
        answer = httpx.post(running.url, json=INIT, headers=gateway, timeout=5)
        assert answer.status_code == 200, answer.text
        readable, _, _ = select.select(slow, [], [], 5)
        assert len(readable) == 1, readable  # one gave its place up, the other still reads
        assert readable[0].recv(65536).startswith(b"HTTP/1.1 503 ")
        _wait_in_flight(running, 1)  # the gateway's place back once its answer is out
    finally:
        for sock in slow:
            sock.close()
        running.close()
        ledger.close()
