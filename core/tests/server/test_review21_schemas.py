"""The tools' schemas against what the server does, property-based (twenty-first review).

Argument objects are drawn from each tool's listed ``inputSchema`` (a small generator written
from the schemas, which use only ``type``, ``properties``, ``required``, ``minLength``,
``maxLength``, ``minimum``/``maximum`` and ``format: date-time``) and sent in process through
the official client (``mcp.Client(server)``) to a server on a plain and on a crypto-shred ledger,
with a write-through store and a signing key, as the gateway or as a direct (quarantined) caller:

1. an object the schema accepts is carried out, or refused with a tool error that is no internal
   error, within seconds, leaving the ledger's files byte-identical;
2. an object the schema rejects (one mutation of an accepted one: a required key dropped, a type
   changed, a string too long or empty, a number out of range) is refused as ``invalid
   arguments: <path>: ...``, changing no byte;
3. every result's ``structuredContent`` validates against the tool's ``outputSchema``, and a
   success's first text item is that JSON.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from servertest import ledger_bytes

from agent_custody_state import Ledger
from agent_custody_state.server.app import create_memory_server
from agent_custody_state.server.tools import TOOL_NAMES
from agent_custody_state.stores import StoreSet
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state_conformance.gateway import AGENT_KEY, RECEIPT_KEY

OBSERVED_KEY = "agent-custody/observed"
#: Well-formed RFC 3339 times, some the server refuses (year 0, a leap second, past 9999 in UTC).
TIMES = (
    "2026-09-01T00:00:00Z",
    "2026-09-01T00:00:00.123456+02:00",
    "1970-01-01T00:00:00z",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999Z",
    "0000-01-01T00:00:00Z",
    "2026-12-31T23:59:60Z",
    "9999-12-31T23:59:59-01:00",
    "2026-02-29T00:00:00Z",
)
PYTHON_NAMES = ("fact_id", "valid_from", "valid_at", "tx_at", "keep_digest")
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass(repr=False)
class Served:
    """One in-process server and its client, called from the test's thread through a portal."""

    portal: BlockingPortal
    client: Client
    folder: Path
    tools: dict[str, types.Tool]
    pool: list[str] = field(default_factory=list)  # fixed once seeded: hypothesis replays draws

    def __repr__(self) -> str:
        return f"Served({self.folder})"

    def call(
        self, tool: str, args: dict[str, Any], meta: dict[str, Any] | None
    ) -> types.CallToolResult:
        async def go() -> types.CallToolResult:
            with anyio.fail_after(20):  # a hang is a failure, not a stuck suite
                return await self.client.call_tool(tool, args, meta=meta)  # type: ignore[arg-type]

        return self.portal.call(go)


