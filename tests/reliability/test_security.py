"""Security checks (issue 7, item 5) on what a caller presents, as matrices rather than single
cases.

* A **direct** token, whatever ``_meta`` it sends (the gateway's three keys in every type and
  spelling, the keys smuggled into arguments, an ``observed`` that would verify the value, a
  gateway session id borrowed from another token), never gets ``attested`` or ``verified``,
  never confirms, and never passes the gateway requirement.
* Missing or wrong bearer tokens get 401 ``{"error":"unauthorized"}`` on every method.
* A foreign ``Origin`` gets 403 and a foreign ``Host`` 421 (DNS rebinding).

Oversized bodies, non-loopback binds and secrets in outputs: ``test_security_limits.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from .mcpkit import RawMcp, ServerProcess, gateway_meta, http_client
from .security_support import DIRECT, ENV, GATEWAY, SERVE, assert_no_secrets, run
from .support import record

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
