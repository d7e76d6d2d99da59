"""Benchmark: the memory server beside a bare MCP server, over stdio and Streamable HTTP.

    python bench/bench_server.py            # full run, prints a Markdown table
    python bench/bench_server.py --quick    # fewer calls (smoke test)

Same run, same machine, same client: a bare ``mcp`` low-level server whose one tool does nothing
(the SDK's own cost), then ``agent-custody-memory serve`` answering ``memory.write`` and
``memory.read`` through the gateway's ``_meta``. The ledger is the in-memory backend for the
overhead comparison (the server's own cost) and JSONL for the durable numbers (each write is
fsynced). Then HTTP with 1, 8 and 32 concurrent clients (each its own MCP session, half writes,
half reads): throughput, p50 and p99 of answered calls, and errors by kind.

Targets (issue 4): at most +30% over bare for write and read over stdio; HTTP 8 clients p99 under
50 ms; 32 clients no error but the overload answer, p99 under 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

CLI = [sys.executable, "-m", "agent_custody_state"]
TOKEN = "bench-" + uuid.uuid4().hex
META = {"agent-custody/receipt": "rcpt-bench", "agent-custody/agent": "bench-agent"}
WRITE_ARGS = {"subject": "acct:42", "predicate": "plan", "value": "enterprise", "space": "org"}
READ_ARGS = {"subject": "acct:42", "predicate": "plan"}  # exactly one fact: written first


# -- the bare server ---------------------------------------------------------------------------


def bare_server() -> Any:
    from mcp.server.lowlevel import Server

    tool = types.Tool(
        name="noop",
        description="does nothing",
        input_schema={"type": "object", "additionalProperties": True},
    )

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text="{}")])

    return Server("bare", on_list_tools=list_tools, on_call_tool=call_tool)


def run_bare_stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = bare_server()

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def run_bare_http(port: int) -> None:
    import uvicorn

    app = bare_server().streamable_http_app(json_response=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


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


# -- the runs ----------------------------------------------------------------------------------


Row = tuple[str, str, list[float], float | None]


async def stdio_runs(n: int, warmup: int, folder: str) -> list[Row]:
    rows: list[Row] = []
    async with stdio_session([sys.executable, __file__, "--bare-stdio"]) as bare:
        base = await timed(call(bare, "noop", WRITE_ARGS, META), n, warmup)
    rows.append(("stdio", "bare SDK, no-op tool", base, None))
    mean = statistics.mean(base)
    for label, ledger in (
        ("memory backend", "memory:"),
        ("JSONL, fsync", os.path.join(folder, "stdio.jsonl")),
    ):
        async with stdio_session([*CLI, "serve", "--ledger", ledger]) as ours:
            await ours.call_tool("memory.write", WRITE_ARGS, meta=META)
            # Reads first: the builtin backends' reads scan every assert, so reading after the
            # writes would measure the ledger's size, not the server.
            read = await timed(call(ours, "memory.read", READ_ARGS, META), n, warmup)
            write = await timed(call(ours, "memory.write", WRITE_ARGS, META), n, warmup)
        rows.append(("stdio", f"memory.write ({label})", write, statistics.mean(write) / mean))
        rows.append(("stdio", f"memory.read ({label})", read, statistics.mean(read) / mean))
    return rows


async def http_runs(n: int, warmup: int, folder: str) -> list[Row]:
    rows: list[Row] = []
    port = free_port()
    bare_proc = subprocess.Popen(
        [sys.executable, __file__, "--bare-http", str(port)], stderr=subprocess.DEVNULL
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/")
        async with http_session(f"http://127.0.0.1:{port}/mcp") as bare:
            base = await timed(call(bare, "noop", WRITE_ARGS, META), n, warmup)
    finally:
        bare_proc.terminate()
        bare_proc.wait()
    rows.append(("http", "bare SDK, no-op tool", base, None))
    mean = statistics.mean(base)
    for label, ledger in (
        ("memory backend", "memory:"),
        ("JSONL, fsync", os.path.join(folder, "http.jsonl")),
    ):
        proc, url = spawn_http(
            [
                *CLI,
                "serve",
                "--ledger",
                ledger,
                "--http",
                "--port",
                "0",
                "--token-env",
                "BENCH_TOKEN",
            ],
            {"BENCH_TOKEN": TOKEN},
        )
        try:
            async with http_session(url, TOKEN) as ours:
                await ours.call_tool("memory.write", WRITE_ARGS, meta=META)
                read = await timed(call(ours, "memory.read", READ_ARGS, META), n, warmup)
                write = await timed(call(ours, "memory.write", WRITE_ARGS, META), n, warmup)
        finally:
            proc.terminate()
            proc.wait()
        rows.append(("http", f"memory.write ({label})", write, statistics.mean(write) / mean))
        rows.append(("http", f"memory.read ({label})", read, statistics.mean(read) / mean))
    return rows


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
        status, _, payload = await self.post(
            {
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments, "_meta": META},
            }
        )
        if status == 503:
            return "overload"
        if status != 200:
            return f"HTTP {status}"
        reply = json.loads(payload)
        if "error" in reply:
            return f"error: {reply['error']['message']}"
        return "ok" if not reply["result"].get("isError") else "tool error"

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


async def bare_concurrency_runs(seconds: float) -> list[dict[str, Any]]:
    """The same load on the bare SDK server (its one tool answers every name): the ceiling."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--bare-http", str(port)], stderr=subprocess.DEVNULL
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/")
        return [await load(port, clients, seconds) for clients in (1, 8, 32)]
    finally:
        proc.terminate()
        proc.wait()


