"""The limits that keep one client from locking everyone else out (issue 11 item 4).

Value size (both transports), sessions per token, header and body timeouts, header size and the
connection limit, each through its flag on a real subprocess server; the value measurement and
the off-loop rendering as units. The flood-scale versions are in tests/reliability.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from servertest import GATEWAY_TOKEN, INIT, HttpServer, start_http

from agent_custody_state.config import load_config
from agent_custody_state_conformance.gateway import GatewayClient

pytestmark = pytest.mark.anyio

HEADERS = {
    "authorization": f"Bearer {GATEWAY_TOKEN}",
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
}


def _port(server: HttpServer) -> int:
    return int(server.url.rsplit(":", 1)[1].split("/")[0])


async def test_value_limits_over_stdio(tmp_path: Path) -> None:
    async with GatewayClient.stdio(
        "serve",
        "--ledger",
        str(tmp_path / "l.jsonl"),
        "--max-value-elements",
        "3",
        "--max-value-bytes",
        "64",
    ) as gw:
        base = {"subject": "s", "predicate": "p", "space": "org"}
        for value in ([1, 2, 3], {"a": 1, "b": [2]}, "x" * 50, 7):
            ok = await gw.call("memory.write", {**base, "value": value})
            assert not ok.is_error, (value, ok.texts)
        for value in ([1, 2, 3, 4], {"a": [1, 2], "b": 1}, [[[[1]]], [2, 3]]):
            refused = await gw.call("memory.write", {**base, "value": value})
            assert refused.text == (
                "value too large: more than 3 elements (array items and object members, at "
                "any depth); the limit is max_value_elements = 3"
            ), refused.text
        refused = await gw.call("memory.write", {**base, "value": "é" * 40})
        assert refused.text == (
            "value too large: more than 64 bytes as JSON; the limit is max_value_bytes = 64"
        )


def test_limits_come_from_the_config_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "memory.toml"
    config.write_text(
        'ledger = "l.jsonl"\n[server]\nmax_value_elements = 50\n'
        "sessions_per_token = 8\nheader_timeout = 2.5\nmax_connections = 100\n"
    )
    monkeypatch.setenv("AGENT_CUSTODY_SERVER__SESSION_IDLE_TIMEOUT", "60")
    loaded = load_config(config, server={"backlog": 32})
    server = loaded.server
    assert (server.max_value_elements, server.max_value_bytes) == (50, 1024 * 1024)
    assert (server.sessions_per_token, server.session_idle_timeout) == (8, 60)
    assert (server.header_timeout, server.body_timeout) == (2.5, 30)
    assert (server.max_connections, server.backlog) == (100, 32)
    monkeypatch.delenv("AGENT_CUSTODY_SERVER__SESSION_IDLE_TIMEOUT")
    defaults = load_config().server
    assert (
        defaults.max_value_elements,
        defaults.sessions_per_token,
        defaults.max_connections,
        defaults.session_idle_timeout,
    ) == (10_000, 64, 512, 300)


def test_sessions_per_token_ends_the_oldest(module_dir: Path) -> None:
    server = start_http(
        "--ledger",
        str(module_dir / "sessions.jsonl"),
        "--token-env",
        "MEMORY_TOKEN",
        "--sessions-per-token",
        "2",
    )
    try:
        with httpx.Client(timeout=30) as http:
            ids = [
                http.post(server.url, json=INIT, headers=HEADERS).headers["mcp-session-id"]
                for _ in range(3)
            ]
            alive = [
                http.post(
                    server.url,
                    json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
                    headers={
                        **HEADERS,
                        "mcp-session-id": sid,
                        "mcp-protocol-version": "2025-06-18",
                    },
                ).status_code
                for sid in ids
            ]
        assert alive == [404, 200, 200]
    finally:
        server.stop()


@pytest.fixture(scope="module")
def strict_http(module_dir: Path) -> Any:
    server = start_http(
        "--ledger",
        str(module_dir / "strict.jsonl"),
        "--token-env",
        "MEMORY_TOKEN",
        "--header-timeout",
        "1",
        "--body-timeout",
        "1",
        "--max-connections",
        "4",
    )
    yield server
    server.stop()


def _read_all(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except TimeoutError:
        return data + b"<still open>"
    return data


def test_headers_must_arrive_in_time(strict_http: HttpServer) -> None:
    sock = socket.create_connection(("127.0.0.1", _port(strict_http)))
    sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")
    started = time.monotonic()
    assert _read_all(sock, 5) == b""  # closed, unanswered
    assert time.monotonic() - started < 3
    sock.close()


def test_headers_are_capped(strict_http: HttpServer) -> None:
    sock = socket.create_connection(("127.0.0.1", _port(strict_http)))
    sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 70_000)
    assert _read_all(sock, 5).startswith(b"HTTP/1.1 431 ")
    sock.close()


def test_bodies_must_arrive_in_time(strict_http: HttpServer) -> None:
    sock = socket.create_connection(("127.0.0.1", _port(strict_http)))
    sock.sendall(
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
        + GATEWAY_TOKEN.encode()
        + b"\r\nContent-Type: application/json\r\n"
        b'Content-Length: 100\r\n\r\n{"jsonrpc":'
    )
    answer = _read_all(sock, 5)
    assert answer.startswith(b"HTTP/1.1 408 ") and b"body_timeout" in answer, answer
    sock.close()


def test_silent_connections_make_room_for_new_ones(strict_http: HttpServer) -> None:
    silent = [socket.create_connection(("127.0.0.1", _port(strict_http))) for _ in range(8)]
    try:
        with httpx.Client(timeout=10) as http:
            for _ in range(3):
                response = http.post(strict_http.url, json=INIT, headers=HEADERS)
                assert response.status_code == 200, response.text
    finally:
        for sock in silent:
            sock.close()


def test_value_measurement_stops_at_the_limit() -> None:
    from agent_custody_state.server.limits import JsonSize

    huge = [0.5] * 5_000_000
    started = time.perf_counter()
    size = JsonSize(huge, 10_000, 1 << 20)
    assert size.walk(10) and size.over  # one step: the list's length alone decides
    assert time.perf_counter() - started < 0.05
    size = JsonSize({"a": [1, "xy", None], "é": {"b": True}}, 100, 1000)
    assert size.walk() and not size.over
    assert size.elements == 6  # two members, three items, one member
    assert size.bytes >= len('{"a":[1,"xy",null],"é":{"b":true}}'.encode()) - 4


async def test_big_results_are_rendered_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_custody_state.server import limits

    threads: list[int] = []

    def spy(data: Any) -> str:
        threads.append(threading.get_ident())
        return "{}"

    monkeypatch.setattr(limits, "js_json", spy)
    await limits.render_json({"facts": [1, 2]})
    await limits.render_json({"facts": list(range(10_000))})
    assert threads[0] == threading.get_ident() != threads[1]
