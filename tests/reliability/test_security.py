"""Security checks (issue 7, item 5), as matrices rather than single cases.

* A **direct** token, whatever ``_meta`` it sends (the gateway's three keys in every type and
  spelling, the keys smuggled into arguments, an ``observed`` that would verify the value, a
  gateway session id borrowed from another token), never gets ``attested`` or ``verified``,
  never confirms, and never passes the gateway requirement.
* Missing or wrong bearer tokens get 401 ``{"error":"unauthorized"}`` on every method.
* A foreign ``Origin`` gets 403 and a foreign ``Host`` 421 (DNS rebinding).
* Oversized bodies: 413 on HTTP (declared and chunked), a JSON-RPC error on stdio, and the
  server keeps serving.
* A non-loopback bind without tokens is refused.
* Secrets (the tokens, the forget key, the database password) appear nowhere: not in the
  server's stderr, in any HTTP answer or tool result, in error messages, in ledger locations, or
  in ``agent-custody-memory plugins`` and failed commands' output.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from .support import CLI, RawMcp, ServerProcess, gateway_meta, http_client, record

GATEWAY = "gw-" + uuid.uuid4().hex
DIRECT = "direct-" + uuid.uuid4().hex
FORGET_KEY = "fk-" + uuid.uuid4().hex
ENV = {"SEC_GW": GATEWAY, "SEC_DIRECT": DIRECT, "SEC_FORGET": FORGET_KEY}
SERVE = [
    "--token-env",
    "SEC_GW",
    "--direct-token-env",
    "SEC_DIRECT",
    "--forget-key-env",
    "SEC_FORGET",
]
GATEWAY_REQUIRED = "memory server accepts calls only through the receipts gateway"

#: Everything a direct caller might send to pass for the gateway.
HOSTILE_META: list[Any] = [
    None,
    {},
    gateway_meta(),
    gateway_meta(**{"agent-custody/observed": {"crm": {"plan": "pro"}}}),
    {"agent-custody/receipt": "r-1"},
    {"agent-custody/agent": "root"},
    {"agent-custody/receipt": 7, "agent-custody/agent": True},
    {"Agent-Custody/Receipt": "r", "Agent-Custody/Agent": "a"},
    {"agent-custody/receipt ": "r", " agent-custody/agent": "a"},
    {"agent-custody": {"receipt": "r", "agent": "a"}},
    {"agent-custody/role": "gateway", **gateway_meta()},
    {"progressToken": 1, **gateway_meta()},
]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture
def servers(tmp_path: Path) -> Any:
    """One strict server (gateway required) and one with --allow-direct, on one ledger each."""
    strict = ServerProcess(["--ledger", str(tmp_path / "strict.jsonl"), *SERVE], ENV)
    lenient = ServerProcess(
        ["--ledger", str(tmp_path / "lenient.jsonl"), *SERVE, "--allow-direct"], ENV
    )
    try:
        yield strict, lenient
    finally:
        strict.stop()
        lenient.stop()
        for server in (strict, lenient):
            assert_no_secrets(server.stderr, "server stderr")


def assert_no_secrets(text: str, where: str, extra: tuple[str, ...] = ()) -> int:
    for secret in (GATEWAY, DIRECT, FORGET_KEY, *extra):
        assert secret not in text, f"a secret appears in {where}"
    return 1


async def direct_matrix(strict_url: str, lenient_url: str) -> int:
    checks = 0
    async with http_client() as http:
        gw = await RawMcp(http, lenient_url, GATEWAY).open()
        made = await gw.call(
            "memory.write",
            {"subject": "acct:1", "predicate": "plan", "value": "pro", "space": "org"},
            gateway_meta(),
        )
        target = json.loads(made["texts"][0])["fact"]["factId"]
        strict = await RawMcp(http, strict_url, DIRECT).open()
        lenient = await RawMcp(http, lenient_url, DIRECT).open()
        tools = {
            "memory.write": {
                "subject": "acct:2",
                "predicate": "plan",
                "value": "pro",
                "space": "org",
                "evidence": {"fact": "crm", "path": "plan"},
            },
            "memory.read": {},
            "memory.confirm": {"factId": target},
            "memory.retract": {"factId": target, "reason": "r"},
            "memory.forget": {"factId": target, "reason": "r"},
            "memory.hold": {"factId": target, "reason": "r"},
            "memory.release": {"factId": target, "reason": "r"},
            "memory.sweep": {"reason": "r", "before": "2000-01-01T00:00:00Z"},
            "memory.get": {"factId": target},
            "memory.history": {"factId": target},
        }
        for meta in HOSTILE_META:
            for tool, args in tools.items():
                # Smuggling the keys into the arguments must not help either.
                smuggled = (
                    {**args, "_meta": meta, **(meta or {})} if isinstance(meta, dict) else args
                )
                for arguments in (args, smuggled):
                    out = await strict.call(tool, arguments, meta)
                    assert out.get("isError") and out["texts"][0].startswith(GATEWAY_REQUIRED), (
                        f"direct {tool} with {meta} passed the gateway requirement: {out}"
                    )
                    checks += 1
            # --allow-direct: admitted, but only ever claimed.
            out = await lenient.call("memory.write", tools["memory.write"], meta)
            assert out["isError"] and out["texts"][0].startswith("evidence needs the gateway"), out
            plain = {k: v for k, v in tools["memory.write"].items() if k != "evidence"}
            out = await lenient.call("memory.write", {**plain, "provenance": "verified"}, meta)
            assert not out["isError"], out
            fact = json.loads(out["texts"][0])["fact"]
            assert fact["provenance"] == "claimed" and fact["source"]["receiptId"] is None, fact
            out = await lenient.call("memory.confirm", {"factId": fact["factId"]}, meta)
            assert out["isError"] and out["texts"][0].startswith(
                "confirmation must come through the receipts gateway"
            ), out
            out = await lenient.call("memory.read", {"subject": "acct:2"}, meta)
            assert json.loads(out["texts"][0])["facts"] == [], "a claimed fact left quarantine"
            checks += 4
        # A gateway session driven with the direct token gains nothing.
        borrowed = RawMcp(
            http,
            lenient_url,
            DIRECT,
            headers={
                "mcp-session-id": gw.headers["mcp-session-id"],
                "mcp-protocol-version": gw.headers["mcp-protocol-version"],
            },
        )
        out = await borrowed.call("memory.confirm", {"factId": target}, gateway_meta())
        assert "httpStatus" in out or out.get("isError"), f"borrowed session confirmed: {out}"
        checks += 1
    return checks


def test_direct_token_never_passes_for_the_gateway(servers: Any) -> None:
    strict, lenient = servers
    checks = run(direct_matrix(strict.url, lenient.url))
    record("security[direct-token]", checks=checks, meta_variants=len(HOSTILE_META), escalations=0)


BAD_AUTH: list[dict[str, str]] = [
    {},
    {"authorization": ""},
    {"authorization": "Bearer"},
    {"authorization": "Bearer\tx"},
    {"authorization": "Bearer wrong"},
    {"authorization": f"Bearer {GATEWAY}x"},
    {"authorization": f"Bearer {GATEWAY[:-1]}"},
    {"authorization": f"Basic {GATEWAY}"},
    {"authorization": GATEWAY},
    {"authorization": f"Bearer  {GATEWAY}x"},
    {"authorization": f"Token {DIRECT}"},
    {"x-api-key": GATEWAY},
    {"authorization": f"Bearer {GATEWAY.upper()}"},
]


def test_wrong_or_missing_tokens_get_401(servers: Any) -> None:
    strict, _ = servers
    checks = 0
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    with httpx.Client(timeout=30) as http:
        for headers in BAD_AUTH:
            for method in ("POST", "GET", "DELETE"):
                response = http.request(
                    method,
                    strict.url,
                    headers={
                        "content-type": "application/json",
                        "accept": "application/json, text/event-stream",
                        **headers,
                    },
                    content=body,
                )
                assert response.status_code == 401, (headers, method, response.status_code)
                assert response.json() == {"error": "unauthorized"}
                assert_no_secrets(response.text + str(response.headers), "a 401 answer")
                checks += 1
    record("security[401]", checks=checks, accepted=0)


FOREIGN_ORIGINS = [
    "http://evil.example",
    "null",
    "http://127.0.0.1.evil.example",
    "https://localhost.evil.example:443",
    "file://",
    "chrome-extension://abc",
    "http://[::1].evil.example",
    "http://localhost:abc",
    "http://user@localhost",
    "http://localhost/path",
]
FOREIGN_HOSTS = [
    "evil.example",
    "127.0.0.1.nip.io",
    "localhost.evil.example",
    "10.0.0.1",
    "evil.example:80",
    "[::2]",
    "[::1].evil.example",
    "localhost:abc",
    "[::1]x:1",
]


def test_foreign_origin_403_and_host_421(servers: Any) -> None:
    strict, _ = servers
    checks = 0
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    base = {
        "authorization": f"Bearer {GATEWAY}",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    }
    with httpx.Client(timeout=30) as http:
        for origin in FOREIGN_ORIGINS:
            response = http.post(strict.url, headers={**base, "origin": origin}, content=body)
            assert response.status_code == 403, (origin, response.status_code)
            checks += 1
        for host in FOREIGN_HOSTS:
            response = http.post(strict.url, headers={**base, "host": host}, content=body)
            assert response.status_code == 421, (host, response.status_code)
            checks += 1
    record("security[origin-host]", checks=checks, accepted=0)


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
        out, _ = stdio.proc.communicate(b"\n".join(lines) + b"\n", timeout=120)
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
