"""Benchmark: the memory server beside a bare MCP server, over stdio and Streamable HTTP.

    python bench/bench_server.py            # full run, prints a Markdown table
    python bench/bench_server.py --quick    # fewer calls (smoke test)

Same run, same machine, same client: a bare ``mcp`` low-level server whose one tool does nothing
(the SDK's own cost), then ``agent-custody-memory serve`` answering ``memory.write`` and
``memory.read`` through the gateway's ``_meta``. The ledger is the in-memory backend for the
overhead comparison (the server's own cost), and JSONL and SQLite for the durable numbers (each
write is fsynced; over stdio only). Then HTTP with 1, 8 and 32 concurrent clients (each its own MCP session, half writes,
half reads): throughput, p50 and p99 of answered calls, and errors by kind.

Targets (issue 4): at most +30% over bare for write and read over stdio; HTTP 8 clients p99 under
50 ms; 32 clients no error but the overload answer, p99 under 100 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any

import anyio
import mcp_types as types

from benchkit.http_load import load
from benchkit.mcp_calls import (
    META,
    READ_ARGS,
    TOKEN,
    WRITE_ARGS,
    call,
    free_port,
    http_session,
    pct,
    spawn_http,
    stdio_session,
    timed,
    wait_http,
)

CLI = [sys.executable, "-m", "agent_custody_state"]


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

    # ``fsync`` (any other name is the no-op): one appended line made durable, the floor of a
    # durable write over the same transport.
    floor = tempfile.TemporaryFile(prefix="acs-bench-floor-")  # noqa: SIM115 - lives with the server

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        if params.name == "fsync":
            floor.write(b'{"kind":"assert","fact":{"value":"enterprise"}}\n')
            floor.flush()
            os.fsync(floor.fileno())
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


# -- the runs ----------------------------------------------------------------------------------


Row = tuple[str, str, list[float], float | None]


async def stdio_runs(n: int, warmup: int, folder: str) -> list[Row]:
    rows: list[Row] = []
    async with stdio_session([sys.executable, __file__, "--bare-stdio"]) as bare:
        base = await timed(call(bare, "noop", WRITE_ARGS, META), n, warmup)
        durable = await timed(call(bare, "fsync", WRITE_ARGS, META), n, warmup)
    rows.append(("stdio", "bare SDK, no-op tool", base, None))
    mean = statistics.mean(base)
    rows.append(("stdio", "bare SDK, one fsync (durable floor)", durable, None))
    floor = statistics.mean(durable)
    for label, ledger in (
        ("memory backend", "memory:"),
        ("JSONL, fsync", os.path.join(folder, "stdio.jsonl")),
        ("SQLite, synchronous=FULL", os.path.join(folder, "stdio.sqlite")),
    ):
        async with stdio_session([*CLI, "serve", "--ledger", ledger]) as ours:
            await ours.call_tool("memory.write", WRITE_ARGS, meta=META)
            # Reads first: the builtin backends' reads scan every assert, so reading after the
            # writes would measure the ledger's size, not the server.
            read = await timed(call(ours, "memory.read", READ_ARGS, META), n, warmup)
            write = await timed(call(ours, "memory.write", WRITE_ARGS, META), n, warmup)
        # A durable write is compared with the durable floor, a read with the no-op.
        versus = mean if ledger == "memory:" else floor
        rows.append(("stdio", f"memory.write ({label})", write, statistics.mean(write) / versus))
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
        "| transport | call | mean ms | p50 ms | p99 ms | vs bare (durable writes: vs the floor) |",
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
