"""Inputs for the tool fuzzer (tests/reliability/test_fuzz_tools.py): values valid under a
tool's JSON input schema (``from_schema``), hostile values and whole hostile calls
(``hostile_case``), the fact ids in every state they aim at (``Ids``), and what counts as a clear
refusal (``clear_refusal``).
"""

from __future__ import annotations

import random
import re
import uuid
from typing import Any

from hypothesis import strategies as st

from .mcpkit import gateway_meta

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
    r"|(an erasure certificate is|erasure certificates are) signed with the server's key, "
    r"and this server has none: .*"
    r"|cannot (supersede|retract|confirm|forget|hold|release) unknown fact .*"
    r"|fact .* is (already superseded|retracted|already retracted|already attested"
    r"|already forgotten|already on hold|not on hold|on legal hold; release it first)"
    r"|replacement cannot start before the fact it supersedes"
    r"|a replacement must keep the subject and predicate of the fact it supersedes"
    r"|confidence must be between 0 and 1"
    # A value JSON cannot keep exactly (I-JSON), named by its place: "value.seats[1]: NaN is ...".
    r"|value\S*: (.* is outside the integers JSON keeps exactly \(.*\); send it as a string"
    r"|NaN is not JSON|-?Infinity is not JSON)"
    # The tools name an argument as sent (factId); the Python API by its parameter (fact_id).
    r"|(subject|predicate|space|actor|reason|fact_id|factId|supersedes|valid_from|validFrom"
    r"|validAt|txAt|before|value) .*"
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
