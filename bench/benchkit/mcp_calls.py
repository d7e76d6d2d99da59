"""What the server benchmark sends and how: the gateway token, ``_meta`` and arguments of
every call, MCP client sessions over stdio and Streamable HTTP (the SDK's own client), timed
calls and percentiles, and server processes started and waited for.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

TOKEN = "bench-" + uuid.uuid4().hex
META = {"agent-custody/receipt": "rcpt-bench", "agent-custody/agent": "bench-agent"}
WRITE_ARGS = {"subject": "acct:42", "predicate": "plan", "value": "enterprise", "space": "org"}
READ_ARGS = {"subject": "acct:42", "predicate": "plan"}  # exactly one fact: written first


# -- clients -----------------------------------------------------------------------------------


@asynccontextmanager
async def stdio_session(command: list[str]) -> Any:
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def http_session(url: str, token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as client,
        streamable_http_client(url, http_client=client) as (r, w),
        ClientSession(r, w) as session,
    ):
        await session.initialize()
        yield session


def call(
    session: ClientSession, tool: str, args: dict[str, Any], meta: dict[str, Any] | None
) -> Callable[[], Awaitable[Any]]:
    """One call per await; a write goes to a fresh subject each time, so reads stay one fact."""
    counter = [0]

    async def once() -> Any:
        sent = args
        if tool == "memory.write":
            counter[0] += 1
            sent = {**args, "subject": f"{args['subject']}:w{counter[0]}"}
        result = await session.call_tool(tool, sent, meta=meta)  # type: ignore[arg-type]
        if result.is_error:
            raise RuntimeError(result.content[0].text)  # type: ignore[union-attr]
        return result

    return once


async def timed(fn: Callable[[], Awaitable[Any]], n: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        await fn()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


# -- servers as processes ----------------------------------------------------------------------


def spawn_http(
    args: list[str], env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        args, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+/mcp)", line)
        if match:
            import threading

            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, match.group(1)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError("server did not start")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx2.get(url, timeout=1)
            return
        except Exception:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")
