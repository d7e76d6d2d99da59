"""Security checks (issue 7, item 5) on what the server takes in and gives out.

* Oversized bodies: 413 on HTTP (declared and chunked), a JSON-RPC error on stdio, and the
  server keeps serving.
* A non-loopback bind without tokens is refused.
* Secrets (the tokens, the forget key, the database password) appear nowhere: not in the
  server's stderr, in any HTTP answer or tool result, in error messages, in ledger locations, or
  in ``agent-custody-memory plugins`` and failed commands' output.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .mcpkit import CLI, RawMcp, ServerProcess, gateway_meta, http_client
from .security_support import DIRECT, ENV, GATEWAY, SERVE, assert_no_secrets, run
from .support import record


def test_oversized_bodies_refused_and_serving_continues(tmp_path: Path) -> None:
    limit = 64 * 1024
    server = ServerProcess(
        ["--ledger", str(tmp_path / "big.jsonl"), *SERVE, "--max-request-bytes", str(limit)], ENV
    )
    checks = 0
    try:

        async def http_cases() -> int:
            n = 0
            async with http_client() as http:
                mcp = await RawMcp(http, server.url, GATEWAY).open()
                for size in (limit + 1, limit * 4, 8 * 1024 * 1024):
                    big = {
                        "jsonrpc": "2.0",
                        "id": 5,
                        "method": "tools/call",
                        "params": {
                            "name": "memory.write",
                            "arguments": {
                                "subject": "s",
                                "predicate": "p",
                                "space": "org",
                                "value": "x" * size,
                            },
                            "_meta": gateway_meta(),
                        },
                    }
                    response = await mcp.post(big)
                    assert response.status_code == 413, response.status_code
                    n += 1

                    async def chunks(data: bytes = json.dumps(big).encode()) -> Any:
                        for i in range(0, len(data), 16_384):
                            yield data[i : i + 16_384]

                    response = await http.post(
                        server.url, content=chunks(), headers=mcp.headers
                    )  # no content-length
                    assert response.status_code == 413, response.status_code
                    n += 1
                    ok = await mcp.call("memory.read", {}, gateway_meta())
                    assert not ok.get("isError") and "texts" in ok, ok
                    n += 1
            return n

        checks += run(http_cases())
        assert server.alive()
    finally:
        server.stop()
    ledger = tmp_path / "big.jsonl"
    assert not ledger.exists() or b"x" * 1000 not in ledger.read_bytes()  # nothing got in

    stdio = ServerProcess(
        ["--ledger", str(tmp_path / "big2.jsonl"), "--max-request-bytes", str(limit)], http=False
    )
    try:
        assert stdio.proc.stdin is not None and stdio.proc.stdout is not None
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "sec", "version": "0"},
            },
        }
        lines = [
            json.dumps(init).encode(),
            b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        ]
        for i, size in enumerate((limit + 1, limit * 10, 16 * 1024 * 1024)):
            lines.append(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 100 + i,
                        "method": "tools/call",
                        "params": {"name": "memory.write", "arguments": {"value": "y" * size}},
                    }
                ).encode()
            )
            lines.append(json.dumps({"jsonrpc": "2.0", "id": 200 + i, "method": "ping"}).encode())
        out = stdio.exchange(b"\n".join(lines) + b"\n", timeout=120)
        replies = {r.get("id"): r for r in map(json.loads, out.splitlines())}
        for i in range(3):
            assert "too large" in replies[100 + i]["error"]["message"], replies.get(100 + i)
            assert "result" in replies[200 + i]  # the next message is still served
            checks += 2
    finally:
        stdio.stop()
    record("security[oversized]", checks=checks, accepted=0, server_deaths=0)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10"])
def test_non_loopback_bind_without_tokens_is_refused(tmp_path: Path, host: str) -> None:
    done = subprocess.run(
        [
            *CLI,
            "serve",
            "--http",
            "--port",
            "0",
            "--host",
            host,
            "--ledger",
            str(tmp_path / "l.jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done
    assert "refusing to serve" in done.stderr and "without a bearer token" in done.stderr
    record(f"security[bind {host}]", checks=1, accepted=0)


def test_secrets_never_leak(tmp_path: Path, embedded_postgres: Any, postgres_url: str) -> None:
    """Drive a server and the CLI through successes and failures; grep everything they say."""
    pytest.importorskip(
        "agent_custody_state_events_postgres", reason="events-postgres not installed"
    )
    password = embedded_postgres.password
    pg_location = f"{postgres_url}&table=secrets"
    seen: list[str] = []
    checks = 0
    server = ServerProcess(["--ledger", pg_location, *SERVE], ENV)
    try:

        async def exercise() -> None:
            async with http_client() as http:
                mcp = await RawMcp(http, server.url, GATEWAY).open()
                direct = await RawMcp(http, server.url, DIRECT).open()
                out = await mcp.call(
                    "memory.write",
                    {
                        "subject": "dana",
                        "predicate": "email",
                        "value": "d@example.com",
                        "space": "org",
                    },
                    gateway_meta(),
                )
                fid = json.loads(out["texts"][0])["fact"]["factId"]
                for client, tool, args in [
                    (mcp, "memory.forget", {"factId": fid, "reason": "gdpr"}),
                    (mcp, "memory.forget", {"factId": fid, "reason": "again"}),
                    (mcp, "memory.get", {"factId": fid}),
                    (mcp, "memory.history", {"factId": fid}),
                    (mcp, "memory.write", {"subject": 1}),
                    (mcp, "memory.sweep", {"reason": "r"}),
                    (direct, "memory.confirm", {"factId": fid}),
                    (mcp, "memory.nope", {}),
                ]:
                    seen.append(json.dumps(await client.call(tool, args, gateway_meta())))
                response = await http.post(
                    server.url, content=b"{}", headers={"authorization": "Bearer nope"}
                )
                seen.append(response.text + str(dict(response.headers)))

        run(exercise())
    finally:
        server.stop()
    seen.append(server.stderr)
    assert "***" in server.stderr  # the location is shown, masked
    wrong = pg_location.replace(password, "not-the-password")
    commands = [
        ["plugins"],
        ["plugins", "--json"],
        ["export", "--ledger", pg_location, "--out", str(tmp_path / "out.jsonl")],
        ["export", "--ledger", wrong, "--out", str(tmp_path / "x.jsonl")],
        [
            "export",
            "--ledger",
            pg_location.replace("table=secrets", "table=Bad-Name"),
            "--out",
            str(tmp_path / "y.jsonl"),
        ],
        ["sweep", "--ledger", pg_location, "--before", "not-a-time", "--reason", "r"],
        ["serve", "--ledger", wrong, "--http", "--port", "0", *SERVE],
        [
            "serve",
            "--ledger",
            str(tmp_path / "l.jsonl"),
            "--http",
            "--port",
            "0",
            "--token-env",
            "SEC_UNSET",
        ],
    ]
    for args in commands:
        done = subprocess.run(
            [*CLI, *args], capture_output=True, text=True, timeout=60, env={**os.environ, **ENV}
        )
        seen.append(done.stdout + done.stderr)
        checks += 1
    exported = (tmp_path / "out.jsonl").read_text()
    assert "d@example.com" not in exported  # forgotten
    seen.append(exported)
    for i, text in enumerate(seen):
        checks += assert_no_secrets(text, f"output #{i}", (password,))
    from agent_custody_state import Ledger

    with Ledger(pg_location) as ledger:
        assert password not in ledger.location and password not in str(ledger.backend.describe())
        checks += 1
    record("security[secrets]", checks=checks, outputs_scanned=len(seen), leaks=0)
