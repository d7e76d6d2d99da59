"""Fuzzing every tool (issue 7, item 4): schema-derived and hostile inputs, three ways in.

Inputs come from each tool's JSON input schema as the server lists it (``tools/list``, turned
into Hypothesis strategies by ``from_schema`` below), mixed with hostile cases: wrong types for
every field, huge strings, deep nesting, invalid and offset-less timestamps, lone surrogates,
NUL bytes, unknown ids, ids of forgotten, retracted and held facts, non-object arguments and
hostile ``_meta``. Each case goes to one of the ten tools (or an unknown one), over:

* **stdio**: ``agent-custody-memory serve`` as a subprocess, raw JSON-RPC lines;
* **HTTP**: ``serve --http`` as a subprocess, raw JSON-RPC POSTs with a gateway token;
* **in-process**: the server's ``MemoryService`` directly (much faster; also reaches inputs no
  JSON parser lets through, such as lone surrogates as Python strings), on JSONL and SQLite.

For every call: the server answers within the timeout and stays up; a refusal is a clear error
(``invalid arguments: <field>: ...``, a ledger message, a gateway-requirement message, or a
JSON-RPC error for a message that is not a valid call) and never an internal error or a
traceback; a refused call, and any read, leaves the ledger's files byte-identical (hashed
before and after each call).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import reprlib
import select
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from .support import (
    STRESS,
    RawMcp,
    ServerProcess,
    digest_files,
    encode_json,
    files_under,
    gateway_meta,
    http_client,
    record,
    scale,
)

GATEWAY_TOKEN = "gw-" + uuid.uuid4().hex
SHORT = reprlib.Repr()  # bounded depth and length: hostile arguments nest 50,000 deep
SHORT.maxlevel, SHORT.maxstring, SHORT.maxother, SHORT.maxlist = 4, 120, 120, 6
READ_ONLY = {"memory.read", "memory.get", "memory.history"}

#: A refusal a caller can act on: the argument checker, the ledger, the gateway rules.
CLEAR = re.compile(
    r"^(invalid arguments: \S.*"
    r"|unknown tool .*"
    r"|unknown fact .*"
    r"|memory server accepts calls only through the receipts gateway; no receipt id on this call"
    r"|confirmation must come through the receipts gateway; .*"
    r"|evidence needs the gateway: .*"
    r'|no fact named ".*" was fetched by the gateway for this call; .*'
    r'|value differs from what the gateway observed in ".*"; write refused'
    r"|sweep needs `before`, or a server started with retention windows"
    r"|cannot (supersede|retract|confirm|forget|hold|release) unknown fact .*"
    r"|fact .* is (already superseded|retracted|already retracted|already attested"
    r"|already forgotten|already on hold|not on hold|on legal hold; release it first)"
    r"|replacement cannot start before the fact it supersedes"
    r"|a replacement must keep the subject and predicate of the fact it supersedes"
    r"|confidence must be between 0 and 1"
    r"|(subject|predicate|space|actor|reason|fact_id|supersedes|valid_from|before|value) .*"
    r"|\S+: text with a lone surrogate \(.*\) cannot be stored or looked up; pass valid Unicode)$",
    re.S,
)


# -- schema-derived values ----------------------------------------------------------------------

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
ANY_JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
RFC3339 = st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat())


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A strategy for values valid under ``schema`` (the subset the tool schemas use: type,
    properties, required, additionalProperties, minLength, minimum/maximum, date-time).

    Written here because hypothesis-jsonschema 0.23 no longer works with current Hypothesis.
    """
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        fixed = {k: from_schema(v) for k, v in props.items() if k in required}
        optional = {k: from_schema(v) for k, v in props.items() if k not in required}
        base = st.fixed_dictionaries(fixed, optional=optional)
        if schema.get("additionalProperties", True) is not False:
            extra = st.dictionaries(
                st.text(max_size=12).filter(lambda k: k not in props), ANY_JSON, max_size=2
            )
            base = st.tuples(base, extra).map(lambda pair: {**pair[1], **pair[0]})
        return base
    if kind == "string":
        if schema.get("format") == "date-time":
            return RFC3339
        return st.text(min_size=schema.get("minLength", 0), max_size=60)
    if kind == "number":
        return st.floats(
            min_value=schema.get("minimum"),
            max_value=schema.get("maximum"),
            allow_nan=False,
            allow_infinity=False,
        )
    if kind == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if kind == "boolean":
        return st.booleans()
    return ANY_JSON