@pytest.fixture(scope="module", params=["plain", "crypto-shred"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp(f"schemas-{request.param}")
    options: dict[str, Any] = {}
    if request.param == "crypto-shred":
        options = {
            "forget_mode": "crypto-shred",
            "key_store": str(folder / "ledger.keys"),  # in the folder: byte-checked too
        }
    with Ledger(folder / "ledger.jsonl", **options) as ledger, start_blocking_portal() as portal:
        server = create_memory_server(
            ledger,
            require_gateway=False,
            stores=StoreSet([InProcessStore("mirror")]),
            identity=Ed25519PrivateKey.generate(),
            retention="sweep:*=PT0S",
        )
        client = portal.wrap_async_context_manager(Client(server))
        with client as session:
            tools = {t.name: t for t in portal.call(session.list_tools).tools}
            served = Served(portal, session, folder, tools)
            _seed(served)
            yield served
        server.memory.close()


def _seed(served: Served) -> None:
    """Facts in every state for the generated ids to name: attested, claimed, superseded,
    retracted, forgotten, held."""
    base = {"subject": "acct:1", "predicate": "plan", "space": "org"}

    def write(value: Any, gateway: bool = True, **more: Any) -> str:
        result = served.call("memory.write", {**base, "value": value, **more}, _meta(gateway))
        assert not result.is_error, result.content
        fact_id: str = result.structured_content["fact"]["factId"]
        served.pool.append(fact_id)
        return fact_id

    first = write("pro")
    write("max", supersedes=first)
    write({"tier": [1, 2]}, gateway=False)
    write("sweep me", space="sweep:1")
    for tool, target in (("memory.retract", write(1)), ("memory.forget", write(2))):
        assert not served.call(tool, {"factId": target, "reason": "seed"}, _meta(True)).is_error
    assert not served.call(
        "memory.hold", {"factId": write(3), "reason": "case"}, _meta(True)
    ).is_error


def _meta(gateway: bool, observed: dict[str, Any] | None = None) -> dict[str, Any] | None:
    if not gateway:
        return None
    meta: dict[str, Any] = {RECEIPT_KEY: f"rcpt-{uuid.uuid4()}", AGENT_KEY: "agent"}
    if observed is not None:
        meta[OBSERVED_KEY] = observed
    return meta


# -- a generator from the schemas -------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
_OTHER_TYPE: dict[str, st.SearchStrategy[Any]] = {
    "string": st.integers() | st.booleans() | st.none() | st.lists(st.text(), max_size=2),
    "number": st.text(max_size=4) | st.booleans() | st.none() | st.just([1]),
    "boolean": st.integers(0, 1) | st.text(max_size=4) | st.none() | st.just({}),
    "object": st.text(max_size=4) | st.integers() | st.none() | st.lists(st.integers(), max_size=2),
}


def _string(schema: dict[str, Any], pool: list[str]) -> st.SearchStrategy[Any]:
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    if schema.get("format") == "date-time":
        return st.sampled_from(TIMES)
    bounded = st.text(min_size=low, max_size=24)
    edges = [st.just("x" * high)] if high is not None else []
    picked = st.sampled_from([*pool, "org", "sweep:1", "*", "\ud800", "a\x00b"])
    return st.one_of(picked, bounded, *edges).filter(lambda s: len(s) >= low)


def accepted_value(schema: dict[str, Any], pool: list[str]) -> st.SearchStrategy[Any]:
    kind = schema.get("type")
    if kind is None:
        return JSON_VALUES
    if kind == "string":
        return _string(schema, pool)
    if kind == "boolean":
        return st.booleans()
    if kind == "number":
        low, high = schema.get("minimum"), schema.get("maximum")
        return st.floats(low, high) | st.integers(int(low or 0), int(high or 10))
    assert kind == "object", schema
    return accepted_object(schema, pool)


def accepted_object(schema: dict[str, Any], pool: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    fixed = {k: accepted_value(v, pool) for k, v in properties.items() if k in required}
    optional = {k: accepted_value(v, pool) for k, v in properties.items() if k not in required}
    shaped = st.fixed_dictionaries(fixed, optional=optional)
    if schema.get("additionalProperties", True) is False:
        return shaped
    extra_names = st.text(min_size=1, max_size=8).filter(lambda k: k not in properties)
    extras = st.dictionaries(extra_names, JSON_VALUES, max_size=2)
    return st.builds(lambda a, b: {**b, **a}, shaped, extras)


def _mutations(
    schema: dict[str, Any], prefix: tuple[str, ...] = ()
) -> list[tuple[str, tuple[str, ...], dict[str, Any]]]:
    """Every (mutation, field path, field schema) that makes an object of ``schema`` invalid,
    nested objects included (``evidence.fact``)."""
    props: dict[str, Any] = schema.get("properties", {})
    found = [("drop", (*prefix, name), props[name]) for name in schema.get("required", ())]
    for name, sub in props.items():
        path = (*prefix, name)
        found += [("type", path, sub)] if sub.get("type") is not None else []
        found += [("long", path, sub)] if "maxLength" in sub else []
        found += [("empty", path, sub)] if sub.get("minLength") else []
        found += [("range", path, sub)] if "maximum" in sub else []
        if sub.get("type") == "object":
            found += [(how, p, s) for how, p, s in _mutations(sub, path) if how != "drop"]
            found += [("drop", p, s) for how, p, s in _mutations(sub, path) if how == "drop"]
    return found


@st.composite
def rejected(
    draw: st.DrawFn, schema: dict[str, Any], pool: list[str]
) -> tuple[dict[str, Any], str]:
    """An accepted object with one thing made wrong, and the field path the refusal names."""
    args = draw(accepted_object(schema, pool))
    how, path, sub = draw(st.sampled_from(_mutations(schema)))
    holder = args
    for step in path[:-1]:  # a nested field: make sure its object is there
        inner = holder.get(step)
        holder[step] = inner = dict(inner) if isinstance(inner, dict) else {}
        holder = inner
    for name, value in draw(accepted_object(_parent(schema, path), pool)).items():
        holder.setdefault(name, value)
    name = path[-1]
    if how == "drop":
        holder.pop(name, None)
    elif how == "type":
        holder[name] = draw(_OTHER_TYPE[sub["type"]])
    elif how == "long":
        holder[name] = "y" * (sub["maxLength"] + draw(st.integers(1, 3)))
    elif how == "empty":
        holder[name] = ""
    else:
        holder[name] = draw(
            st.sampled_from([sub["maximum"] + 1e-9, sub["minimum"] - 0.5, 2**64, -(2**64)])
        )
    assert not jsonschema.Draft202012Validator(schema).is_valid(args), (how, path, args)
    return args, ".".join(path)


def _parent(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for step in path[:-1]:
        schema = schema["properties"][step]
    return schema


# -- the checks -------------------------------------------------------------------------------


def _as_text(structured: dict[str, Any]) -> dict[str, Any]:
    """The structured content less what it adds to the original's first text item: a read's
    ``hiddenClaimed`` and the certificates asked for (``shapes.with_certificates``)."""
    shown = {k: v for k, v in structured.items() if k not in ("hiddenClaimed", "certificate")}
    if isinstance(shown.get("forgotten"), list):
        shown["forgotten"] = [
            {k: v for k, v in item.items() if k != "certificate"} for item in shown["forgotten"]
        ]
    return shown


def check_result(served: Served, tool: str, result: types.CallToolResult) -> list[str]:
    """Property 3 for any result, and no internal error; returns the text items."""
    schema = served.tools[tool].output_schema
    assert schema is not None
    jsonschema.validate(result.structured_content, schema)
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    assert texts and all(texts), result
    assert "internal error" not in texts[0] and "Traceback" not in texts[0], texts
    # a refusal names an argument as the caller sent it, not as the ledger's Python API does
    assert not any(name in texts[0] for name in PYTHON_NAMES), texts
    structured = result.structured_content
    assert structured is not None
    if not result.is_error:
        assert json.loads(texts[0]) == _as_text(structured)
    return texts


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _send(
    served: Served, data: st.DataObject, tool: str, args: dict[str, Any], gateway: bool
) -> tuple[types.CallToolResult, bool]:
    observed = None
    if gateway and isinstance(args.get("evidence"), dict):
        fact = args["evidence"].get("fact")
        # (the client cannot send a lone surrogate as a key of _meta: the test's limit, not
        # the server's)
        if isinstance(fact, str) and _encodable(fact) and data.draw(st.booleans()):
            observed = {
                fact: args.get("value") if data.draw(st.booleans()) else data.draw(JSON_VALUES)
            }
    before = ledger_bytes(served.folder)
    result = served.call(tool, args, _meta(gateway, observed))
    same = ledger_bytes(served.folder) == before
    return result, same


@pytest.mark.parametrize("tool", TOOL_NAMES)
@SETTINGS
@given(data=st.data())
def test_what_the_schema_accepts_is_done_or_refused_cleanly(
    served: Served, tool: str, data: st.DataObject
) -> None:
    schema = served.tools[tool].input_schema
    args = data.draw(accepted_object(schema, served.pool), label="arguments")
    jsonschema.validate(args, schema)
    result, same = _send(
        served, data, tool, args, gateway=data.draw(st.booleans(), label="gateway")
    )
    texts = check_result(served, tool, result)
    if result.is_error and len(texts) == 1:  # a refusal (not a half-done removal)
        assert same, f"{tool} refused ({texts[0]}) but the ledger changed"


@pytest.mark.parametrize("tool", TOOL_NAMES)
@SETTINGS
@given(data=st.data())
def test_what_the_schema_rejects_is_refused(served: Served, tool: str, data: st.DataObject) -> None:
    schema = served.tools[tool].input_schema
    args, path = data.draw(rejected(schema, served.pool), label="arguments")
    result, same = _send(served, data, tool, args, gateway=True)
    texts = check_result(served, tool, result)
    assert result.is_error, f"{tool} accepted {args!r}, which its inputSchema rejects: {texts}"
    assert same, f"{tool} refused ({texts[0]}) but the ledger changed"
    assert texts[0].startswith("invalid arguments: "), texts
    assert f" {path}: " in texts[0], (path, texts)
