"""One client cannot lock everyone else out (issue 11 item 4), against real HTTP servers.

* **Session flood**: a token holds at most ``sessions_per_token`` sessions (its oldest are ended),
  so a flood from a direct token never leaves the gateway without a session; idle sessions end
  after ``session_idle_timeout``.
* **Slowloris**: with a low open-file limit, hundreds of connections that never finish their
  headers are closed after ``header_timeout`` or make room for new ones; the gateway is answered
  throughout, and the server's log stays a few lines long (no traceback per failed accept).
* **Heavy request**: a 3.6 MB value of 900,000 numbers is refused at once, naming the limit, and
  other callers are not held up meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from .mcpkit import RawMcp, ServerProcess, gateway_meta, http_client
from .support import record

GATEWAY = "gw-" + uuid.uuid4().hex
DIRECT = "direct-" + uuid.uuid4().hex
ENV = {"SEC_GW": GATEWAY, "SEC_DIRECT": DIRECT}
SERVE = ["--token-env", "SEC_GW", "--direct-token-env", "SEC_DIRECT", "--allow-direct"]
READ = {"subject": "nobody", "space": "org"}


def _limited(nofile: int) -> list[str]:
    """The server command with its open-file limit lowered to ``nofile``."""
    return [
        sys.executable,
        "-c",
        "import resource, runpy, sys; "
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, {nofile})); "
        "sys.argv = ['agent-custody-memory', *sys.argv[1:]]; "
        "runpy.run_module('agent_custody_state', run_name='__main__')",
    ]


async def _alive(http: httpx.AsyncClient, url: str, token: str, session: str) -> bool:
    response = await http.post(
        url,
        content=b'{"jsonrpc":"2.0","id":9,"method":"ping"}',
        headers={
            "authorization": f"Bearer {token}",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-session-id": session,
            "mcp-protocol-version": "2025-06-18",
        },
    )
    assert response.status_code in (200, 404), (response.status_code, response.text)
    return response.status_code == 200


def test_one_token_holds_a_bounded_number_of_sessions(tmp_path: Path) -> None:
    server = ServerProcess(["--ledger", str(tmp_path / "l.jsonl"), *SERVE], ENV)
    opened = 300  # a multiple of 6

    async def flood() -> dict[str, Any]:
        async with http_client() as http:
            sessions: list[str] = []
            gateway_calls = 0
            for _start in range(0, opened, 6):  # six at a time: under max_concurrency (8)
                batch = await asyncio.gather(
                    *(RawMcp(http, server.url, DIRECT).open() for _ in range(6))
                )
                sessions += [m.headers["mcp-session-id"] for m in batch]
                # Meanwhile the gateway opens its own session and is served.
                gw = await RawMcp(http, server.url, GATEWAY).open()
                out = await gw.call("memory.read", READ, gateway_meta())
                assert out.get("isError") is False, out
                gateway_calls += 1
            alive = [await _alive(http, server.url, DIRECT, s) for s in sessions]
            return {"alive": alive, "gateway_calls": gateway_calls}

    try:
        result = asyncio.run(flood())
    finally:
        server.stop()
    alive = result["alive"]
    assert sum(alive) == 64, f"one token holds {sum(alive)} sessions"
    assert all(alive[-64:]) and not any(alive[:-64]), "not the oldest sessions were ended"
    record(
        "security[session-flood]",
        opened=opened,
        held_by_token=sum(alive),
        gateway_calls=result["gateway_calls"],
        gateway_refused=0,
    )


def test_idle_sessions_end(tmp_path: Path) -> None:
    server = ServerProcess(
        ["--ledger", str(tmp_path / "l.jsonl"), *SERVE, "--session-idle-timeout", "1"], ENV
    )

    async def idle() -> tuple[bool, bool]:
        async with http_client() as http:
            mcp = await RawMcp(http, server.url, DIRECT).open()
            session = mcp.headers["mcp-session-id"]
            first = await _alive(http, server.url, DIRECT, session)
            await asyncio.sleep(3)
            return first, await _alive(http, server.url, DIRECT, session)

    try:
        before, after = asyncio.run(idle())
    finally:
        server.stop()
    assert before and not after


def _slow_connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # and never more
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1024) == b""  # EOF: the server hung up
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_slowloris_cannot_starve_the_gateway(tmp_path: Path) -> None:
    server = ServerProcess(
        ["--ledger", str(tmp_path / "l.jsonl"), *SERVE, "--header-timeout", "3"],
        ENV,
        command=_limited(256),
    )
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    held: list[socket.socket] = []
    latencies: list[float] = []
    try:
        for _ in range(600):  # far past the 256 descriptors the server may open
            # A refused connect means the backlog is full: the attack is as strong as it gets.
            with contextlib.suppress(OSError):
                held.append(_slow_connect(port))

        async def gateway() -> None:
            for _ in range(20):
                # A fresh connection each time: the one a new gateway client would need.
                async with httpx.AsyncClient(timeout=10) as http:
                    started = time.perf_counter()
                    mcp = await RawMcp(http, server.url, GATEWAY).open()
                    out = await mcp.call("memory.read", READ, gateway_meta())
                    latencies.append(time.perf_counter() - started)
                    assert out.get("isError") is False, out

        asyncio.run(gateway())
        time.sleep(4)  # past the header timeout: every silent connection is gone
        still_open = sum(not _closed_by_server(s) for s in held)
        assert still_open == 0, f"{still_open} connections without headers are still open"
        assert server.alive()
    finally:
        for sock in held:
            sock.close()
        server.stop()
    log = server.stderr
    assert "Traceback" not in log, log[-2000:]
    assert len(log.encode()) < 16_384, f"the server logged {len(log)} bytes"
    latencies.sort()
    record(
        "security[slowloris]",
        slow_connections=len(held),
        gateway_calls=len(latencies),
        gateway_p50_ms=round(latencies[len(latencies) // 2] * 1000, 1),
        gateway_max_ms=round(latencies[-1] * 1000, 1),
        log_bytes=len(log.encode()),
    )


def test_one_heavy_value_does_not_stall_others(tmp_path: Path) -> None:
    server = ServerProcess(["--ledger", str(tmp_path / "l.jsonl"), *SERVE], ENV)
    heavy = {"subject": "big", "predicate": "p", "space": "org", "value": [0.5] * 900_000}
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "memory.write", "arguments": heavy, "_meta": gateway_meta()},
        },
        separators=(",", ":"),
    ).encode()  # encoded before the clock starts

    async def run() -> dict[str, Any]:
        async with http_client() as http:
            writer = await RawMcp(http, server.url, GATEWAY).open()
            reader = await RawMcp(http, server.url, GATEWAY).open()
            latencies: list[float] = []
            done = asyncio.Event()

            async def read_meanwhile() -> None:
                while not done.is_set():
                    started = time.perf_counter()
                    out = await reader.call("memory.read", READ, gateway_meta())
                    latencies.append(time.perf_counter() - started)
                    assert out.get("isError") is False, out
                    await asyncio.sleep(0.01)

            task = asyncio.create_task(read_meanwhile())
            await asyncio.sleep(0.2)
            started = time.perf_counter()
            response = await writer.post(body)
            took = time.perf_counter() - started
            assert response.status_code == 200, (response.status_code, response.text[:300])
            result = response.json()["result"]
            out = {
                "isError": result.get("isError"),
                "texts": [c["text"] for c in result["content"]],
            }
            await asyncio.sleep(0.2)
            done.set()
            await task
            largest = await writer.call(
                "memory.write", {**heavy, "value": [0.5] * 10_000}, gateway_meta()
            )
            return {"out": out, "took": took, "latencies": sorted(latencies), "largest": largest}

    try:
        result = asyncio.run(run())
    finally:
        server.stop()
    out = result["out"]
    assert out.get("isError") and out["texts"][0].startswith(
        "value too large: more than 10000 elements"
    ), out
    assert "max_value_elements = 10000" in out["texts"][0]
    worst = result["latencies"][-1]
    assert worst < 2.0, f"a reader waited {worst:.2f} s behind one heavy write"
    largest = result["largest"]
    assert largest.get("isError") is False, largest
    assert json.loads(largest["texts"][0])["fact"]["value"] == [0.5] * 10_000
    record(
        "security[heavy-value]",
        body_bytes=len(body),
        refused_in_ms=round(result["took"] * 1000, 1),
        reader_calls=len(result["latencies"]),
        reader_max_ms=round(worst * 1000, 1),
    )