async def concurrency_runs(seconds: float, folder: str, ledger_kind: str) -> list[dict[str, Any]]:
    ledger = "memory:" if ledger_kind == "memory" else os.path.join(folder, "load.jsonl")
    proc, url = spawn_http(
        [*CLI, "serve", "--ledger", ledger, "--http", "--port", "0", "--token-env", "BENCH_TOKEN"],
        {"BENCH_TOKEN": TOKEN},
    )
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    try:
        return [await load(port, clients, seconds) for clients in (1, 8, 32)]
    finally:
        proc.terminate()
        proc.wait()


def report(rows: list[Row], loads: dict[str, list[dict[str, Any]]]) -> str:
    out = [
        "| transport | call | mean ms | p50 ms | p99 ms | vs bare |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for transport, label, samples, ratio in rows:
        vs = "1.00" if ratio is None else f"{ratio:.2f} ({(ratio - 1) * 100:+.0f}%)"
        out.append(
            f"| {transport} | {label} | {statistics.mean(samples):.2f} | "
            f"{pct(samples, 50):.2f} | {pct(samples, 99):.2f} | {vs} |"
        )
    out += [
        "",
        "| HTTP load (ledger) | clients | calls/s | p50 ms | p99 ms | errors |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for kind, results in loads.items():
        for r in results:
            errors = ", ".join(f"{k}: {v}" for k, v in r["errors"].items()) or "none"
            out.append(
                f"| {kind} | {r['clients']} | {r['per_s']:.0f} | {r['p50']:.1f} | "
                f"{r['p99']:.1f} | {errors} |"
            )
    return "\n".join(out)


async def main(quick: bool, only: str | None) -> None:
    n, warmup, seconds = (100, 10, 1.5) if quick else (500, 50, 4.0)
    rows: list[Row] = []
    loads: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        if only in (None, "stdio"):
            rows += await stdio_runs(n, warmup, folder)
        if only in (None, "http"):
            rows += await http_runs(n, warmup, folder)
        if only in (None, "load"):
            loads = {
                "bare SDK (no-op)": await bare_concurrency_runs(seconds),
                "ours, memory backend": await concurrency_runs(seconds, folder, "memory"),
                "ours, JSONL (fsync)": await concurrency_runs(seconds, folder, "jsonl"),
            }
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end; "
        f"{n} sequential calls per row after {warmup} warm-up, through the SDK's client; "
        f"load runs {seconds:.1f} s each, raw HTTP/1.1 keep-alive clients\n"
    )
    print(report(rows, loads))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=("stdio", "http", "load"))
    parser.add_argument("--bare-stdio", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bare-http", type=int, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.bare_stdio:
        run_bare_stdio()
    elif options.bare_http:
        run_bare_http(options.bare_http)
    else:
        anyio.run(main, options.quick, options.only)
