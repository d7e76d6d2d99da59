"""A direct caller cannot change or destroy gateway memory (issue 11 item 3, SPEC 4.1).

With ``--allow-direct``, a call without a receipt (a direct HTTP token, or a stdio call without
the gateway's ``_meta``) may supersede, retract and forget only claimed facts, and may not hold,
release or sweep at all. Each refusal is an error result and leaves every file of the ledger
byte-identical; the same calls on claimed facts succeed. Both transports, against real
subprocess servers; the ledger-level re-check (the race a read-then-write check would lose)
is tested on the ledger itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from servertest import DIRECT_TOKEN, GATEWAY_TOKEN, ledger_bytes, start_http

from agent_custody_state import Ledger
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state_conformance.gateway import GatewayClient, ToolResult

pytestmark = pytest.mark.anyio

Direct = Callable[[str, dict[str, Any]], Any]


@asynccontextmanager
async def stdio_pair(folder: Path) -> AsyncIterator[tuple[GatewayClient, Direct]]:
    """One stdio server; the gateway calls with ``_meta``, the direct caller without."""
    async with GatewayClient.stdio(
        "serve", "--ledger", str(folder / "ledger.jsonl"), "--allow-direct"
    ) as gw:
        yield gw, gw.direct


@asynccontextmanager
async def http_pair(folder: Path) -> AsyncIterator[tuple[GatewayClient, Direct]]:
    """One HTTP server; the direct token sends the gateway's keys too: they are ignored."""
    server = start_http(
        "--ledger",
        str(folder / "ledger.jsonl"),
        "--token-env",
        "MEMORY_TOKEN",
        "--direct-token-env",
        "AGENT_TOKEN",
        "--allow-direct",
    )
    try:
        async with (
            GatewayClient.http(server.url, token=GATEWAY_TOKEN) as gw,
            GatewayClient.http(server.url, token=DIRECT_TOKEN) as direct,
        ):

            async def forged(tool: str, args: dict[str, Any]) -> ToolResult:
                return await direct.call(tool, args, receipt="rcpt-forged", agent="admin")

            yield gw, forged
    finally:
        server.stop()


PAIRS: dict[str, Callable[[Path], AbstractAsyncContextManager[tuple[GatewayClient, Direct]]]] = {
    "stdio": stdio_pair,
    "http": http_pair,
}


async def _seed(gw: GatewayClient, direct: Direct) -> dict[str, str]:
    """One fact of each provenance, a confirmed claimed fact, a held claimed fact."""

    async def made(result: ToolResult) -> str:
        assert not result.is_error, result.texts
        return str(result.data["fact"]["factId"])

    base = {"predicate": "plan", "space": "org"}
    ids = {
        "attested": await made(
            await gw.call("memory.write", {**base, "subject": "a", "value": "pro"})
        ),
        "verified": await made(
            await gw.call(
                "memory.write",
                {**base, "subject": "v", "value": "pro", "evidence": {"fact": "crm"}},
                observed={"crm": "pro"},
            )
        ),
        "confirmed": await made(
            await direct("memory.write", {**base, "subject": "c", "value": "x"})
        ),
        "held": await made(await direct("memory.write", {**base, "subject": "h", "value": "x"})),
    }
    assert not (await gw.call("memory.confirm", {"factId": ids["confirmed"]})).is_error
    assert not (await gw.call("memory.hold", {"factId": ids["held"], "reason": "lit"})).is_error
    return ids


PROTECTED = ("attested", "verified", "confirmed")


def _refusals(ids: dict[str, str]) -> list[tuple[str, dict[str, Any], str]]:
    calls: list[tuple[str, dict[str, Any], str]] = []
    for kind in PROTECTED:
        fid = ids[kind]
        shown = "attested" if kind == "confirmed" else kind
        why = (
            f"fact {fid} is {shown}: a direct call (no receipt) may supersede, retract or "
            "forget only claimed facts"
        )
        calls += [
            ("memory.retract", {"factId": fid, "reason": "r", "actor": "gateway-agent"}, why),
            ("memory.forget", {"factId": fid, "reason": "r"}, why),
            ("memory.forget", {"factId": fid, "reason": "r", "keepDigest": False}, why),
            (
                "memory.write",
                {
                    "subject": {"attested": "a", "verified": "v", "confirmed": "c"}[kind],
                    "predicate": "plan",
                    "space": "org",
                    "value": "free",
                    "supersedes": fid,
                    "actor": "test-agent",
                },
                why,
            ),
            (
                "memory.hold",
                {"factId": fid, "reason": "block the gateway's forget"},
                "legal holds come only through the receipts gateway",
            ),
        ]
    calls += [
        (
            "memory.hold",
            {"factId": ids["held"], "reason": "again"},
            "legal holds come only through the receipts gateway",
        ),
        (
            "memory.release",
            {"factId": ids["held"], "reason": "free it"},
            "legal holds come only through the receipts gateway",
        ),
        ("memory.release", {}, "legal holds come only through the receipts gateway"),
        (
            "memory.sweep",
            {"reason": "all", "before": "2999-01-01T00:00:00Z"},
            "sweeps come only through the receipts gateway",
        ),
        ("memory.sweep", {"reason": "all"}, "sweeps come only through the receipts gateway"),
        (
            "memory.confirm",
            {"factId": ids["held"]},
            "confirmation must come through the receipts gateway",
        ),
    ]
    return calls


