"""Fuzzing every tool (issue 7, item 4): schema-derived and hostile inputs, three ways in.

Inputs come from each tool's JSON input schema as the server lists it (``tools/list``, turned
into Hypothesis strategies by ``from_schema`` in ``fuzz_inputs.py``), mixed with hostile cases:
wrong types for every field, huge strings, deep nesting, invalid and offset-less timestamps,
lone surrogates, NUL bytes, unknown ids, ids of forgotten, retracted and held facts, non-object
arguments and hostile ``_meta``. Each case goes to one of the ten tools (or an unknown one), over:

* **stdio**: ``agent-custody-memory serve`` as a subprocess, raw JSON-RPC lines;
* **HTTP**: ``serve --http`` as a subprocess, raw JSON-RPC POSTs with a gateway token;
* **in-process**: the server's ``MemoryService`` directly (much faster; also reaches inputs no
  JSON parser lets through, such as lone surrogates as Python strings), on JSONL and SQLite.

For every call: the server answers within the timeout and stays up; a refusal is a clear error
(``invalid arguments: <field>: ...``, a ledger message, a gateway-requirement message, or a
JSON-RPC error for a message that is not a valid call) and never an internal error or a
traceback; a refused call, and any read, leaves the ledger's files byte-identical (hashed
before and after each call).

The inputs are built in ``fuzz_inputs.py``, the checks and the fuzzing loop live in
``fuzz_harness.py``; the three ways in are the tests below.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from .fuzz_harness import RAW_MESSAGES, Harness, StdioClient, fuzz, list_tools, seed_ledger
from .fuzz_inputs import Ids
from .mcpkit import RawMcp, ServerProcess, http_client
from .support import record, scale

GATEWAY_TOKEN = "gw-" + uuid.uuid4().hex


def test_fuzz_stdio(tmp_path: Path) -> None:
    n = scale(300, 10_000)
    ledger_dir = tmp_path / "ledger"
    ledger_dir.mkdir()
    server = ServerProcess(["--ledger", str(ledger_dir / "fuzz.jsonl")], http=False)
    try:
        client = StdioClient(server)
        tools = list_tools(client.request("tools/list", {}))
        assert len(tools) == 10
        ids = Ids()
        seed_ledger(client.call, ids)
        harness = Harness(ledger_dir, "stdio")
        fuzz(n, tools, client.call, harness, ids, in_process=False, seed=1)
        # Messages that are not calls at all: not JSON, not JSON-RPC, over the size limit.
        for raw in RAW_MESSAGES:
            client.send(None, raw + b"\n")
            reply = client.receive()
            assert "error" in reply and reply["error"]["message"], reply
            harness.outcomes["jsonrpc_error"] += 1
            harness.calls += 1
        assert list_tools(client.request("tools/list", {})) == tools  # still serving
        assert server.alive()
    finally:
        code = server.stop()
    assert "Traceback" not in server.stderr, server.stderr[-3000:]
    assert "internal error" not in server.stderr
    record(
        "fuzz[stdio]",
        calls=harness.calls,
        hostile=harness.hostile,
        outcomes=dict(harness.outcomes),
        crashes=0,
        hangs=0,
        refused_calls_changing_files=0,
        exit_code=code,
    )


def test_fuzz_http(tmp_path: Path) -> None:
    n = scale(300, 10_000)
    ledger_dir = tmp_path / "ledger"
    ledger_dir.mkdir()
    server = ServerProcess(
        ["--ledger", str(ledger_dir / "fuzz.jsonl"), "--token-env", "FUZZ_GW_TOKEN"],
        {"FUZZ_GW_TOKEN": GATEWAY_TOKEN},
    )
    loop = asyncio.new_event_loop()
    try:
        http = http_client()
        mcp = loop.run_until_complete(RawMcp(http, server.url, GATEWAY_TOKEN).open())
        tools = list_tools(loop.run_until_complete(mcp.rpc("tools/list")))
        assert len(tools) == 10

        def call(name: str, args: Any, meta: Any) -> dict[str, Any]:
            return loop.run_until_complete(mcp.call(name, args, meta))

        ids = Ids()
        seed_ledger(call, ids)
        harness = Harness(ledger_dir, "http")
        fuzz(n, tools, call, harness, ids, in_process=False, seed=2)
        for raw in RAW_MESSAGES:
            response = loop.run_until_complete(mcp.post(raw))
            assert response.status_code in (200, 400), response.text
            assert "Traceback" not in response.text
            harness.outcomes[f"raw_{response.status_code}"] += 1
            harness.calls += 1
        assert list_tools(loop.run_until_complete(mcp.rpc("tools/list"))) == tools
        loop.run_until_complete(http.aclose())
        assert server.alive()
    finally:
        loop.close()
        server.stop()
    assert "Traceback" not in server.stderr, server.stderr[-3000:]
    record(
        "fuzz[http]",
        calls=harness.calls,
        hostile=harness.hostile,
        outcomes=dict(harness.outcomes),
        crashes=0,
        hangs=0,
        refused_calls_changing_files=0,
    )


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_fuzz_in_process(tmp_path: Path, backend: str) -> None:
    """The same, through the server object: more calls, and inputs no JSON parser passes."""
    from agent_custody_state import Ledger, create_memory_server

    if backend == "sqlite":
        pytest.importorskip("agent_custody_state_events_sqlite", reason="events-sqlite missing")
    n = scale(600, 10_000)
    ledger_dir = tmp_path / "ledger"
    ledger_dir.mkdir()
    ledger = Ledger(ledger_dir / f"fuzz.{backend}")
    server = create_memory_server(ledger)
    service = server.memory
    tools = {
        name: schema
        for name, _desc, schema in __import__(
            "agent_custody_state.server.tools", fromlist=["TOOLS"]
        ).TOOLS
    }
    loop = asyncio.new_event_loop()

    def call(name: str, args: Any, meta: Any) -> dict[str, Any]:
        result = loop.run_until_complete(service.call(name, args, meta, "gateway"))
        return {"isError": result.is_error, "texts": result.texts}

    try:
        ids = Ids()
        seed_ledger(call, ids)
        harness = Harness(ledger_dir, f"in-process/{backend}")
        fuzz(n, tools, call, harness, ids, in_process=True, seed=3 + (backend == "sqlite"))
    finally:
        loop.close()
        service.close()
        ledger.close()
    record(
        f"fuzz[in-process,{backend}]",
        calls=harness.calls,
        hostile=harness.hostile,
        outcomes=dict(harness.outcomes),
        crashes=0,
        refused_calls_changing_files=0,
    )
