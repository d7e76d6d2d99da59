"""``[server.oauth]`` end to end: ``serve --config memory.toml --http`` as a subprocess, the
official ``mcp`` client with JWTs from a local issuer whose JWKS is served over loopback HTTP
(issue 13 section 3).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from mcp import MCPError
from servertest import HttpServer, post, start_http, unique

from agent_custody_state_conformance.gateway import GatewayClient
from agent_custody_state_conformance.issuer import JwksServer, LocalIssuer

pytestmark = pytest.mark.anyio


@dataclass
class Served:
    server: HttpServer
    issuer: LocalIssuer
    jwks: JwksServer
    resource: str

    def token(self, scope: str, **claims: object) -> str:
        return self.issuer.token(self.resource, scope=scope, **claims)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("oauth-serve")
    issuer = LocalIssuer(folder)
    port = free_port()  # the resource URL names the port clients reach
    resource = f"http://127.0.0.1:{port}/mcp"
    with JwksServer(issuer) as jwks:
        config = folder / "memory.toml"
        config.write_text(
            f'ledger = "{folder / "ledger.jsonl"}"\n'
            "[server]\n"
            "allow_direct = true\n"
            "[server.oauth]\n"
            f'issuer = "{issuer.issuer}"\n'
            f'resource = "{resource}"\n'
            f'jwks_url = "{jwks.jwks_url}"\n'
            "jwks_timeout_seconds = 2\n"
        )
        server = start_http("--config", str(config), "--port", str(port))
        try:
            yield Served(server, issuer, jwks, resource)
        finally:
            server.stop()


def test_the_startup_line_and_the_metadata_document(served: Served) -> None:
    assert any("OAuth access tokens from https://issuer.test" in x for x in served.server.lines)
    base = served.server.url.removesuffix("/mcp")
    doc = httpx.get(f"{base}/.well-known/oauth-protected-resource/mcp", timeout=10).json()
    assert doc["resource"] == served.resource
    assert doc["authorization_servers"] == ["https://issuer.test"]
    assert doc["scopes_supported"] == ["memory:gateway", "memory:read", "memory:write"]
    refused = post(served.server.url, None)
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"' in challenge


async def test_a_write_and_a_read_with_access_tokens(served: Served) -> None:
    subject = unique("acct")
    async with GatewayClient.http(served.server.url, token=served.token("memory:gateway")) as gw:
        written = await gw.call(
            "memory.write",
            {"subject": subject, "predicate": "plan", "value": "pro", "space": "org"},
        )
        assert not written.is_error, written.texts
        assert written.data["fact"]["provenance"] == "attested"
    async with GatewayClient.http(served.server.url, token=served.token("memory:read")) as reader:
        read = await reader.direct("memory.read", {"subject": subject})
        assert not read.is_error, read.texts
        assert [f["value"] for f in read.data["facts"]] == ["pro"]
        with pytest.raises(MCPError, match="needs the memory:write scope"):
            await reader.direct(
                "memory.write", {"subject": subject, "predicate": "p", "value": 1, "space": "org"}
            )
    assert served.jwks.fetches == 1  # one fetch, then the cache


async def test_an_expired_token_is_refused(served: Served) -> None:
    expired = served.token("memory:gateway", exp=int(time.time()) - 600)
    response = post(served.server.url, expired)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert 'error="invalid_token", error_description="the token has expired"' in challenge
    # The official client (without an OAuth provider to renew the token) cannot connect.
    with pytest.raises(BaseExceptionGroup) as refused:
        async with GatewayClient.http(served.server.url, token=expired):
            pass
    assert refused.group_contains(MCPError, depth=None)


def test_a_jwks_url_in_plain_http_to_another_host_is_warned_of(
    served: Served, tmp_path: Path
) -> None:
    """Keys fetched over plain ``http://`` from another host can be swapped by anyone on the
    path, who can then forge tokens: one warning at start (not for a loopback JWKS, as the
    module's server has)."""
    warning = "jwks_url is plain http:// to another host"
    assert not any(warning in line for line in served.server.lines)
    config = tmp_path / "memory.toml"
    config.write_text(
        f'ledger = "{tmp_path / "ledger.jsonl"}"\n'
        "[server.oauth]\n"
        'issuer = "https://issuer.test"\n'
        'resource = "http://127.0.0.1:1/mcp"\n'
        'jwks_url = "http://keys.example.test/jwks"\n'
    )
    server = start_http("--config", str(config))
    try:
        deadline = time.monotonic() + 10
        while warning not in "".join(server.lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "".join(server.lines).count(warning) == 1, server.lines
    finally:
        server.stop()
