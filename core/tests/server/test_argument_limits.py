"""What ``memory.write`` and the other tools refuse as ``invalid arguments``, over real stdio.

A value nested deeper than the results can carry to the official clients, ``NaN`` where a
number is checked against a range, evidence paths with non-ASCII digits, and text arguments
over their size limits: each is refused by name, nothing is written, and what was accepted
reads back through the official client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from servertest import ledger_bytes, unique, write

from agent_custody_state.server.limits import DEFAULT_MAX_VALUE_DEPTH
from agent_custody_state.server.trust import AGENT_KEY, RECEIPT_KEY, call_context
from agent_custody_state_conformance.gateway import GatewayClient

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def gw(module_dir: Path) -> AsyncIterator[GatewayClient]:
    """A gateway-only stdio server on a ledger of its own folder (to compare its bytes)."""
    folder = module_dir / "limits"
    folder.mkdir()
    async with GatewayClient.stdio("serve", "--ledger", str(folder / "l.jsonl")) as client:
        yield client


def nested(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


async def refused(gw: GatewayClient, tool: str, args: dict[str, Any], module_dir: Path) -> str:
    """Call ``tool``; assert an error result that left the ledger's files untouched."""
    before = ledger_bytes(module_dir / "limits")
    result = await gw.call(tool, args)
    assert result.is_error, result.texts
    assert ledger_bytes(module_dir / "limits") == before
    return result.text


async def test_a_value_too_deep_for_the_results_is_refused_at_write(
    gw: GatewayClient, module_dir: Path
) -> None:
    base = {"subject": unique("deep"), "predicate": "p", "space": "org"}
    for levels in (DEFAULT_MAX_VALUE_DEPTH + 1, 196):
        text = await refused(gw, "memory.write", {**base, "value": nested(levels)}, module_dir)
        assert text.startswith("invalid arguments: value: nested too deeply: more than 128 "), text
    deepest = {"a": nested(DEFAULT_MAX_VALUE_DEPTH - 1)}
    fact = (await write(gw, **base, value=deepest))["fact"]
    # every result that carries the deepest accepted value parses in the official client
    read = await gw.call("memory.read", {"subject": base["subject"]})
    assert read.data["facts"][0]["value"] == deepest
    history = await gw.call("memory.history", {"factId": fact["factId"]})
    assert history.data["events"][0]["fact"]["value"] == deepest
    assert (await gw.call("memory.get", {"factId": fact["factId"]})).data["value"] == deepest
    assert not (await gw.call("memory.read", {})).is_error


async def test_evidence_array_indexes_are_ascii_digits(gw: GatewayClient, module_dir: Path) -> None:
    base = {"subject": unique("ev"), "predicate": "seats", "space": "org", "value": 20}
    observed = {"crm": {"seats": [10, 20]}}
    for path in ("seats.²", "seats.١"):  # int() refuses the first and reads the second as 1
        before = ledger_bytes(module_dir / "limits")
        result = await gw.call(
            "memory.write", {**base, "evidence": {"fact": "crm", "path": path}}, observed=observed
        )
        assert result.is_error and result.text == (
            f"invalid arguments: evidence.path: {path.split('.')[1]!r} indexes an array: write "
            "the index in ASCII digits"
        ), result.text
        assert ledger_bytes(module_dir / "limits") == before
    verified = await gw.call(
        "memory.write", {**base, "evidence": {"fact": "crm", "path": "seats.1"}}, observed=observed
    )
    assert verified.data["fact"]["provenance"] == "verified"


async def test_text_arguments_are_bounded(gw: GatewayClient, module_dir: Path) -> None:
    base = {"subject": unique("t"), "predicate": "p", "space": "org", "value": 1}
    for field in ("subject", "predicate", "space", "actor", "supersedes"):
        text = await refused(gw, "memory.write", {**base, field: "x" * 3_000_000}, module_dir)
        assert text == (
            f"invalid arguments: {field}: too long: 3000000 characters; the limit is 4096"
        ), text
    fact_id = (await write(gw, **{**base, "subject": "s" * 2048}))["fact"]["factId"]
    for tool, args, field, limit in (
        ("memory.retract", {"factId": fact_id, "reason": "r" * 65_537}, "reason", 65_536),
        ("memory.hold", {"factId": "f" * 4097, "reason": "case"}, "factId", 4096),
        ("memory.read", {"subject": "s" * 4097}, "subject", 4096),
    ):
        text = await refused(gw, tool, args, module_dir)
        assert text.startswith(f"invalid arguments: {field}: too long: "), text
        assert text.endswith(f"the limit is {limit}"), text
    held = await gw.call("memory.hold", {"factId": fact_id, "reason": "r" * 65_536})
    assert not held.is_error, held.texts


async def test_a_gateway_receipt_or_agent_no_ledger_should_hold_counts_as_absent(
    gw: GatewayClient, module_dir: Path
) -> None:
    """A receipt id or agent in ``_meta`` longer than a text argument may be, or holding a lone
    surrogate, is malformed, as a non-string is: it would land in every event the call writes.
    Without a believed receipt this gateway-only server refuses the call, and writes nothing."""
    args = {"subject": unique("m"), "predicate": "p", "space": "org", "value": 1}
    before = ledger_bytes(module_dir / "limits")
    result = await gw.call("memory.write", args, receipt="r" * 4097)
    assert result.is_error and "no receipt id on this call" in result.text, result.texts
    assert ledger_bytes(module_dir / "limits") == before
    # The official client cannot send a lone surrogate; the server's reading of one:
    meta = {RECEIPT_KEY: "rcpt-\ud800", AGENT_KEY: "agent-\udfff"}
    context = call_context(meta, "gateway")
    assert (context.receipt_id, context.gateway_agent) == (None, None)
    written = await gw.call("memory.write", args, receipt="r" * 4096, agent="a" * 4097)
    assert not written.is_error, written.texts
    assert written.data["fact"]["provenance"] == "claimed"  # no attested agent: quarantined
