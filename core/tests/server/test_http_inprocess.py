"""``serve_memory_http`` in process: sessions bound to their token, unsigned direct results."""

from __future__ import annotations

import json
import socket
import statistics
import time
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from servertest import HEADERS, INIT

from agent_custody_state import Ledger, serve_memory_http
from agent_custody_state.server.signing import SigningIdentity
from agent_custody_state_conformance.gateway import SIGNATURE_KEY, GatewayClient

pytestmark = pytest.mark.anyio
GW, DIRECT = "gw-token-0123456789", "direct-token-0123456"
TOKENS = {GW: "gateway", DIRECT: "direct"}


@pytest.fixture
def server(tmp_path: Path):  # type: ignore[no-untyped-def]
    ledger = Ledger(tmp_path / "ledger.jsonl")
    running = serve_memory_http(
        ledger,
        port=0,
        tokens=TOKENS,
        require_gateway=False,
        identity=SigningIdentity(Ed25519PrivateKey.generate()),
    )
    yield running
    running.close()
    ledger.close()


def test_a_session_belongs_to_the_token_that_opened_it(server) -> None:  # type: ignore[no-untyped-def]
    with httpx.Client(timeout=10) as client:
        opened = client.post(
            server.url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {GW}"}
        )
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        same = client.post(
            server.url,
            json=ping,
            headers={**HEADERS, "Authorization": f"Bearer {GW}", "Mcp-Session-Id": session},
        )
        assert same.status_code == 200
        hijack = client.post(
            server.url,
            json=ping,
            headers={**HEADERS, "Authorization": f"Bearer {DIRECT}", "Mcp-Session-Id": session},
        )
        assert hijack.status_code == 404


async def test_direct_results_are_never_signed(server) -> None:  # type: ignore[no-untyped-def]
    async with GatewayClient.http(server.url, token=DIRECT) as direct:
        result = await direct.call(
            "memory.write", {"subject": "s", "predicate": "p", "value": 1, "space": "org"}
        )
        assert result.data["fact"]["provenance"] == "claimed"
        assert SIGNATURE_KEY not in result.meta
    async with GatewayClient.http(server.url, token=GW) as gw:
        result = await gw.call("memory.read", {"includeClaimed": True})
        assert SIGNATURE_KEY in result.meta
        assert json.loads(result.text)["facts"][0]["provenance"] == "claimed"


def test_no_nagle_stall_between_calls(server) -> None:  # type: ignore[no-untyped-def]
    """Header and body go out in separate writes; without TCP_NODELAY each call would wait
    for the client's delayed ACK (40 ms on Linux)."""
    sock = server.socket
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    with httpx.Client(timeout=10) as client:
        opened = client.post(
            server.url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {GW}"}
        )
        session = opened.headers["mcp-session-id"]
        headers = {**HEADERS, "Authorization": f"Bearer {GW}", "Mcp-Session-Id": session}
        times = []
        for i in range(15):
            start = time.perf_counter()
            assert (
                client.post(
                    server.url,
                    json={"jsonrpc": "2.0", "id": i + 2, "method": "ping"},
                    headers=headers,
                ).status_code
                == 200
            )
            times.append(time.perf_counter() - start)
    assert statistics.median(times) < 0.03, times