# -- hostile values ------------------------------------------------------------------------------


def deep(depth: int, kind: str = "list") -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


BAD_TIMES = [
    "2026-09-01T00:00:00",
    "2026-09-01",
    "yesterday",
    "",
    "2026-02-30T00:00:00Z",
    "2026-09-01T25:00:00Z",
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-01:00",
    "2026-09-01T00:00:00+24:00",
    "2026-09-01T00:00:00.123456789Z",
    "2026-09-01T00:00:00 Z",
    "2026-09-01T00:00:00\u0000Z",
    "２０２６-09-01T00:00:00Z",
    "2026-09-01t00:00:00z",
    "+12026-09-01T00:00:00Z",
    "2026-09-01T00:00:60Z",
]

HOSTILE_STRINGS = [
    "",
    " ",
    "\u0000",
    "a\u0000b",
    "\ud800",
    "x\udfffy",
    "\U0001f600" * 1000,
    "é" * 5000,
    "x" * 100_000,
    "\n" * 1000,
    '"\\',
    "null",
    "{}",
    "<script>",
    "../../etc/passwd",
    "%00",
    "\u202e",
    "\ufeff",
    "a" * 1_200_000,
]

HOSTILE_VALUES = [
    None,
    True,
    False,
    0,
    -0.0,
    1e308,
    -1e308,
    10**400,
    -(10**30),
    0.1,
    [],
    {},
    deep(50),
    deep(1000),
    deep(5000, "dict"),
    deep(50_000),
    {"": ""},
    {"\u0000": 1},
    [None] * 10_000,
    {"k" * 10_000: "v"},
    float("nan"),
    float("inf"),
]


class Ids:
    """Fact ids in every state, refreshed as the fuzzer changes the ledger."""

    def __init__(self) -> None:
        self.by_state: dict[str, list[str]] = {}

    def all(self) -> list[str]:
        return [i for ids in self.by_state.values() for i in ids] or [str(uuid.uuid4())]


