"""Helpers for the memory server tests: spawning servers, unique names, ledger snapshots."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

CLI = [sys.executable, "-m", "agent_custody_state"]
GATEWAY_TOKEN = "gw-" + uuid.uuid4().hex
DIRECT_TOKEN = "direct-" + uuid.uuid4().hex
TOKEN_ENV = {"MEMORY_TOKEN": GATEWAY_TOKEN, "AGENT_TOKEN": DIRECT_TOKEN}
#: What a Streamable HTTP client sends with every POST, and its first request.
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}


def post(url: str, token: str | None, body: Any = INIT, **headers: str) -> httpx.Response:
    """One raw JSON-RPC POST to ``url`` (``initialize`` by default), with ``token`` if given."""
    sent = {**HEADERS, **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    return httpx.post(url, json=body, headers=sent, timeout=10)


def unique(prefix: str = "s") -> str:
    return f"{prefix}:{uuid.uuid4().hex[:10]}"


def ledger_bytes(folder: Path) -> dict[str, bytes]:
    """Every file of a ledger folder, by name (the ledger and its sidecars)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@dataclass
class HttpServer:
    """A ``serve --http`` subprocess; ``url`` parsed from its startup line."""

    proc: subprocess.Popen[str]
    url: str
    lines: list[str] = field(default_factory=list)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def start_http(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> HttpServer:
    proc = subprocess.Popen(
        [*CLI, "serve", "--http", "--port", "0", *args],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **TOKEN_ENV, **(env or {})},
    )
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    url = None
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        match = re.search(r"serving (http://\S+/mcp);", line)
        if match:
            url = match.group(1)
            break
    if url is None:
        proc.kill()
        raise RuntimeError("HTTP server did not start:\n" + "".join(lines) + proc.stderr.read())
    server = HttpServer(proc, url, lines)
    # Keep draining stderr so the server never blocks on a full pipe.
    threading.Thread(
        target=lambda: [lines.append(x) for x in proc.stderr],  # type: ignore[union-attr]
        daemon=True,
    ).start()
    return server


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60, cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


async def write(gw: Any, **args: Any) -> dict[str, Any]:
    """``memory.write`` with a fresh subject and defaults for the rest; asserts it succeeded."""
    base = {"subject": unique("acct"), "predicate": "plan", "value": "pro", "space": "org"}
    result = await gw.call("memory.write", {**base, **args})
    assert not result.is_error, result.texts
    return result.data  # type: ignore[no-any-return]