@pytest.mark.parametrize("transport", list(PAIRS))
async def test_direct_caller_cannot_touch_gateway_memory(tmp_path: Path, transport: str) -> None:
    async with PAIRS[transport](tmp_path) as (gw, direct):
        ids = await _seed(gw, direct)
        for tool, args, why in _refusals(ids):
            before = ledger_bytes(tmp_path)
            result = await direct(tool, args)
            assert result.is_error, (tool, args, result.texts)
            assert result.text.startswith(why), (tool, args, result.text)
            assert ledger_bytes(tmp_path) == before, f"{tool} {args} changed the ledger"
        # The gateway's memory is all there, as the gateway reads it.
        for kind in PROTECTED:
            got = await gw.call("memory.get", {"factId": ids[kind]})
            assert got.data["retracted"] is False and got.data["value"] in ("pro", "x"), got.data
        read = await gw.call("memory.read", {"space": "org"})
        assert sorted(f["subject"] for f in read.data["facts"]) == ["a", "c", "v"]
        held = await gw.call("memory.history", {"factId": ids["held"]})
        assert [e["kind"] for e in held.data["events"]] == ["assert", "hold"]
        # The gateway itself still may do all of it.
        forget = await gw.call("memory.forget", {"factId": ids["attested"], "reason": "gdpr"})
        assert not forget.is_error, forget.texts


@pytest.mark.parametrize("transport", list(PAIRS))
async def test_direct_caller_may_change_claimed_facts(tmp_path: Path, transport: str) -> None:
    async with PAIRS[transport](tmp_path) as (_gw, direct):
        base = {"subject": "s", "predicate": "p", "space": "org"}
        first = (await direct("memory.write", {**base, "value": 1})).data["fact"]["factId"]
        second = await direct("memory.write", {**base, "value": 2, "supersedes": first})
        assert not second.is_error, second.texts
        sid = second.data["fact"]["factId"]
        retract = await direct("memory.retract", {"factId": sid, "reason": "undo"})
        assert not retract.is_error, retract.texts
        forget = await direct("memory.forget", {"factId": first, "reason": "mine"})
        assert not forget.is_error, forget.texts
        # Unknown facts keep the ledger's own answers.
        unknown = await direct("memory.retract", {"factId": "nope", "reason": "r"})
        assert unknown.text == "cannot retract unknown fact nope"


def test_ledger_rechecks_the_precondition_under_its_write_lock(tmp_path: Path) -> None:
    """The server's first check reads the fact outside the write lock; if the gateway confirms
    the fact after that read, the ledger's own check (inside the write section) still refuses,
    and nothing is written."""
    from agent_custody_state.server.policy import only_claimed

    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        claimed = ledger.assert_fact(
            subject="s", predicate="p", value=1, space="org", actor="bot"
        ).fact_id
        # ... the server's read saw "claimed" here; then the gateway confirms:
        ledger.confirm(fact_id=claimed, actor="gw", receipt_id="r-1")
        before = ledger_bytes(tmp_path)
        for attempt in (
            lambda: ledger.retract(
                fact_id=claimed, actor="bot", reason="r", precondition=only_claimed
            ),
            lambda: ledger.forget(
                fact_id=claimed, actor="bot", reason="r", precondition=only_claimed
            ),
            lambda: ledger.assert_fact(
                subject="s",
                predicate="p",
                value=2,
                space="org",
                actor="bot",
                supersedes=claimed,
                precondition=only_claimed,
            ),
        ):
            with pytest.raises(LedgerError, match=f"fact {claimed} is attested"):
                attempt()
            assert ledger_bytes(tmp_path) == before
        assert not ledger.is_retracted(claimed)
