"""Space-scoped tokens never cross their scope (issue 13 section 3), on JSONL, SQLite, PostgreSQL.

Hypothesis draws sequences of tool calls, each from one of several callers with different space
scopes (and as the gateway, a direct caller or a reader), against the memory service over a real
ledger. The model is the space of every fact the test wrote. After each call:

* every event the call appended is about a fact in the caller's scope (zero cross-scope changes);
* a read returns only facts in scope, a history only events about facts in scope;
* a call naming a fact outside the scope answers exactly what the same call answers for an id
  that does not exist (the id substituted), and appends nothing: existence does not leak;
* a reader's call appends nothing.

``test_no_call_crosses_its_scope_over_http`` runs fewer examples (JSONL) through the HTTP
server with OAuth access tokens from a local issuer (scopes ``memory:gateway``/``memory:write``/
``memory:read`` plus ``space:<pattern>``) and the official ``mcp`` client, so the guard's
mapping of a token to a role and spaces is what is checked; there, and only there, a refusal a
scope could lift (a reader changing memory, a named space outside the scope) must be a 403
step-up naming exactly the scopes missing, and append nothing.

Each example works in its own namespace of spaces on one ledger per backend, so the facts of
earlier examples are there too, outside every scope of this one: another check of the same rule.
"""

from __future__ import annotations

import itertools
import json
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from mcp import MCPError

from agent_custody_state import Ledger, serve_memory_http
from agent_custody_state.server.oauth import OAuthSettings
from agent_custody_state.server.policy import GATEWAY_ONLY, READ_ONLY_TOOLS
from agent_custody_state.server.scopes import SpaceScope
from agent_custody_state.server.service import MemoryService
from agent_custody_state.server.trust import Role
from agent_custody_state_conformance.gateway import GatewayClient
from agent_custody_state_conformance.issuer import LocalIssuer

from .support import STRESS, record

EXAMPLES = 200 if STRESS else 25
HTTP_EXAMPLES = 50 if STRESS else 12
AUD = "http://127.0.0.1/mcp"
GRANT: dict[Role, str] = {
    "gateway": "memory:gateway",
    "direct": "memory:write",
    "reader": "memory:read",
}
SPACES = ("team:a", "team:b", "user:1", "user:2")
#: caller -> scope patterns, relative to the example's namespace (None: unscoped)
CALLERS: dict[str, tuple[str, ...] | None] = {
    "a": ("team:a",),
    "teams": ("team:*",),
    "users": ("user:*", "team:b"),
    "all": None,
}
OWN_SPACE = {"a": "team:a", "teams": "team:b", "users": "user:2", "all": "user:1"}
FACT_TOOLS = ("retract", "forget", "hold", "release", "confirm", "get", "history", "supersede")
TOOL = {"supersede": "memory.write"}

role: st.SearchStrategy[Role] = st.sampled_from(("gateway", "direct", "reader"))
op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(sorted(CALLERS)), st.sampled_from(SPACES)),
    st.tuples(st.sampled_from(FACT_TOOLS), st.sampled_from(sorted(CALLERS)), st.integers(0, 1000)),
    st.tuples(
        st.sampled_from(("read", "sweep")),
        st.sampled_from(["a", "teams", "users"]),  # "all" would sweep every example's facts
        st.sampled_from((None, *SPACES)),
    ),
)


#: A fact in user:1, asked about by a caller who may not see it and by one who may.
BOTH_PATHS: list[tuple[tuple[str, str, Any], Role]] = [
    (("write", "all", "user:1"), "gateway"),
    (("get", "a", 0), "gateway"),
    (("history", "all", 0), "gateway"),
]


