"""OAuth 2.1 resource server (issue 13 section 3): JWT access tokens from a local issuer key.

The issuer is a key pair made here with ``cryptography``; its public JWKS is a file. Tokens are
signed with PyJWT, as an authorization server would, and sent over real HTTP to the in-process
server; static bearer tokens keep working beside them.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from agent_custody_state import Ledger, serve_memory_http
from agent_custody_state.server.oauth import OAuthSettings

ISSUER = "https://issuer.test"
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


class Issuer:
    def __init__(self, folder: Path) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = uuid.uuid4().hex
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        self.jwks = folder / "jwks.json"
        self.jwks.write_text(json.dumps({"keys": [{**public, "kid": self.kid, "use": "sig"}]}))

    def token(self, audience: str, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "aud": audience, "sub": "alice", "iat": now, "exp": now + 300}
        body.update(claims)
        clean = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(clean, self.key, algorithm="RS256", headers={"kid": self.kid})


@pytest.fixture
def setup(tmp_path: Path):  # type: ignore[no-untyped-def]
    issuer = Issuer(tmp_path)
    ledger = Ledger(tmp_path / "ledger.jsonl")
    # The resource URL must be known before the port: bind first, then build the settings.
    server = serve_memory_http(
        ledger,
        port=0,
        tokens={"static-token": "gateway"},
        require_gateway=False,
        oauth=OAuthSettings(
            issuer=ISSUER, resource="http://127.0.0.1/mcp", jwks_file=str(issuer.jwks)
        ),
    )
    yield issuer, server
    server.close()
    ledger.close()


def post(server: Any, token: str | None, body: Any = INIT) -> httpx.Response:
    headers = dict(HEADERS)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.post(server.url, json=body, headers=headers, timeout=10)


AUD = "http://127.0.0.1/mcp"


def test_the_metadata_document_names_the_issuer_and_scopes(setup) -> None:  # type: ignore[no-untyped-def]
    _issuer, server = setup
    base = server.url.removesuffix("/mcp")
    for path in (
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ):
        doc = httpx.get(base + path, timeout=10).json()
        assert doc["resource"] == AUD
        assert doc["authorization_servers"] == [ISSUER]
        assert doc["scopes_supported"] == ["memory:gateway", "memory:read", "memory:write"]
        assert doc["bearer_methods_supported"] == ["header"]


def test_a_valid_token_works_and_static_tokens_still_do(setup) -> None:  # type: ignore[no-untyped-def]
    issuer, server = setup
    assert post(server, issuer.token(AUD, scope="memory:write")).status_code == 200
    assert post(server, "static-token").status_code == 200


@pytest.mark.parametrize(
    "case",
    [
        "none",
        "wrong issuer",
        "wrong audience",
        "expired",
        "not yet",
        "bad signature",
        "alg none",
        "unknown kid",
        "no exp",
        "garbage",
    ],
)
def test_a_bad_token_is_401_with_the_challenge(setup, case: str) -> None:  # type: ignore[no-untyped-def]
    issuer, server = setup
    now = int(time.time())
    token: str | None
    if case == "none":
        token = None
    elif case == "wrong issuer":
        token = issuer.token(AUD, scope="memory:read", iss="https://evil.test")
    elif case == "wrong audience":
        token = issuer.token("https://other.test/mcp", scope="memory:read")
    elif case == "expired":
        token = issuer.token(AUD, scope="memory:read", exp=now - 600)
    elif case == "not yet":
        token = issuer.token(AUD, scope="memory:read", nbf=now + 600)
    elif case == "bad signature":
        good = issuer.token(AUD, scope="memory:read")
        head, body, sig = good.split(".")
        token = f"{head}.{body}.{sig[:-4]}AAAA"
    elif case == "alg none":
        token = jwt.encode(
            {"iss": ISSUER, "aud": AUD, "exp": now + 300, "scope": "memory:gateway"},
            None,
            algorithm="none",
        )
    elif case == "unknown kid":
        (issuer.jwks.parent / "other").mkdir()
        token = Issuer(issuer.jwks.parent / "other").token(AUD, scope="memory:read")
    elif case == "no exp":
        token = issuer.token(AUD, scope="memory:read", exp=None)
    else:
        token = "not-a-token"
    response = post(server, token)
    assert response.status_code == 401, (case, response.text)
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert (
        'resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp"' in challenge
    )
    assert 'scope="memory:gateway memory:read memory:write"' in challenge
    if token is not None:
        assert 'error="invalid_token"' in challenge


def test_a_token_without_a_known_scope_is_403_insufficient_scope(setup) -> None:  # type: ignore[no-untyped-def]
    issuer, server = setup
    response = post(server, issuer.token(AUD, scope="calendar:read"))
    assert response.status_code == 403
    assert 'error="insufficient_scope"' in response.headers["www-authenticate"]


def test_space_scopes_in_the_token_limit_its_calls(setup) -> None:  # type: ignore[no-untyped-def]
    issuer, server = setup
    token = issuer.token(AUD, scope="memory:write space:team:a")
    opened = post(server, token)
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
    headers["Mcp-Protocol-Version"] = "2025-06-18"
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    httpx.post(server.url, json=note, headers=headers, timeout=10)

    def write(space: str) -> dict[str, Any]:
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "memory.write",
                "arguments": {"subject": "s", "predicate": "p", "value": 1, "space": space},
            },
        }
        reply = httpx.post(server.url, json=call, headers=headers, timeout=10).json()
        return reply["result"]  # type: ignore[no-any-return]

    assert not write("team:a").get("isError")
    refused = write("team:b")
    assert refused["isError"]
    assert refused["structuredContent"]["code"] == "space_out_of_scope"
