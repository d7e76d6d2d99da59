"""OAuth 2.1 resource server (issue 13 section 3): JWT access tokens from a local issuer key.

The issuer is a key pair (``agent_custody_state_conformance.issuer``); its public JWKS is a
file. Tokens are signed with PyJWT, as an authorization server would, and sent over real HTTP
to the in-process server; static bearer tokens keep working beside them.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import jwt
import pytest
from servertest import post

from agent_custody_state import Ledger, serve_memory_http
from agent_custody_state.server.oauth import OAuthSettings
from agent_custody_state_conformance.issuer import DEFAULT_ISSUER as ISSUER
from agent_custody_state_conformance.issuer import LocalIssuer


@pytest.fixture
def setup(tmp_path: Path):  # type: ignore[no-untyped-def]
    issuer = LocalIssuer(tmp_path)
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
    assert post(server.url, issuer.token(AUD, scope="memory:write")).status_code == 200
    assert post(server.url, "static-token").status_code == 200


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
        token = LocalIssuer(issuer.jwks.parent, name="other").token(AUD, scope="memory:read")
    elif case == "no exp":
        token = issuer.token(AUD, scope="memory:read", exp=None)
    else:
        token = "not-a-token"
    response = post(server.url, token)
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
    response = post(server.url, issuer.token(AUD, scope="calendar:read"))
    assert response.status_code == 403
    assert 'error="insufficient_scope"' in response.headers["www-authenticate"]