def hostile_case(
    rng: random.Random, tools: dict[str, dict[str, Any]], ids: Ids, in_process: bool
) -> tuple[str, Any, Any]:
    """One hostile call: (tool, arguments, _meta)."""
    name = (
        rng.choice([*tools, "memory.nope", "", "memory.write\u0000"])
        if rng.random() < 0.03
        else rng.choice(list(tools))
    )
    schema = tools.get(name, {"properties": {}})
    props = list(schema.get("properties", {}))
    required = schema.get("required", [])
    base: dict[str, Any] = {
        "subject": f"s-{rng.randrange(50)}",
        "predicate": "p",
        "value": "v",
        "space": "org",
        "reason": "fuzz",
        "factId": rng.choice(ids.all()),
    }
    args: Any = {k: base.get(k, "x") for k in required}
    field = rng.choice(props) if props else "factId"
    roll = rng.randrange(12)
    if roll == 0:
        args = rng.choice([None, [], "args", 42, [{"factId": "x"}], True])
    elif roll == 1:
        args[field] = rng.choice(HOSTILE_VALUES)
    elif roll == 2:
        text = rng.choice(HOSTILE_STRINGS)
        if not in_process and len(text) > 1_000_000:
            text = text[:900_000]  # under the transport limit: the argument checks, not 413
        args[field] = text
    elif roll == 3:
        for key in ("validFrom", "validAt", "txAt", "before"):
            if key in props:
                args[key] = rng.choice(BAD_TIMES)
    elif roll == 4:
        args["factId"] = rng.choice(
            [
                str(uuid.uuid4()),
                "",
                "x" * 5000,
                "\u0000",
                str(uuid.uuid4()).upper(),
                " " + ids.all()[0],
            ]
        )
        if "supersedes" in props:
            args["supersedes"] = args["factId"]
    elif roll == 5:
        state = rng.choice(list(ids.by_state) or ["none"])
        chosen = rng.choice(ids.by_state.get(state, [str(uuid.uuid4())]))
        args["factId"] = chosen
        if name == "memory.write":
            args.update(supersedes=chosen, subject=f"s-{rng.randrange(50)}")
    elif roll == 6 and required:
        args.pop(rng.choice(required), None)
    elif roll == 7 and name == "memory.write":
        args["evidence"] = rng.choice(
            [
                {"fact": "crm"},
                {"fact": "crm", "path": "a.0.b"},
                {"fact": ""},
                "crm",
                {"path": "x"},
                {"fact": None},
            ]
        )
        args["value"] = rng.choice([{"a": [{"b": 1}]}, 1, "x"])
    elif roll == 8:
        args["confidence"] = rng.choice([-0.1, 1.0000001, "0.5", None, True, 10**400, -0.0])
    elif roll == 9:
        args[rng.choice(["extra", "__proto__", "constructor", "\u0000"])] = deep(20, "dict")
    elif roll == 10:
        for key in props:
            args[key] = rng.choice([1, [], {}, None, True, 2.5])  # every field the wrong type
    else:
        args.update({k: rng.choice(HOSTILE_STRINGS[:12]) for k in required if k != "factId"})
    meta: Any = gateway_meta()
    if rng.random() < 0.15:
        meta = rng.choice(
            [
                None,
                {},
                {"agent-custody/receipt": 5, "agent-custody/agent": ["x"]},
                {"agent-custody/receipt": "", "agent-custody/agent": ""},
                {**gateway_meta(), "agent-custody/observed": "not an object"},
                {**gateway_meta(), "agent-custody/observed": {"crm": {"a": [{"b": 1}]}}},
                {"agent-custody/receipt": "r" * 10_000, "agent-custody/agent": "\u0000"},
            ]
        )
    return name, args, meta


def clear_refusal(texts: list[str]) -> bool:
    text = texts[0] if texts else ""
    return bool(CLEAR.match(text)) and "Traceback" not in text and "internal error" not in text


# -- the harness -----------------------------------------------------------------------------------


class Harness:
    """Counts, checks and file hashing shared by the three ways in."""

    def __init__(self, ledger_dir: Path, transport: str) -> None:
        self.dir = ledger_dir
        self.transport = transport
        self.calls = 0
        self.outcomes: Counter[str] = Counter()
        self.hostile = 0
        self.digest = self.snapshot()

    def snapshot(self) -> str:
        # SQLite's -shm is shared memory (read marks change on every read), not ledger data.
        return digest_files([p for p in files_under(self.dir) if not p.name.endswith("-shm")])

    def judge(self, tool: str, args: Any, outcome: dict[str, Any]) -> None:
        self.calls += 1
        where = f"{self.transport} {tool} {SHORT.repr(args)}"
        after = self.snapshot()
        if "rpcError" in outcome:
            error = outcome["rpcError"]
            assert isinstance(error, dict) and error.get("message"), f"{where}: {outcome}"
            assert "Traceback" not in json.dumps(error), f"{where}: {error}"
            self.outcomes["jsonrpc_error"] += 1
            refused = True
        elif "httpStatus" in outcome:
            assert outcome["httpStatus"] in (400, 413), f"{where}: {outcome}"
            self.outcomes[f"http_{outcome['httpStatus']}"] += 1
            refused = True
        elif outcome["isError"]:
            assert clear_refusal(outcome["texts"]), f"{where}: unclear refusal {outcome['texts']}"
            self.outcomes["refused"] += 1
            refused = True
        else:
            for text in outcome["texts"]:
                json.loads(text)
            self.outcomes["ok"] += 1
            refused = False
        if refused or tool in READ_ONLY:
            assert after == self.digest, f"{where}: a refused call or a read changed the files"
        self.digest = after


