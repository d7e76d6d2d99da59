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
        tokens={"static-token-0123456": "gateway"},
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
    assert post(server.url, "static-token-0123456").status_code == 200


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


def test_a_lower_grant_lends_its_spaces_to_no_higher_role(tmp_path: Path) -> None:
    """A token holding a direct grant limited to team:support and a reader grant limited to
    team:sales must not write team:sales: the role is the most trusted grant's, and so are the
    spaces (a lower grant's spaces would let the higher role act there)."""
    from agent_custody_state.server.oauth import JwtVerifier
    from agent_custody_state.spaces import SpaceScope

    issuer = LocalIssuer(tmp_path)
    grants = {
        "support:agent": ("direct", SpaceScope.parse(["team:support"])),
        "sales:read": ("reader", SpaceScope.parse(["team:sales"])),
        "memory:gateway": ("gateway", None),
    }
    verifier = JwtVerifier(
        OAuthSettings(issuer=ISSUER, resource=AUD, jwks_file=str(issuer.jwks), grants=grants)
    )
    both = verifier.principal({"scope": "support:agent sales:read"})
    assert both.role == "direct" and both.spaces is not None
    assert both.spaces.allows("team:support") and not both.spaces.allows("team:sales")
    # A space: scope still widens the token, as documented.
    wider = verifier.principal({"scope": "support:agent space:team:sales"})
    assert wider.spaces is not None and wider.spaces.allows("team:sales")
    # An unscoped gateway grant is not narrowed by a lower grant's spaces either.
    assert verifier.principal({"scope": "memory:gateway sales:read"}).spaces is None


def test_two_principals_never_share_a_label() -> None:
    """The label binds MCP sessions: subject ``a/b`` must not pass for subject ``a`` of
    client ``b`` (and drive its sessions)."""
    from agent_custody_state.server.oauth import Principal

    def label(subject: str, client: str) -> str:
        return Principal(ISSUER, subject, client, "reader", None).label

    assert label("a/b", "") != label("a", "b")
    assert label("a%2Fb", "") != label("a/b", "")
    assert label("alice", "app") == "oauth:alice/app"
