"""Step-up authorization over HTTP (issue 13 section 3, ``server/stepup.py``).

A tool call an OAuth token lacks a scope for gets HTTP 403 with ``WWW-Authenticate: Bearer
error="insufficient_scope", scope="<what this call needs>"`` and a JSON-RPC error naming the
scope; nothing reaches the ledger. Static tokens, hidden fact ids and spaces no scope can spell
keep the tool errors they had.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import MCPError
from servertest import HEADERS, ledger_bytes, post

from agent_custody_state import Ledger, serve_memory_http
from agent_custody_state.server.guard import BearerToken
from agent_custody_state.server.http import MemoryHttpServer
from agent_custody_state.server.oauth import OAuthSettings
from agent_custody_state.server.scopes import SpaceScope
from agent_custody_state_conformance.gateway import GatewayClient
from agent_custody_state_conformance.issuer import LocalIssuer

AUD = "http://127.0.0.1/mcp"
METADATA = "http://127.0.0.1/.well-known/oauth-protected-resource/mcp"
STATIC = [
    BearerToken("static-reader-token", "reader"),
    BearerToken("static-team-a-token", "direct", spaces=SpaceScope(("team:a",))),
    BearerToken("static-all-token-01", "direct"),
]


@dataclass
class Setup:
    issuer: LocalIssuer
    server: MemoryHttpServer
    folder: Path

    def token(self, scope: str) -> str:
        return self.issuer.token(AUD, scope=scope)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    folder = tmp_path_factory.mktemp("stepup")
    (folder / "ledger").mkdir()
    issuer = LocalIssuer(folder)
    ledger = Ledger(folder / "ledger" / "ledger.jsonl")
    server = serve_memory_http(
        ledger,
        port=0,
        tokens=STATIC,
        require_gateway=False,
        oauth=OAuthSettings(issuer=issuer.issuer, resource=AUD, jwks_file=str(issuer.jwks)),
    )
    yield Setup(issuer, server, folder / "ledger")
    server.close()
    ledger.close()


class Session:
    """A raw Streamable HTTP session, to see the status and headers the client library hides."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.headers = {**HEADERS, "Authorization": f"Bearer {token}"}
        opened = post(url, token)
        assert opened.status_code == 200, opened.text
        self.headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
        self.headers["Mcp-Protocol-Version"] = "2025-06-18"
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        httpx.post(url, json=note, headers=self.headers, timeout=10)

    def call(self, tool: str, **arguments: Any) -> httpx.Response:
        body = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        return httpx.post(self.url, json=body, headers=self.headers, timeout=10)


def fact(space: str) -> dict[str, Any]:
    return {"subject": f"s:{uuid.uuid4().hex[:8]}", "predicate": "p", "value": 1, "space": space}


def assert_step_up(response: httpx.Response, scope: str) -> None:
    assert response.status_code == 403, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="insufficient_scope"'), challenge
    assert f'scope="{scope}"' in challenge
    assert f'resource_metadata="{METADATA}"' in challenge
    error = response.json()
    assert error["id"] == 7
    assert error["error"]["message"].startswith("insufficient scope: ")
    assert error["error"]["data"] == {"scope": scope}


@pytest.mark.parametrize(
    ("tool", "scope"),
    [
        ("memory.write", "memory:write"),
        ("memory.retract", "memory:write"),
        ("memory.forget", "memory:write"),
        ("memory.hold", "memory:gateway"),
        ("memory.sweep", "memory:gateway"),
        ("memory.confirm", "memory:gateway"),
    ],
)
def test_a_reader_token_calling_a_tool_that_changes_memory_is_asked_to_step_up(
    setup: Setup, tool: str, scope: str
) -> None:
    session = Session(setup.server.url, setup.token("memory:read"))
    before = ledger_bytes(setup.folder)
    arguments = fact("team:a") if tool == "memory.write" else {"factId": "f", "reason": "r"}
    assert_step_up(session.call(tool, **arguments), scope)
    assert ledger_bytes(setup.folder) == before
    assert session.call("memory.read", subject="nobody").status_code == 200


def test_a_space_outside_the_token_scope_is_asked_to_step_up(setup: Setup) -> None:
    session = Session(setup.server.url, setup.token("memory:write space:team:a"))
    assert not session.call("memory.write", **fact("team:a")).json()["result"].get("isError")
    before = ledger_bytes(setup.folder)
    assert_step_up(session.call("memory.write", **fact("team:b")), "space:team:b")
    assert_step_up(session.call("memory.read", space="team:b"), "space:team:b")
    reader = Session(setup.server.url, setup.token("memory:read space:team:a"))
    assert_step_up(reader.call("memory.write", **fact("team:b")), "memory:write space:team:b")
    assert ledger_bytes(setup.folder) == before
    # The client adds the scopes it was asked for to those it holds; the new token may.
    wider = Session(setup.server.url, setup.token("memory:write space:team:a space:team:b"))
    assert not wider.call("memory.write", **fact("team:b")).json()["result"].get("isError")


def test_a_hidden_fact_id_stays_an_unknown_id_not_a_step_up(setup: Setup) -> None:
    written = Session(setup.server.url, "static-all-token-01").call(
        "memory.write", **fact("team:b")
    )
    fact_id = written.json()["result"]["structuredContent"]["fact"]["factId"]
    session = Session(setup.server.url, setup.token("memory:write space:team:a"))
    stranger = str(uuid.uuid4())
    hidden = session.call("memory.retract", factId=fact_id, reason="r")
    unknown = session.call("memory.retract", factId=stranger, reason="r")
    assert hidden.status_code == unknown.status_code == 200
    texts = [c["text"] for c in hidden.json()["result"]["content"]]
    assert texts == [
        c["text"].replace(stranger, fact_id) for c in unknown.json()["result"]["content"]
    ]
    assert hidden.json()["result"]["isError"]


@pytest.mark.parametrize(
    ("token", "tool", "arguments", "code"),
    [
        ("static-reader-token", "memory.write", fact("team:a"), None),
        ("static-team-a-token", "memory.write", fact("team:b"), "space_out_of_scope"),
        ("jwt", "memory.write", fact("team b"), "space_out_of_scope"),  # no scope can spell it
    ],
)
def test_what_no_scope_can_lift_stays_a_tool_error(
    setup: Setup, token: str, tool: str, arguments: dict[str, Any], code: str | None
) -> None:
    if token == "jwt":
        token = setup.token("memory:write space:team:a")
    before = ledger_bytes(setup.folder)
    response = Session(setup.server.url, token).call(tool, **arguments)
    assert response.status_code == 200
    result = response.json()["result"]
    assert result["isError"]
    if code is not None:
        assert result["structuredContent"]["code"] == code
    else:
        assert "may only read" in result["content"][0]["text"]
    assert ledger_bytes(setup.folder) == before


@pytest.mark.anyio
async def test_the_official_client_sees_the_step_up_as_an_error_and_keeps_its_session(
    setup: Setup,
) -> None:
    async with GatewayClient.http(setup.server.url, token=setup.token("memory:read")) as client:
        with pytest.raises(MCPError) as refused:
            await client.direct("memory.write", fact("team:a"))
        assert "needs the memory:write scope" in refused.value.message
        assert refused.value.data == {"scope": "memory:write"}
        read = await client.direct("memory.read", {"subject": "nobody"})
        assert not read.is_error