class Run:
    """One example: its namespace, the model (fact id -> space) and the service."""

    #: Over HTTP with OAuth tokens, scope refusals a token could lift are 403 step-ups.
    steps_up = False

    def __init__(self, service: MemoryService | None) -> None:
        self.service = service
        self.ns = f"x{uuid.uuid4().hex[:8]}:"
        self.space_of: dict[str, str] = {}
        self.subject = f"{self.ns}subject"
        self.stats = {"calls": 0, "hidden": 0, "in_scope": 0, "stepup": 0}

    def scope(self, caller: str) -> SpaceScope | None:
        patterns = CALLERS[caller]
        return None if patterns is None else SpaceScope(tuple(self.ns + p for p in patterns))

    async def call(
        self, caller: str, tool: str, args: dict[str, Any], role: Role
    ) -> dict[str, Any]:
        assert self.service is not None
        meta = {"agent-custody/receipt": f"r-{uuid.uuid4()}", "agent-custody/agent": "agent"}
        result = await self.service.call(
            tool, args, meta if role == "gateway" else None, role, self.scope(caller)
        )
        self.stats["calls"] += 1
        return {"isError": result.is_error, "texts": result.texts}

    def args(self, name: str, fact_id: str, space: str = "") -> dict[str, Any]:
        if name == "supersede":
            return {
                "subject": self.subject,
                "predicate": "p",
                "value": 2,
                "space": space,
                "supersedes": fact_id,
            }
        if name in ("get", "history", "confirm", "hold", "release"):
            return {"factId": fact_id, **({"reason": "r"} if name in ("hold", "release") else {})}
        return {"factId": fact_id, "reason": "r"}

    def check_step_up(
        self, role: Role, tool: str, named: str | None, result: dict[str, Any], caller: str
    ) -> None:
        """Over HTTP: a 403 step-up exactly when a scope could lift the refusal, naming it."""
        scope = self.scope(caller)
        wants = []
        if role == "reader" and tool not in READ_ONLY_TOOLS:
            wants.append("memory:gateway" if tool in GATEWAY_ONLY else "memory:write")
        if named is not None and scope is not None and not scope.allows(named):
            wants.append(f"space:{named}")
        assert (result.get("stepup") or "").split() == (wants if self.steps_up else []), (
            role,
            tool,
            named,
            result,
        )

    async def step(self, ledger: Ledger, name: str, caller: str, arg: Any, role: Role) -> None:
        scope = self.scope(caller)
        before = ledger.count()
        tool = TOOL.get(name, f"memory.{name}")
        named: str | None = None
        if name == "write":
            space = named = self.ns + arg
            result = await self.call(
                caller,
                tool,
                {"subject": self.subject, "predicate": "p", "value": 1, "space": space},
                role,
            )
            if not result["isError"]:
                fact = _json(result)["fact"]
                self.space_of[fact["factId"]] = fact["space"]
            else:
                assert role == "reader" or (scope is not None and not scope.allows(space)), result
        elif name in ("read", "sweep"):
            named = self.ns + arg if arg is not None else None
            args: dict[str, Any] = {"space": named} if named is not None else {}
            if name == "sweep":
                args.update(reason="r", before="2999-01-01T00:00:00Z")
            result = await self.call(caller, tool, args, role)
            if name == "read" and not result["isError"]:
                for fact in _json(result)["facts"]:
                    assert scope is None or scope.allows(fact["space"]), fact
        else:
            if not self.space_of:
                return
            ids = sorted(self.space_of)
            fact_id = ids[arg % len(ids)]
            space = self.ns + OWN_SPACE[caller]  # a supersede must get past the space check
            named = space if name == "supersede" else None
            result = await self.call(caller, tool, self.args(name, fact_id, space), role)
            if scope is not None and not scope.allows(self.space_of[fact_id]):
                self.stats["hidden"] += 1
                stranger = str(uuid.uuid4())
                unknown = await self.call(caller, tool, self.args(name, stranger, space), role)
                expected = [t.replace(stranger, fact_id) for t in unknown["texts"]]
                assert (result["isError"], result["texts"]) == (unknown["isError"], expected)
            else:
                self.stats["in_scope"] += 1
            if name == "history" and not result["isError"]:
                for event in _json(result)["events"]:
                    about = event.get("factId") or event["fact"]["factId"]
                    space = ledger.get(about)
                    assert space is not None and (scope is None or scope.allows(space.space))
            if name == "supersede" and not result["isError"]:
                fact = _json(result)["fact"]
                self.space_of[fact["factId"]] = fact["space"]
        self.check_step_up(role, tool, named, result, caller)
        if role == "reader" or result.get("stepup"):
            assert ledger.count() == before, (role, name, result)
        for event in itertools.islice(ledger.export(), before, None):
            changed = ledger.get(event.fact_id)
            assert changed is not None and (scope is None or scope.allows(changed.space)), (
                f"{caller} ({scope}) changed a fact in {changed and changed.space} by {name}"
            )


