"""A refused call of any tool leaves every file of the ledger byte-identical."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from servertest import ledger_bytes

from agent_custody_state_conformance.gateway import GatewayClient

pytestmark = pytest.mark.anyio

BAD_CALLS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("memory.write", {"predicate": "p", "value": 1, "space": "org"}, {}),
    (
        "memory.write",
        {
            "subject": "s",
            "predicate": "p",
            "value": 1,
            "space": "org",
            "validFrom": "2026-01-01T00:00:00",
        },
        {},
    ),
    (
        "memory.write",
        {"subject": "s", "predicate": "p", "value": 1, "space": "org", "confidence": 2},
        {},
    ),
    ("memory.write", {"subject": "s", "predicate": "p", "value": 1, "space": ""}, {}),
    (
        "memory.write",
        {
            "subject": "s",
            "predicate": "p",
            "value": 1,
            "space": "org",
            "supersedes": "unknown-fact",
        },
        {},
    ),
    (
        "memory.write",
        {"subject": "s", "predicate": "p", "value": 1, "space": "org", "evidence": {"fact": "crm"}},
        {"observed": {"crm": 2}},
    ),
    (
        "memory.write",
        {"subject": "s", "predicate": "p", "value": 1, "space": "org", "evidence": {"fact": "crm"}},
        {"agent": None, "observed": {"crm": 1}},
    ),
    (
        "memory.write",
        {"subject": "s", "predicate": "p", "value": 1, "space": "org"},
        {"receipt": None},
    ),
    ("memory.write", {"subject": "s", "predicate": "p", "value": 10**400, "space": "org"}, {}),
    (
        "memory.write",
        {"subject": "s", "predicate": "p", "value": {"seats": [1, 2**53 + 1]}, "space": "org"},
        {},
    ),
    (
        "memory.write",
        {
            "subject": "s",
            "predicate": "p",
            "value": "v",
            "space": "org",
            "validFrom": "2026-01-01T00:00:00.000Z\n",
        },
        {},
    ),
    ("memory.read", {"validAt": "not a time"}, {}),
    ("memory.confirm", {"factId": "unknown-fact"}, {}),
    ("memory.confirm", {}, {}),
    ("memory.retract", {"factId": "unknown-fact", "reason": "r"}, {}),
    ("memory.retract", {"factId": "F"}, {}),
    ("memory.forget", {"factId": "unknown-fact", "reason": "r"}, {}),
    ("memory.forget", {"factId": "HELD", "reason": "r"}, {}),
    ("memory.forget", {"factId": "F", "reason": "r", "keepDigest": 0}, {}),
    ("memory.hold", {"factId": "HELD", "reason": "again"}, {}),
    ("memory.hold", {"factId": "F", "reason": None}, {}),
    ("memory.release", {"factId": "F", "reason": "not held"}, {}),
    ("memory.sweep", {"reason": "r"}, {}),
    ("memory.sweep", {"reason": "r", "before": "2026-13-01T00:00:00Z"}, {}),
    ("memory.get", {"factId": ""}, {}),
    ("memory.history", {"factId": 1}, {}),
    ("memory.unknown", {}, {}),
]


@pytest.fixture(scope="module")
async def setup(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[GatewayClient, Path, dict[str, str]]]:
    folder = tmp_path_factory.mktemp("untouched")
    async with GatewayClient.stdio("serve", "--ledger", str(folder / "ledger.jsonl")) as gw:
        ids = {}
        for key in ("F", "HELD"):
            result = await gw.call(
                "memory.write",
                {"subject": key, "predicate": "p", "value": {"v": key}, "space": "org"},
            )
            ids[key] = result.data["fact"]["factId"]
        await gw.call("memory.hold", {"factId": ids["HELD"], "reason": "keep"})
        yield gw, folder, ids


@pytest.mark.parametrize(
    ("tool", "args", "call_options"),
    BAD_CALLS,
    ids=[f"{i}-{c[0]}" for i, c in enumerate(BAD_CALLS)],
)
async def test_refused_call_changes_no_byte(
    setup: tuple[GatewayClient, Path, dict[str, str]],
    tool: str,
    args: dict[str, Any],
    call_options: dict[str, Any],
) -> None:
    gw, folder, ids = setup
    args = {k: ids.get(v, v) if isinstance(v, str) else v for k, v in args.items()}
    before = ledger_bytes(folder)
    result = await gw.call(tool, args, **call_options)
    assert result.is_error, result.texts
    assert ledger_bytes(folder) == before


EXACT_REFUSALS = [
    (10**400, "value: an integer of about 401 digits is outside the integers JSON keeps exactly"),
    (
        {"seats": [1, 2**53 + 1]},
        "value.seats[1]: 9007199254740993 is outside the integers JSON keeps exactly",
    ),
    ({"n": -(2**53)}, "value.n: -9007199254740992 is outside the integers JSON keeps exactly"),
]


@pytest.mark.parametrize(("value", "message"), EXACT_REFUSALS)
async def test_a_value_json_cannot_keep_is_refused_by_place(
    setup: tuple[GatewayClient, Path, dict[str, str]], value: Any, message: str
) -> None:
    gw, folder, _ = setup
    before = ledger_bytes(folder)
    result = await gw.call(
        "memory.write", {"subject": "s", "predicate": "p", "value": value, "space": "org"}
    )
    assert result.is_error and message in result.text, result.texts
    assert ledger_bytes(folder) == before


async def test_floats_json_keeps_are_kept_bit_for_bit(
    setup: tuple[GatewayClient, Path, dict[str, str]],
) -> None:
    gw, _, _ = setup
    value = {"max": 1e308, "tiny": 5e-324, "tenth": 0.1, "edge": 2**53 - 1, "neg": -(2**53 - 1)}
    written = await gw.call(
        "memory.write", {"subject": "floats", "predicate": "p", "value": value, "space": "org"}
    )
    assert not written.is_error, written.texts
    got = await gw.call("memory.get", {"factId": written.data["fact"]["factId"]})
    assert got.data["value"] == value
    assert all(type(got.data["value"][k]) is type(v) for k, v in value.items())
