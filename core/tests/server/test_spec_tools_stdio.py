"""The SPEC 4 tables of ``test_spec_tools*.py`` over real stdio: the server spawned as the
gateway spawns it, called with the official MCP client (what ``app.py`` adds on the wire)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_spec_tools import FACT_KEYS, SUCCESS, _errors
from test_spec_tools_trust import CONFIRM, GATEWAY_REQUIRED, HOLD, SWEEP

from agent_custody_state_conformance.gateway import GatewayClient

pytestmark = pytest.mark.anyio


async def _fact(gw: GatewayClient, subject: str, **args: Any) -> str:
    base = {"subject": subject, "predicate": "plan", "value": "pro", "space": "org"}
    result = await gw.call("memory.write", {**base, **args})
    assert not result.is_error, result.texts
    assert list(result.data["fact"]) == FACT_KEYS
    return str(result.data["fact"]["factId"])


async def test_tables_over_stdio(tmp_path: Path) -> None:
    ledger = str(tmp_path / "l.jsonl")
    async with GatewayClient.stdio("serve", "--ledger", ledger, agent="agent-a") as gw:
        assert (await gw.session.list_tools()).tools[0].name == "memory.write"
        ids = {"id": await _fact(gw, "acct:err"), "held": await _fact(gw, "acct:held")}
        assert not (await gw.call("memory.hold", {"factId": ids["held"], "reason": "l"})).is_error
        wrong = []
        for tool, args, text in _errors(ids):
            result = await gw.call(tool, args)
            exact = not text.endswith(": ")
            if not (
                result.is_error
                and (result.texts == [text] if exact else result.texts[0].startswith(text))
            ):
                wrong.append((tool, result.texts))
        assert wrong == []
        claimed = str(
            (
                await gw.call(
                    "memory.write",
                    {"subject": "c", "predicate": "p", "value": 1, "space": "org"},
                    agent=None,
                )
            ).data["fact"]["factId"]
        )
        for tool, args, keys in SUCCESS:
            filled = {
                k: v.format(id=await _fact(gw, "acct:keys"), claimed=claimed, subject="acct:keys")
                if isinstance(v, str)
                else v
                for k, v in args.items()
            }
            result = await gw.call(tool, filled)
            assert not result.is_error and len(result.texts) == 1, (tool, result.texts)
            assert list(result.data) == keys, tool
            if tool == "memory.read":
                assert result.meta["agent-custody/facts"] == [
                    f["factId"] for f in result.data["facts"]
                ]
        direct = await gw.direct("memory.read", {})
        assert direct.is_error and direct.texts == [GATEWAY_REQUIRED]
        assert (await gw.call("memory.nope", {})).texts == ["unknown tool memory.nope"]
        assert (await gw.direct("memory.nope", {})).texts == [GATEWAY_REQUIRED]


async def test_quarantine_and_scope_over_stdio(tmp_path: Path) -> None:
    ledger = str(tmp_path / "l.jsonl")
    async with GatewayClient.stdio(
        "serve", "--ledger", ledger, "--allow-direct", agent="agent-a"
    ) as gw:
        org = await _fact(gw, "acct:o")
        mine = await gw.direct(
            "memory.write",
            {"subject": "d", "predicate": "p", "value": 1, "space": "team:a", "actor": "me"},
        )
        assert mine.data["fact"]["provenance"] == "claimed"
        assert mine.data["fact"]["actor"] == "me"
        assert "agent-custody/upstream-signature" not in mine.meta
        refusals = {
            "memory.confirm": ({"factId": mine.data["fact"]["factId"]}, CONFIRM),
            "memory.hold": ({"factId": org, "reason": "r"}, HOLD + "place a hold"),
            "memory.sweep": ({"reason": "r"}, SWEEP),
            "memory.retract": (
                {"factId": org, "reason": "r"},
                f"fact {org} is attested: a direct call (no receipt) may "
                "supersede, retract or forget only claimed facts; this must "
                "come through the receipts gateway",
            ),
        }
        for tool, (args, text) in refusals.items():
            result = await gw.direct(tool, args)
            assert result.is_error and result.texts == [text], tool
        async with GatewayClient.stdio(
            "serve", "--ledger", ledger, "--spaces", "team:*", agent="agent-t"
        ) as team:
            got = await team.call("memory.get", {"factId": org})
            assert got.is_error and got.texts == [f"unknown fact {org}"]
            forget = await team.call("memory.forget", {"factId": org, "reason": "r"})
            assert forget.is_error and forget.texts == [f"cannot forget unknown fact {org}"]
            history = await team.call("memory.history", {"factId": org})
            assert history.data == {"events": []}
            read = await team.call("memory.read", {"includeClaimed": True})
            assert [f["space"] for f in read.data["facts"]] == ["team:a"]
        assert not (await gw.call("memory.get", {"factId": org})).data["retracted"]