def seed_ledger(call: Callable[[str, Any, Any], dict[str, Any]], ids: Ids) -> None:
    """Facts in every state for the id-based hostile cases."""

    def write(subject: str, value: Any, **extra: Any) -> str:
        out = call(
            "memory.write",
            {"subject": subject, "predicate": "p", "value": value, "space": "org", **extra},
            gateway_meta(),
        )
        assert not out.get("isError"), out
        return str(json.loads(out["texts"][0])["fact"]["factId"])

    states: dict[str, list[str]] = {
        k: [] for k in ("current", "superseded", "retracted", "forgotten", "held", "claimed")
    }
    for i in range(6):
        a = write(f"seed-{i}", f"a{i}")
        b = write(f"seed-{i}", f"b{i}", supersedes=a)
        states["superseded"].append(a)
        states["current"].append(b)
        c = write(f"gone-{i}", f"c{i}")
        call("memory.retract", {"factId": c, "reason": "seed"}, gateway_meta())
        states["retracted"].append(c)
        d = write(f"erased-{i}", {"secret": i})
        call("memory.forget", {"factId": d, "reason": "seed"}, gateway_meta())
        states["forgotten"].append(d)
        e = write(f"held-{i}", i)
        call("memory.hold", {"factId": e, "reason": "seed"}, gateway_meta())
        states["held"].append(e)
        f = call(
            "memory.write",
            {"subject": f"claimed-{i}", "predicate": "p", "value": i, "space": "org"},
            {"agent-custody/receipt": "r"},
        )
        states["claimed"].append(json.loads(f["texts"][0])["fact"]["factId"])
    ids.by_state = states


def fuzz(
    n: int,
    tools: dict[str, dict[str, Any]],
    call: Callable[[str, Any, Any], Any],
    harness: Harness,
    ids: Ids,
    *,
    in_process: bool,
    seed: int,
) -> None:
    """``n`` calls: about half derived from the schemas by Hypothesis, half hostile."""
    schema_strategies = {name: from_schema(schema) for name, schema in tools.items()}
    id_strategy = st.sampled_from(ids.all())

    def patch_ids(args: Any, data: st.DataObject) -> Any:
        # Schema-valid ids are random strings; half the time use real ones, so calls get past
        # "unknown fact" into the rules.
        if isinstance(args, dict) and data.draw(st.booleans()):
            for key in ("factId", "supersedes"):
                if key in args:
                    args[key] = data.draw(id_strategy)
        return args

    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @hypothesis.seed(int(os.environ.get("AGENT_CUSTODY_SEED", "7")) * 1000 + seed)
    @given(data=st.data())
    def one(data: st.DataObject) -> None:
        # Every choice is drawn through Hypothesis (a hostile case from a drawn seed), so its
        # view of each example stays consistent.
        if data.draw(st.booleans()):
            name = data.draw(st.sampled_from(list(tools)))
            args = patch_ids(data.draw(schema_strategies[name]), data)
            meta: Any = gateway_meta()
        else:
            case_rng = random.Random(data.draw(st.integers(0, 2**32)) ^ seed)
            name, args, meta = hostile_case(case_rng, tools, ids, in_process)
            harness.hostile += 1
        harness.judge(name, args, call(name, args, meta))

    one()
    if in_process or STRESS:
        hostile_matrix(tools, call, harness, ids, in_process=in_process)


