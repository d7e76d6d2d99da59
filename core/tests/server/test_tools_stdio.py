"""Every tool over real stdio, called as the gateway calls it: listing, result shapes, argument
errors, reads (the mutations are in ``test_tools_stdio_mutations.py``)."""

from __future__ import annotations

import pytest
from servertest import unique, write

from agent_custody_state_conformance.gateway import FACTS_KEY, GatewayClient

pytestmark = pytest.mark.anyio

TOOLS = [
    "memory.write",
    "memory.read",
    "memory.confirm",
    "memory.retract",
    "memory.forget",
    "memory.hold",
    "memory.release",
    "memory.sweep",
    "memory.get",
    "memory.history",
]


async def test_tools_are_listed_in_spec_order_with_schemas(gw: GatewayClient) -> None:
    tools = (await gw.session.list_tools()).tools
    assert [t.name for t in tools] == TOOLS
    for tool in tools:
        assert tool.description and tool.input_schema["type"] == "object"
    write_schema = tools[0].input_schema
    assert write_schema["required"] == ["subject", "predicate", "value", "space"]


async def test_attested_write_result_shape(gw: GatewayClient) -> None:
    result = await gw.call(
        "memory.write",
        {
            "subject": "acct:1",
            "predicate": "plan",
            "value": {"tier": "pro"},
            "space": "org",
            "confidence": 0.5,
            "lookupKey": "ignored",
        },
    )
    assert not result.is_error and len(result.texts) == 1
    data = result.data
    assert list(data) == ["fact", "eventId", "txTime", "supersedes"]
    fact = data["fact"]
    assert list(fact) == [
        "factId",
        "subject",
        "predicate",
        "value",
        "space",
        "actor",
        "source",
        "provenance",
        "validFrom",
        "validTo",
        "confidence",
    ]
    assert fact["provenance"] == "attested"
    assert fact["actor"] == "support-agent"
    assert fact["source"] == {"receiptId": result.receipt}
    assert fact["validFrom"] == data["txTime"] and data["supersedes"] is None
    assert "lookupKey" not in result.text
    # compact JSON, as JSON.stringify writes it
    assert ": " not in result.text and ", " not in result.text


async def test_gateway_agent_wins_over_actor_argument(gw: GatewayClient) -> None:
    data = await write(gw, actor="someone-else")
    assert data["fact"]["actor"] == "support-agent"


async def test_receipt_without_agent_is_claimed_and_actor_from_argument(gw: GatewayClient) -> None:
    result = await gw.call(
        "memory.write",
        {"subject": unique(), "predicate": "p", "value": 1, "space": "org", "actor": "script"},
        agent=None,
    )
    assert result.data["fact"]["provenance"] == "claimed"
    assert result.data["fact"]["actor"] == "script"
    result = await gw.call(
        "memory.write",
        {"subject": unique(), "predicate": "p", "value": 1, "space": "org"},
        agent=None,
    )
    assert result.data["fact"]["actor"] == "anonymous"


async def test_times_are_normalised_and_offsetless_refused(gw: GatewayClient) -> None:
    data = await write(gw, validFrom="2026-09-01T02:00:00+02:00")
    assert data["fact"]["validFrom"] == "2026-09-01T00:00:00.000Z"
    result = await gw.call(
        "memory.write",
        {
            "subject": "a",
            "predicate": "b",
            "value": 1,
            "space": "org",
            "validFrom": "2026-09-01T00:00:00",
        },
    )
    assert result.is_error
    assert result.text.startswith("invalid arguments: validFrom: ")
    assert "offset" in result.text
    result = await gw.call("memory.read", {"validAt": "yesterday", "txAt": "2026-01-01"})
    assert result.text.startswith("invalid arguments: validAt: ")
    assert "; txAt: " in result.text


async def test_argument_errors_name_every_field(gw: GatewayClient) -> None:
    result = await gw.call(
        "memory.write",
        {"subject": "", "predicate": 3, "space": "org", "confidence": 1.5, "evidence": {"path": 1}},
    )
    assert result.is_error
    assert result.text == (
        "invalid arguments: subject: must not be empty; predicate: expected a string, got number; "
        "value: required; confidence: must be between 0 and 1; evidence.fact: required; "
        "evidence.path: expected a string, got number"
    )
    result = await gw.call("memory.read", {"includeClaimed": "yes"})
    assert result.text == "invalid arguments: includeClaimed: expected a boolean, got string"
    for tool in ("memory.confirm", "memory.get", "memory.history"):
        assert (await gw.call(tool, {})).text == "invalid arguments: factId: required"
    for tool in ("memory.retract", "memory.forget", "memory.hold", "memory.release"):
        result = await gw.call(tool, {"factId": 7})
        assert result.text == (
            "invalid arguments: factId: expected a string, got number; reason: required"
        )
    assert (await gw.call("memory.sweep", {})).text == "invalid arguments: reason: required"
    result = await gw.call("memory.forget", {"factId": "x", "reason": "r", "keepDigest": "no"})
    assert result.text == "invalid arguments: keepDigest: expected a boolean, got string"


async def test_unknown_tool(gw: GatewayClient) -> None:
    result = await gw.call("memory.nope", {})
    assert result.is_error and result.text == "unknown tool memory.nope"


async def test_read_quarantine_and_facts_meta(gw: GatewayClient) -> None:
    subject = unique("acct")
    attested = await write(gw, subject=subject, predicate="plan")
    claimed = await gw.call(
        "memory.write",
        {"subject": subject, "predicate": "region", "value": "eu", "space": "org"},
        agent=None,
    )
    result = await gw.call("memory.read", {"subject": subject})
    ids = [f["factId"] for f in result.data["facts"]]
    assert ids == [attested["fact"]["factId"]]
    assert result.meta[FACTS_KEY] == ids
    result = await gw.call("memory.read", {"subject": subject, "includeClaimed": True})
    assert [f["factId"] for f in result.data["facts"]] == [
        attested["fact"]["factId"],
        claimed.data["fact"]["factId"],
    ]
    assert (await gw.call("memory.read", {"subject": subject, "requireVerified": True})).data == {
        "facts": []
    }


async def test_supersession_and_validity_queries(gw: GatewayClient) -> None:
    subject = unique("acct")
    old = await write(gw, subject=subject, validFrom="2026-01-01T00:00:00Z")
    new = await write(
        gw,
        subject=subject,
        value="enterprise",
        validFrom="2026-06-01T00:00:00Z",
        supersedes=old["fact"]["factId"],
    )
    assert new["supersedes"] == old["fact"]["factId"]
    now = await gw.call("memory.read", {"subject": subject})
    assert [f["value"] for f in now.data["facts"]] == ["enterprise"]
    then = await gw.call("memory.read", {"subject": subject, "validAt": "2026-03-01T00:00:00Z"})
    assert [(f["value"], f["validTo"]) for f in then.data["facts"]] == [
        ("pro", "2026-06-01T00:00:00.000Z")
    ]
    before_any = await gw.call("memory.read", {"subject": subject, "txAt": "2000-01-01T00:00:00Z"})
    assert before_any.data == {"facts": []}
    again = await gw.call(
        "memory.write",
        {
            "subject": subject,
            "predicate": "plan",
            "value": 1,
            "space": "org",
            "supersedes": old["fact"]["factId"],
        },
    )
    assert again.is_error and again.text == f"fact {old['fact']['factId']} is already superseded"
    missing = await gw.call(
        "memory.write",
        {"subject": subject, "predicate": "plan", "value": 1, "space": "org", "supersedes": "nope"},
    )
    assert missing.text == "cannot supersede unknown fact nope"
