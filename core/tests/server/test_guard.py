"""The HTTP guard in isolation: overload shedding, token roles, Host and Origin policy."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from agent_custody_state.server.guard import BearerToken, HostPolicy, HttpGuard, normalize_tokens
from agent_custody_state.server.trust import SCOPE_ROLE_KEY

pytestmark = pytest.mark.anyio
G, D = "gateway-token-0123", "direct-token-01234"  # static tokens are 16 characters or more


class SlowApp:
    """Holds each request until released; records the role the guard handed it."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.roles: list[str] = []
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.roles.append(scope[SCOPE_ROLE_KEY])
        self.bodies.append((await receive())["body"])
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def guard(app: Any, **kw: Any) -> HttpGuard:
    options: dict[str, Any] = {
        "tokens": normalize_tokens({G: "gateway", D: "direct"}),
        "hosts": HostPolicy(["127.0.0.1", "localhost"]),
        "max_request_bytes": 100,
        "max_concurrency": 2,
        **kw,
    }
    return HttpGuard(app, **options)


async def test_overload_answers_503_with_retry_after_and_recovers() -> None:
    app = SlowApp()
    front = guard(app)
    transport = httpx.ASGITransport(app=front)
    statuses: list[int] = []
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:

        async def call(token: str) -> None:
            response = await client.post(
                "/mcp", content=b"{}", headers={"Authorization": f"Bearer {token}"}
            )
            statuses.append(response.status_code)
            if response.status_code == 503:
                assert response.headers["retry-after"] == "1"
                error = response.json()["error"]
                assert error["code"] == -32000 and "overloaded" in error["message"]

        async with anyio.create_task_group() as tg:
            for token in (G, D, G, G):
                tg.start_soon(call, token)
            with anyio.fail_after(5):
                while len(statuses) < 2:
                    await anyio.sleep(0.01)
            assert statuses == [503, 503]
            app.release.set()
        assert sorted(statuses) == [200, 200, 503, 503]
        assert front.intake.in_flight == 0 and front.intake.refused_overload == 2
        assert len(app.roles) == 2
        app.roles.clear()
        for token in (D, G):
            response = await client.post(
                "/mcp", content=b"{}", headers={"Authorization": f"Bearer {token}"}
            )
            assert response.status_code == 200
        assert app.roles == ["direct", "gateway"]


async def test_body_is_replayed_unchanged_and_limit_is_exact() -> None:
    app = SlowApp()
    app.release.set()
    transport = httpx.ASGITransport(app=guard(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        body = json.dumps({"x": "y" * 80}).encode()[:100]
        ok = await client.post("/mcp", content=body, headers={"Authorization": f"Bearer {G}"})
        assert ok.status_code == 200 and app.bodies == [body]
        big = await client.post(
            "/mcp", content=b"z" * 101, headers={"Authorization": f"Bearer {G}"}
        )
        assert big.status_code == 413


def test_host_and_origin_policy() -> None:
    policy = HostPolicy(
        ["127.0.0.1", "localhost", "[::1]", "memory:8790"], ["https://ops.example"], port=8790
    )
    assert policy.host_ok("127.0.0.1:8790") and policy.host_ok("LOCALHOST")
    assert policy.host_ok("[::1]:1") and policy.host_ok("memory:8790")
    assert not policy.host_ok("memory:8791") and not policy.host_ok(None)
    assert not policy.host_ok("evil.example")
    assert policy.origin_ok(None) and policy.origin_ok("http://localhost:8790")
    assert policy.origin_ok("https://ops.example/") and policy.origin_ok("http://[::1]:8790")
    assert policy.origin_ok("http://memory:8790") and policy.origin_ok("HTTP://127.0.0.1:8790")
    # another port or scheme is another origin (SPEC 4.5)
    for foreign in ("http://localhost:3000", "https://localhost:8790", "http://[::1]:9999"):
        assert not policy.origin_ok(foreign), foreign
    assert not policy.origin_ok("http://localhost") and not policy.origin_ok("http://memory:1")
    assert not policy.origin_ok("http://evil.example") and not policy.origin_ok("null")
    assert not policy.origin_ok("file://localhost")
    # Malformed values that a lenient parser would read as a loopback name.
    for bad in (
        "http://[::1].evil.example",
        "http://localhost:abc",
        "http://localhost/x",
        "http://user@localhost",
        "http://[::1]x:9",
    ):
        assert not policy.origin_ok(bad), bad
    for bad in ("[::1].evil.example", "[::1]x:8790", "localhost:abc", "127.0.0.1:80:80"):
        assert not policy.host_ok(bad), bad
    assert HostPolicy(["*"]).host_ok("anything:1")


def test_tokens_normalised_and_checked() -> None:
    a, b, c = "a" * 16, "b" * 20, "c" * 32
    tokens = normalize_tokens([a, (b, "direct"), BearerToken(c, "gateway", "ops")])
    assert [(t.value, t.role, t.label) for t in tokens] == [
        (a, "gateway", "gateway-1"),
        (b, "direct", "direct-2"),
        (c, "gateway", "ops"),
    ]
    with pytest.raises(ValueError, match="empty"):
        normalize_tokens([""])
    with pytest.raises(ValueError, match="role must be"):
        normalize_tokens({"x" * 16: "admin"})


def test_a_short_token_is_refused_naming_its_role_not_its_value() -> None:
    with pytest.raises(ValueError) as refused:
        normalize_tokens([G, ("s3cret-fifteen!", "direct")])
    message = str(refused.value)
    assert message.startswith(
        "bearer token direct-2 (role direct) is too short: 15 characters, at least 16 are needed"
    )
    assert "s3cret" not in message and "\n" not in message
    with pytest.raises(ValueError, match="bearer token ops \\(role reader\\) is too short"):
        normalize_tokens([BearerToken("x", "reader", "ops")])
    assert normalize_tokens(["p" * 16])[0].value == "p" * 16  # 16 is enough


def test_one_value_for_two_roles_is_refused_without_echoing_it() -> None:
    """Two variables holding one secret (a copy-paste) must not leave the role to their order."""
    secret, v, same = "s3cret-s3cret-s3cret", "v" * 16, "same" * 4
    with pytest.raises(ValueError, match="same value") as refused:
        normalize_tokens(
            [BearerToken(secret, "reader", "reader:R"), BearerToken(secret, "gateway", "g:G")]
        )
    assert secret not in str(refused.value) and "reader:R" in str(refused.value)
    with pytest.raises(ValueError, match="same value"):
        normalize_tokens([BearerToken(v, "direct", spaces=["team:a"]), (v, "direct")])
    assert len(normalize_tokens([same, same])) == 2  # a harmless repeat stays accepted
