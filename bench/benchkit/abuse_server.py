"""The abuse benchmark's server and clients: ``serve --http`` as a subprocess (optionally under a
lower open-file limit) with a gateway token and a direct token, a bare Streamable HTTP MCP client,
and the gateway's steady ``memory.read`` calls whose latencies each attack reports.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

GATEWAY, DIRECT = "gw-" + uuid.uuid4().hex, "direct-" + uuid.uuid4().hex
ENV = {**os.environ, "BENCH_GW": GATEWAY, "BENCH_DIRECT": DIRECT}
SERVE = [
    "serve",
    "--http",
    "--port",
    "0",
    "--token-env",
    "BENCH_GW",
    "--direct-token-env",
    "BENCH_DIRECT",
    "--allow-direct",
]
PROTOCOL = "2025-06-18"
READ = {"subject": "acct:1", "space": "org"}


def limited(nofile: int) -> list[str]:
    """The server command with its open-file limit lowered to ``nofile``."""
    return [
        sys.executable,
        "-c",
        "import resource, runpy, sys; "
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, {nofile})); "
        "sys.argv = ['agent-custody-memory', *sys.argv[1:]]; "
        "runpy.run_module('agent_custody_state', run_name='__main__')",
    ]


class Server:
    """``serve --http`` as a subprocess; its stderr is drained and counted."""

    def __init__(self, folder: Path, nofile: int | None = None) -> None:
        command = limited(nofile) if nofile else [sys.executable, "-m", "agent_custody_state"]
        self.proc = subprocess.Popen(
            [*command, *SERVE, "--ledger", str(folder / "l.jsonl")], env=ENV, stderr=subprocess.PIPE
        )
        assert self.proc.stderr is not None
        seen = ""
        while not (match := re.search(r"serving (http://\S+/mcp);", seen)):
            line = self.proc.stderr.readline().decode()
            if not line:
                raise RuntimeError("server did not start: " + seen)
            seen += line  # a warning may come first (e.g. limits lowered under ulimit -n)
        self.url = match.group(1)
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])
        self.log_bytes = 0
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log_bytes += len(line)

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Mcp:
    """A bare Streamable HTTP MCP client: JSON-RPC POSTs with a session header."""

    def __init__(self, http: httpx.AsyncClient, url: str, token: str) -> None:
        self.http, self.url = http, url
        self.headers = {
            "authorization": f"Bearer {token}",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }

    async def open(self) -> Mcp:
        response = await self.http.post(
            self.url,
            headers=self.headers,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "0"},
                },
            },
        )
        if response.status_code != 200:
            raise RuntimeError(f"initialize: HTTP {response.status_code}")
        self.headers["mcp-session-id"] = response.headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = PROTOCOL
        return self

    async def post(self, body: bytes) -> httpx.Response:
        return await self.http.post(self.url, headers=self.headers, content=body)

    async def call(self, tool: str, args: Any) -> tuple[bool, str]:
        """(ok, first text or the failure)."""
        response = await self.post(call_body(tool, args))
        if response.status_code != 200:
            return False, f"HTTP {response.status_code}"
        result = response.json().get("result", {})
        text = (result.get("content") or [{}])[0].get("text", "")
        return not result.get("isError"), text


def call_body(tool: str, args: Any) -> bytes:
    """A ``tools/call`` request as the gateway sends it (a fresh receipt in ``_meta``)."""
    meta = {"agent-custody/receipt": f"rcpt-{uuid.uuid4()}", "agent-custody/agent": "bench"}
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": tool, "arguments": args, "_meta": meta},
        },
        separators=(",", ":"),
    ).encode()


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of latencies in seconds, in milliseconds; NaN if none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def gateway_reads(
    http: httpx.AsyncClient, url: str, stop: asyncio.Event, pause: float = 0.02
) -> tuple[list[float], int]:
    """The gateway's calls until ``stop``: latencies of answered ones, and failures."""
    latencies: list[float] = []
    failures = 0
    gw = await Mcp(http, url, GATEWAY).open()
    while not stop.is_set():
        started = time.perf_counter()
        try:
            ok, _ = await gw.call("memory.read", READ)
        except httpx.HTTPError:
            ok = False
        if ok:
            latencies.append(time.perf_counter() - started)
        else:
            failures += 1
        await asyncio.sleep(pause)
    return latencies, failures
