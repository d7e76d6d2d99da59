"""The listed input schemas say how long a string argument may be, and a refusal names the
argument as sent (twenty-first review).

The server refuses a string argument over 4,096 characters (``validation.MAX_TEXT``; a reason may
hold 65,536), but ``tools/list`` advertised no ``maxLength`` for any of them but ``reason``: a
client checking arguments against the schema sent what the server then refused. Each string
field of each tool, at its limit and one past it, must get the same verdict from both. The
ledger's own refusal of a too-long id named its Python parameter ``fact_id``; the tool's
argument is ``factId``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client
from servertest import ledger_bytes

from agent_custody_state import Ledger
from agent_custody_state.server.app import create_memory_server, tool_list
from agent_custody_state.server.tools import SCHEMAS
from agent_custody_state.server.validation import ArgumentErrors, validate_arguments
from agent_custody_state_conformance.gateway import AGENT_KEY, RECEIPT_KEY

LISTED = {tool.name: tool.input_schema for tool in tool_list(has_stores=False).tools}
#: A valid value per field name, so one field at a time can be made long.
VALID: dict[str, Any] = {
    "subject": "s",
    "predicate": "p",
    "value": 1,
    "space": "org",
    "factId": "f",
    "reason": "r",
    "evidence": {"fact": "lookup"},
}


def _string_fields(
    schema: dict[str, Any], prefix: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    for name, sub in schema.get("properties", {}).items():
        if sub.get("type") == "string" and sub.get("format") != "date-time":
            yield (*prefix, name)
        if sub.get("type") == "object":
            yield from _string_fields(sub, (*prefix, name))


def _with(tool: str, path: tuple[str, ...], text: str) -> dict[str, Any]:
    schema = LISTED[tool]
    args = {name: VALID[name] for name in schema.get("required", ())}
    holder = args
    for step in path[:-1]:
        holder[step] = holder = dict(VALID[step])
    holder[path[-1]] = text
    return args


CASES = [(tool, path) for tool, schema in LISTED.items() for path in _string_fields(schema)]


@pytest.mark.parametrize(("tool", "path"), CASES, ids=[f"{t}:{'.'.join(p)}" for t, p in CASES])
def test_the_schema_and_the_server_agree_on_a_string_s_length(
    tool: str, path: tuple[str, ...]
) -> None:
    field = LISTED[tool]
    for step in path:
        field = field["properties"][step]
    limit = field.get("maxLength")
    assert isinstance(limit, int), f"{tool} {'.'.join(path)} advertises no maxLength"
    at_limit, past = _with(tool, path, "x" * limit), _with(tool, path, "x" * (limit + 1))
    jsonschema.validate(at_limit, LISTED[tool])
    validate_arguments(SCHEMAS[tool], at_limit)  # the server takes what the schema takes...
    assert not jsonschema.Draft202012Validator(LISTED[tool]).is_valid(past)
    with pytest.raises(ArgumentErrors, match=f"{'.'.join(path)}: too long: {limit + 1} "):
        validate_arguments(SCHEMAS[tool], past)  # ...and refuses what it refuses


@pytest.mark.anyio
@pytest.mark.parametrize(
    "tool", ["memory.confirm", "memory.retract", "memory.forget", "memory.hold", "memory.release"]
)
async def test_a_refused_fact_id_is_named_as_the_tool_argument(tmp_path: Path, tool: str) -> None:
    """An id over the ledger's 2,048 bytes of UTF-8 is refused naming ``factId`` (the argument
    sent), not ``fact_id`` (the ledger's Python parameter), and changes no byte."""
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        server = create_memory_server(ledger, require_gateway=False)
        async with Client(server) as client:
            before = ledger_bytes(tmp_path)
            meta = {RECEIPT_KEY: "rcpt-1", AGENT_KEY: "agent"}
            args = {"factId": "é" * 1100, "reason": "r"}
            result = await client.call_tool(tool, args, meta=meta)  # type: ignore[arg-type]
        server.memory.close()
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert text == "factId is too long: 2200 bytes in UTF-8; the limit is 2048", text
    assert result.structured_content == {"error": text, "code": "invalid_argument"}
    assert ledger_bytes(tmp_path) == before