def hostile_matrix(
    tools: dict[str, dict[str, Any]],
    call: Callable[[str, Any, Any], Any],
    harness: Harness,
    ids: Ids,
    *,
    in_process: bool,
) -> None:
    """Every hostile value in every field of every tool, once (the random part may miss one)."""
    base = {
        "subject": "s-matrix",
        "predicate": "p",
        "value": "v",
        "space": "org",
        "reason": "matrix",
        "factId": ids.all()[0],
    }
    values: list[Any] = [*HOSTILE_VALUES, *HOSTILE_STRINGS, *BAD_TIMES]
    for name, schema in tools.items():
        required = {k: base.get(k, "x") for k in schema.get("required", [])}
        for field in schema.get("properties", {}):
            for value in values:
                if not STRESS and isinstance(value, str) and len(value) > 10_000:
                    continue  # the huge ones cost most of the time: long run only
                if not in_process and isinstance(value, str) and len(value) > 1_000_000:
                    value = value[:900_000]  # under the transport limit
                args = {**required, field: value}
                harness.hostile += 1
                harness.judge(name, args, call(name, args, gateway_meta()))


# -- the three ways in ---------------------------------------------------------------------------

#: Messages that are not calls at all: not JSON, not JSON-RPC, a lone surrogate, 50,000 deep.
RAW_MESSAGES = (
    b"not json",
    b"[]",
    b'{"jsonrpc":"2.0","id":9}',
    b"\xff\xfe",
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"memory.get",'
    b'"arguments":{"factId":"\\ud800"}}}',
    b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":'
    + b"[" * 50_000
    + b"]" * 50_000
    + b"}",
)