class HttpRun(Run):
    """The same example over HTTP: one OAuth token and MCP session per caller and role."""

    steps_up = True

    def __init__(self, url: str, issuer: LocalIssuer, stack: AsyncExitStack) -> None:
        super().__init__(None)
        self.url, self.issuer, self.stack = url, issuer, stack
        self.clients: dict[tuple[str, Role], GatewayClient] = {}

    async def client(self, caller: str, role: Role) -> GatewayClient:
        if (caller, role) not in self.clients:
            spaces = [f"space:{self.ns}{p}" for p in CALLERS[caller] or ()]
            scope = " ".join([GRANT[role], *spaces])
            token = self.issuer.token(AUD, scope=scope, sub=f"{caller}-{role}")
            self.clients[caller, role] = await self.stack.enter_async_context(
                GatewayClient.http(self.url, token=token, agent="agent")
            )
        return self.clients[caller, role]

    async def call(
        self, caller: str, tool: str, args: dict[str, Any], role: Role
    ) -> dict[str, Any]:
        client = await self.client(caller, role)
        self.stats["calls"] += 1
        try:
            if role == "gateway":
                result = await client.call(tool, args)
            else:
                result = await client.direct(tool, args)
        except MCPError as exc:
            if not exc.message.startswith("insufficient scope"):
                raise
            self.stats["stepup"] += 1
            return {"isError": True, "texts": [exc.message], "stepup": exc.data["scope"]}
        return {"isError": result.is_error, "texts": result.texts}


def test_no_call_crosses_its_scope_over_http(tmp_path: Path) -> None:
    totals = {"calls": 0, "hidden": 0, "in_scope": 0, "stepup": 0}
    issuer = LocalIssuer(tmp_path)
    oauth = OAuthSettings(issuer=issuer.issuer, resource=AUD, jwks_file=str(issuer.jwks))
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        server = serve_memory_http(ledger, port=0, require_gateway=False, oauth=oauth)

        @settings(
            max_examples=HTTP_EXAMPLES,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(ops=st.lists(st.tuples(op, role), min_size=4, max_size=20))
        def check(ops: list[tuple[tuple[str, str, Any], Role]]) -> None:
            async def drive() -> None:
                async with AsyncExitStack() as stack:
                    run = HttpRun(server.url, issuer, stack)
                    for (name, caller, arg), who in ops:
                        await run.step(ledger, name, caller, arg, who)
                    for key, value in run.stats.items():
                        totals[key] += value

            anyio.run(drive)

        try:
            check()
        finally:
            server.close()
    record("scope_isolation[http-oauth]", examples=HTTP_EXAMPLES, **totals)
    assert totals["in_scope"] and totals["stepup"], totals


def _json(result: dict[str, Any]) -> Any:
    return json.loads(result["texts"][0])


@pytest.mark.parametrize("location", ["jsonl", "sqlite", "postgres"], indirect=True)
def test_no_call_crosses_its_scope(location: str) -> None:
    totals = {"calls": 0, "hidden": 0, "in_scope": 0, "stepup": 0}
    with Ledger(location) as ledger:

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(ops=st.lists(st.tuples(op, role), min_size=4, max_size=30))
        @example(ops=BOTH_PATHS)  # the random examples may miss one path; this one takes both
        def check(ops: list[tuple[tuple[str, str, Any], Role]]) -> None:
            service = MemoryService.build(ledger, require_gateway=False)
            run = Run(service)

            async def drive() -> None:
                for (name, caller, arg), who in ops:
                    await run.step(ledger, name, caller, arg, who)

            try:
                anyio.run(drive)
            finally:
                service.close()
            for key, value in run.stats.items():
                totals[key] += value

        check()
    kind = "postgres" if location.startswith("postgres") else location.rsplit(".", 1)[1]
    record(f"scope_isolation[{kind}]", examples=EXAMPLES, **totals)
    assert totals["hidden"] and totals["in_scope"], totals
