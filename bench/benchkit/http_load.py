"""The concurrent HTTP load of the server benchmark: raw HTTP/1.1 keep-alive MCP clients (lighter
than the server they measure), all connected first, then calling back to back for a while.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import anyio

from .mcp_calls import META, TOKEN, WRITE_ARGS, pct


class RawClient:
    """A minimal HTTP/1.1 keep-alive MCP client: the load generator must be lighter than the
    server it measures, and the SDK's client costs more CPU per call than the server does."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.token = port, token
        self.session: str | None = None
        self.next_id = 0

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        while True:  # connecting while the server sheds load: honour the 503 and retry
            status, headers, _ = await self.post(
                {
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "bench", "version": "0"},
                    },
                }
            )
            if status != 503:
                break
            await anyio.sleep(0.01)
        assert status == 200, status
        self.session = headers["mcp-session-id"]
        await self.post({"method": "notifications/initialized"}, notify=True)

    async def post(
        self, message: dict[str, Any], notify: bool = False
    ) -> tuple[int, dict[str, str], bytes]:
        body = {"jsonrpc": "2.0", **message}
        if not notify:
            self.next_id += 1
            body["id"] = self.next_id
        data = json.dumps(body).encode()
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
            f"Authorization: Bearer {self.token}\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n"
            "Mcp-Protocol-Version: 2025-06-18\r\n"
            + (f"Mcp-Session-Id: {self.session}\r\n" if self.session else "")
            + f"Content-Length: {len(data)}\r\n\r\n"
        )
        self.writer.write(head.encode() + data)
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            key, _, value = line.decode("latin-1").partition(":")
            headers[key.strip().lower()] = value.strip()
        payload = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return status, headers, payload

    async def tool(self, name: str, arguments: dict[str, Any]) -> str:
        """``ok``, ``overload``, or an error description."""
        return (await self.call(name, arguments))[0]

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, Any]:
        """The outcome (as ``tool``) and, when ``ok``, the result's JSON text parsed."""
        status, _, payload = await self.post(
            {
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments, "_meta": META},
            }
        )
        if status == 503:
            return "overload", None
        if status != 200:
            return f"HTTP {status}", None
        reply = json.loads(payload)
        if "error" in reply:
            return f"error: {reply['error']['message']}", None
        result = reply["result"]
        if result.get("isError"):
            return "tool error", result["content"][0].get("text")
        return "ok", json.loads(result["content"][0]["text"])

    def close(self) -> None:
        self.writer.close()


async def load(port: int, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` connections, all opened first, then calling back to back for ``seconds``
    (even calls write, odd calls read one fact)."""
    latencies: list[float] = []
    errors: dict[str, int] = {}
    ready, go = [0], anyio.Event()
    window: list[float] = []

    async def client(index: int) -> None:
        raw = RawClient(port, TOKEN)
        await raw.open()
        subject = f"acct:{index}"
        while await raw.tool("memory.write", {**WRITE_ARGS, "subject": subject}) == "overload":
            await anyio.sleep(0.01)
        ready[0] += 1
        if ready[0] == clients:
            window.append(time.monotonic())
            go.set()
        await go.wait()
        stop = window[0] + seconds
        i = 0
        try:
            while time.monotonic() < stop:
                i += 1
                start = time.perf_counter()
                if i % 2:
                    outcome = await raw.tool(
                        "memory.write", {**WRITE_ARGS, "subject": f"{subject}:w{i}"}
                    )
                else:
                    outcome = await raw.tool("memory.read", {"subject": subject})
                if outcome == "ok":
                    latencies.append((time.perf_counter() - start) * 1000)
                else:
                    errors[outcome] = errors.get(outcome, 0) + 1
                    if outcome == "overload":
                        # Honour the answer (Retry-After: 1), shortened so a run stays short.
                        await anyio.sleep(0.1)
        finally:
            raw.close()

    async with anyio.create_task_group() as tg:
        for index in range(clients):
            tg.start_soon(client, index)
    result: dict[str, Any] = {
        "clients": clients,
        "calls": len(latencies),
        "per_s": len(latencies) / seconds,
        "errors": errors,
    }
    result["p50"] = pct(latencies, 50) if latencies else float("nan")
    result["p99"] = pct(latencies, 99) if latencies else float("nan")
    return result