class StdioClient:
    """Raw JSON-RPC lines to ``serve`` over stdio."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.next_id = 1
        self.last: Any = None
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "fuzz", "version": "0"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: Any, raw: bytes | None = None) -> None:
        stdin = self.server.proc.stdin
        assert stdin is not None
        try:
            stdin.write(raw if raw is not None else encode_json(message) + b"\n")
            stdin.flush()
        except BrokenPipeError:
            self.server.proc.wait(10)
            raise AssertionError(
                f"the stdio server died (exit {self.server.proc.returncode}) after the previous "
                f"call {SHORT.repr(self.last)}:\n{self.server.stderr[-4000:]}"
            ) from None
        self.last = message

    def receive(self, timeout: float = 60) -> dict[str, Any]:
        stdout = self.server.proc.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], timeout)
        assert ready, (
            f"the stdio server did not answer within {timeout}s (hung) to "
            f"{SHORT.repr(self.last)}:\n{self.server.stderr[-3000:]}"
        )
        line = stdout.readline()
        assert line, f"the stdio server exited:\n{self.server.stderr[-3000:]}"
        reply: dict[str, Any] = json.loads(line)
        return reply

    def request(self, method: str, params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            reply = self.receive()
            # One request is in flight at a time, so an error with id null (JSON-RPC's answer
            # when the id cannot be read) is this request's answer too.
            if reply.get("id") == self.next_id or (reply.get("id") is None and "error" in reply):
                return reply

    def call(self, name: str, args: Any, meta: Any) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name, "arguments": args}
        if meta is not None:
            params["_meta"] = meta
        reply = self.request("tools/call", params)
        if "error" in reply:
            return {"rpcError": reply["error"]}
        result = reply["result"]
        return {
            "isError": bool(result.get("isError")),
            "texts": [c.get("text", "") for c in result.get("content", [])],
        }


def list_tools(reply: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t["inputSchema"] for t in reply["result"]["tools"]}


def test_fuzz_stdio(tmp_path: Path) -> None:
    n = scale(300, 10_000)
    ledger_dir = tmp_path / "ledger"
    ledger_dir.mkdir()
    server = ServerProcess(["--ledger", str(ledger_dir / "fuzz.jsonl")], http=False)
    try:
        client = StdioClient(server)
        tools = list_tools(client.request("tools/list", {}))
        assert len(tools) == 10
        ids = Ids()
        seed_ledger(client.call, ids)
        harness = Harness(ledger_dir, "stdio")
        fuzz(n, tools, client.call, harness, ids, in_process=False, seed=1)
        # Messages that are not calls at all: not JSON, not JSON-RPC, over the size limit.
        for raw in RAW_MESSAGES:
            client.send(None, raw + b"\n")
            reply = client.receive()
            assert "error" in reply and reply["error"]["message"], reply
            harness.outcomes["jsonrpc_error"] += 1
            harness.calls += 1
        assert list_tools(client.request("tools/list", {})) == tools  # still serving
        assert server.alive()
    finally:
        code = server.stop()
    assert "Traceback" not in server.stderr, server.stderr[-3000:]
    assert "internal error" not in server.stderr
    record(
        "fuzz[stdio]",
        calls=harness.calls,
        hostile=harness.hostile,
        outcomes=dict(harness.outcomes),
        crashes=0,
        hangs=0,
        refused_calls_changing_files=0,
        exit_code=code,
    )


def test_fuzz_http(tmp_path: Path) -> None:
    n = scale(300, 10_000)
    ledger_dir = tmp_path / "ledger"
    ledger_dir.mkdir()
    server = ServerProcess(
        ["--ledger", str(ledger_dir / "fuzz.jsonl"), "--token-env", "FUZZ_GW_TOKEN"],
        {"FUZZ_GW_TOKEN": GATEWAY_TOKEN},
    )
    loop = asyncio.new_event_loop()
    try:
        http = http_client()
        mcp = loop.run_until_complete(RawMcp(http, server.url, GATEWAY_TOKEN).open())
        tools = list_tools(loop.run_until_complete(mcp.rpc("tools/list")))
        assert len(tools) == 10

        def call(name: str, args: Any, meta: Any) -> dict[str, Any]:
            return loop.run_until_complete(mcp.call(name, args, meta))

        ids = Ids()
        seed_ledger(call, ids)
        harness = Harness(ledger_dir, "http")
        fuzz(n, tools, call, harness, ids, in_process=False, seed=2)
        for raw in RAW_MESSAGES:
            response = loop.run_until_complete(mcp.post(raw))
            assert response.status_code in (200, 400), response.text
            assert "Traceback" not in response.text
            harness.outcomes[f"raw_{response.status_code}"] += 1
            harness.calls += 1
        assert list_tools(loop.run_until_complete(mcp.rpc("tools/list"))) == tools
        loop.run_until_complete(http.aclose())
        assert server.alive()
    finally:
        loop.close()
        server.stop()
    assert "Traceback" not in server.stderr, server.stderr[-3000:]
    record(
        "fuzz[http]",
        calls=harness.calls,
        hostile=harness.hostile,
        outcomes=dict(harness.outcomes),
        crashes=0,
        hangs=0,
        refused_calls_changing_files=0,
    )


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_fuzz_in_process(tmp_path: Path, backend: str) -> None:
    """The same, through the server object: more calls, and inputs no JSON parser passes."""
    from agent_custody_state import Ledger, create_memory_server

    if backend == "sqlite":
        pytest.importorskip("agent_custody_state_events_sqlite", reason="events-sqlite missing")
    n = scale(600, 10_000)
    ledger_dir = tmp_path / "ledger"
    ledger_dir.mkdir()
    ledger = Ledger(ledger_dir / f"fuzz.{backend}")
    server = create_memory_server(ledger)
    service = server.memory
    tools = {
        name: schema
        for name, _desc, schema in __import__(
            "agent_custody_state.server.tools", fromlist=["TOOLS"]
        ).TOOLS
    }
    loop = asyncio.new_event_loop()

    def call(name: str, args: Any, meta: Any) -> dict[str, Any]:
        result = loop.run_until_complete(service.call(name, args, meta, "gateway"))
        return {"isError": result.is_error, "texts": result.texts}

    try:
        ids = Ids()
        seed_ledger(call, ids)
        harness = Harness(ledger_dir, f"in-process/{backend}")
        fuzz(n, tools, call, harness, ids, in_process=True, seed=3 + (backend == "sqlite"))
    finally:
        loop.close()
        service.close()
        ledger.close()
    record(
        f"fuzz[in-process,{backend}]",
        calls=harness.calls,
        hostile=harness.hostile,
        outcomes=dict(harness.outcomes),
        crashes=0,
        refused_calls_changing_files=0,
    )
