"""Space-scoped tokens never cross their scope (issue 13 section 3), on JSONL, SQLite, PostgreSQL.

Hypothesis draws sequences of tool calls, each from one of several callers with different space
scopes (and as the gateway or a direct caller), against the memory service over a real ledger.
The model is the space of every fact the test wrote. After each call:

* every event the call appended is about a fact in the caller's scope (zero cross-scope changes);
* a read returns only facts in scope, a history only events about facts in scope;
* a call naming a fact outside the scope answers exactly what the same call answers for an id
  that does not exist (the id substituted), and appends nothing: existence does not leak.

Each example works in its own namespace of spaces on one ledger per backend, so the facts of
earlier examples are there too, outside every scope of this one: another check of the same rule.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_custody_state import Ledger
from agent_custody_state.server.scopes import SpaceScope
from agent_custody_state.server.service import MemoryService

from .support import STRESS, record

EXAMPLES = 200 if STRESS else 25
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

op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(sorted(CALLERS)), st.sampled_from(SPACES)),
    st.tuples(st.sampled_from(FACT_TOOLS), st.sampled_from(sorted(CALLERS)), st.integers(0, 1000)),
    st.tuples(
        st.sampled_from(("read", "sweep")),
        st.sampled_from(["a", "teams", "users"]),  # "all" would sweep every example's facts
        st.sampled_from((None, *SPACES)),
    ),
)


@pytest.fixture(params=["jsonl", "sqlite", "postgres"])
def location(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if request.param == "postgres":
        yield request.getfixturevalue("postgres_url")
        return
    yield str(tmp_path_factory.mktemp("scopes") / f"ledger.{request.param}")


class Run:
    """One example: its namespace, the model (fact id -> space) and the service."""

    def __init__(self, service: MemoryService) -> None:
        self.service = service
        self.ns = f"x{uuid.uuid4().hex[:8]}:"
        self.space_of: dict[str, str] = {}
        self.subject = f"{self.ns}subject"
        self.stats = {"calls": 0, "hidden": 0, "in_scope": 0}

    def scope(self, caller: str) -> SpaceScope | None:
        patterns = CALLERS[caller]
        return None if patterns is None else SpaceScope(tuple(self.ns + p for p in patterns))

    async def call(
        self, caller: str, tool: str, args: dict[str, Any], gateway: bool
    ) -> dict[str, Any]:
        meta = {"agent-custody/receipt": f"r-{uuid.uuid4()}", "agent-custody/agent": "agent"}
        result = await self.service.call(
            tool,
            args,
            meta if gateway else None,
            "gateway" if gateway else "direct",
            self.scope(caller),
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

    async def step(self, ledger: Ledger, name: str, caller: str, arg: Any, gateway: bool) -> None:
        scope = self.scope(caller)
        before = ledger.count()
        tool = TOOL.get(name, f"memory.{name}")
        if name == "write":
            space = self.ns + arg
            result = await self.call(
                caller,
                tool,
                {"subject": self.subject, "predicate": "p", "value": 1, "space": space},
                gateway,
            )
            if not result["isError"]:
                fact = _json(result)["fact"]
                self.space_of[fact["factId"]] = fact["space"]
            else:
                assert scope is not None and not scope.allows(space), result
        elif name in ("read", "sweep"):
            args: dict[str, Any] = {"space": self.ns + arg} if arg is not None else {}
            if name == "sweep":
                args.update(reason="r", before="2999-01-01T00:00:00Z")
            result = await self.call(caller, tool, args, gateway)
            if name == "read" and not result["isError"]:
                for fact in _json(result)["facts"]:
                    assert scope is None or scope.allows(fact["space"]), fact
        else:
            if not self.space_of:
                return
            ids = sorted(self.space_of)
            fact_id = ids[arg % len(ids)]
            space = self.ns + OWN_SPACE[caller]  # a supersede must get past the space check
            result = await self.call(caller, tool, self.args(name, fact_id, space), gateway)
            if scope is not None and not scope.allows(self.space_of[fact_id]):
                self.stats["hidden"] += 1
                stranger = str(uuid.uuid4())
                unknown = await self.call(caller, tool, self.args(name, stranger, space), gateway)
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
        for event in itertools.islice(ledger.export(), before, None):
            changed = ledger.get(event.fact_id)
            assert changed is not None and (scope is None or scope.allows(changed.space)), (
                f"{caller} ({scope}) changed a fact in {changed and changed.space} by {name}"
            )


def _json(result: dict[str, Any]) -> Any:
    return json.loads(result["texts"][0])


def test_no_call_crosses_its_scope(location: str) -> None:
    totals = {"calls": 0, "hidden": 0, "in_scope": 0}
    with Ledger(location) as ledger:

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(ops=st.lists(st.tuples(op, st.booleans()), min_size=4, max_size=30))
        def check(ops: list[tuple[tuple[str, str, Any], bool]]) -> None:
            service = MemoryService.build(ledger, require_gateway=False)
            run = Run(service)

            async def drive() -> None:
                for (name, caller, arg), gateway in ops:
                    await run.step(ledger, name, caller, arg, gateway)

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
