"""Every mutating tool over real stdio, called as the gateway calls it: evidence, confirm, retract,
hold, release, forget, sweep, concurrency, and the ledger's refusals reaching the caller."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from servertest import unique, write

from agent_custody_state_conformance.gateway import GatewayClient

pytestmark = pytest.mark.anyio


async def test_evidence_verifies_or_refuses(gw: GatewayClient) -> None:
    observed = {"crm": {"account": {"plan": "pro", "seats": [5, {"n": 1}]}}}
    ok = await gw.call(
        "memory.write",
        {
            "subject": unique(),
            "predicate": "plan",
            "value": "pro",
            "space": "org",
            "evidence": {"fact": "crm", "path": "account.plan"},
        },
        observed=observed,
    )
    assert ok.data["fact"]["provenance"] == "verified"
    nested = await gw.call(
        "memory.write",
        {
            "subject": unique(),
            "predicate": "n",
            "value": 1,
            "space": "org",
            "evidence": {"fact": "crm", "path": "account.seats.1.n"},
        },
        observed=observed,
    )
    assert nested.data["fact"]["provenance"] == "verified"
    whole = await gw.call(
        "memory.write",
        {
            "subject": unique(),
            "predicate": "acct",
            "space": "org",
            "value": {"plan": "pro", "seats": [5, {"n": 1}]},
            "evidence": {"fact": "crm", "path": "account"},
        },
        observed={"crm": {"account": {"seats": [5, {"n": 1}], "plan": "pro"}}},
    )
    assert whole.data["fact"]["provenance"] == "verified"  # key order ignored
    wrong_type = await gw.call(
        "memory.write",
        {
            "subject": unique(),
            "predicate": "n",
            "value": "1",
            "space": "org",
            "evidence": {"fact": "crm", "path": "account.seats.1.n"},
        },
        observed=observed,
    )
    assert wrong_type.text == (
        'value differs from what the gateway observed in "crm.account.seats.1.n"; write refused'
    )
    differs = await gw.call(
        "memory.write",
        {
            "subject": unique(),
            "predicate": "plan",
            "value": "free",
            "space": "org",
            "evidence": {"fact": "crm"},
        },
        observed=observed,
    )
    assert differs.text == 'value differs from what the gateway observed in "crm"; write refused'
    unknown = await gw.call(
        "memory.write",
        {
            "subject": unique(),
            "predicate": "plan",
            "value": "pro",
            "space": "org",
            "evidence": {"fact": "billing"},
        },
        observed=observed,
    )
    assert unknown.text == (
        'no fact named "billing" was fetched by the gateway for this call; '
        "configure a fact lookup for memory.write"
    )
    no_agent = await gw.call(
        "memory.write",
        {
            "subject": unique(),
            "predicate": "plan",
            "value": "pro",
            "space": "org",
            "evidence": {"fact": "crm"},
        },
        agent=None,
        observed=observed,
    )
    assert no_agent.text == (
        "evidence needs the gateway: only a fact the gateway fetched itself can verify a value"
    )


async def test_confirm(gw: GatewayClient) -> None:
    claimed = await gw.call(
        "memory.write",
        {"subject": unique(), "predicate": "p", "value": 1, "space": "org"},
        agent=None,
    )
    fact_id = claimed.data["fact"]["factId"]
    refused = await gw.call("memory.confirm", {"factId": fact_id}, agent=None)
    assert refused.text == (
        "confirmation must come through the receipts gateway; a "
        "self-reported caller cannot lift a fact out of quarantine"
    )
    result = await gw.call("memory.confirm", {"factId": fact_id})
    assert list(result.data) == ["eventId", "factId", "txTime", "actor", "source"]
    assert result.data["actor"] == "support-agent"
    assert result.data["source"] == {"receiptId": result.receipt}
    again = await gw.call("memory.confirm", {"factId": fact_id})
    assert again.text == f"fact {fact_id} is already attested"
    got = await gw.call("memory.get", {"factId": fact_id})
    assert got.data["provenance"] == "attested"
    assert (await gw.call("memory.confirm", {"factId": "nope"})).text == (
        "cannot confirm unknown fact nope"
    )


async def test_retract_restores_what_it_superseded(gw: GatewayClient) -> None:
    subject = unique("acct")
    old = await write(gw, subject=subject)
    new = await write(gw, subject=subject, value="enterprise", supersedes=old["fact"]["factId"])
    result = await gw.call(
        "memory.retract",
        {"factId": new["fact"]["factId"], "reason": "wrong", "actor": "ignored-through-gateway"},
    )
    assert list(result.data) == [
        "eventId",
        "factId",
        "txTime",
        "actor",
        "reason",
        "source",
        "removedFrom",
        "verification",
    ]
    assert result.data["actor"] == "support-agent"
    assert result.data["removedFrom"] == [] and result.data["verification"] == {}
    now = await gw.call("memory.read", {"subject": subject})
    assert [f["value"] for f in now.data["facts"]] == ["pro"]
    again = await gw.call("memory.retract", {"factId": new["fact"]["factId"], "reason": "x"})
    assert again.text == f"fact {new['fact']['factId']} is already retracted"
    assert (await gw.call("memory.retract", {"factId": "nope", "reason": "x"})).text == (
        "cannot retract unknown fact nope"
    )


async def test_hold_release_forget(gw: GatewayClient) -> None:
    fact_id = (await write(gw, value={"secret": "s3"}))["fact"]["factId"]
    hold = await gw.call("memory.hold", {"factId": fact_id, "reason": "litigation"})
    assert list(hold.data) == ["eventId", "kind", "txTime", "factId", "actor", "reason", "source"]
    assert hold.data["kind"] == "hold"
    assert (await gw.call("memory.hold", {"factId": fact_id, "reason": "x"})).text == (
        f"fact {fact_id} is already on hold"
    )
    blocked = await gw.call("memory.forget", {"factId": fact_id, "reason": "gdpr"})
    assert blocked.text == f"fact {fact_id} is on legal hold; release it first"
    release = await gw.call("memory.release", {"factId": fact_id, "reason": "closed"})
    assert release.data["kind"] == "release"
    assert (await gw.call("memory.release", {"factId": fact_id, "reason": "x"})).text == (
        f"fact {fact_id} is not on hold"
    )
    forget = await gw.call("memory.forget", {"factId": fact_id, "reason": "gdpr"})
    assert list(forget.data) == [
        "factId",
        "valueDigest",
        "digestKind",
        "txTime",
        "actor",
        "reason",
        "source",
        "erasedFromLedger",
        "removedFrom",
        "stillHeld",
        "verification",
    ]
    assert forget.data["digestKind"] == "sha256" and len(forget.data["valueDigest"]) == 64
    assert forget.data["erasedFromLedger"] is True
    assert forget.data["source"] == {"receiptId": forget.receipt}
    assert (await gw.call("memory.forget", {"factId": fact_id, "reason": "x"})).text == (
        f"fact {fact_id} is already forgotten"
    )
    got = await gw.call("memory.get", {"factId": fact_id})
    assert "value" not in got.data and got.data["retracted"] is True
    assert got.data["forgotten"]["digestKind"] == "sha256"
    no_digest = (await write(gw))["fact"]["factId"]
    result = await gw.call(
        "memory.forget", {"factId": no_digest, "reason": "r", "keepDigest": False}
    )
    assert result.data["digestKind"] == "none" and result.data["valueDigest"] is None
    got = await gw.call("memory.get", {"factId": no_digest})
    assert got.data["forgotten"] == {"digestKind": "none", "at": result.data["txTime"]}


async def test_get_is_shaped_for_policy(gw: GatewayClient) -> None:
    data = await write(gw, confidence=0.9)
    fact_id = data["fact"]["factId"]
    got = await gw.call("memory.get", {"factId": fact_id})
    assert got.data == {
        **{k: v for k, v in data["fact"].items() if v is not None},
        "source": data["fact"]["source"]["receiptId"],
        "retracted": False,
    }
    assert "validTo" not in got.data
    claimed = await gw.call(
        "memory.write",
        {"subject": unique(), "predicate": "p", "value": 1, "space": "org"},
        receipt=None,
        agent=None,
        meta={"agent-custody/receipt": ""},
    )
    assert claimed.is_error  # an empty receipt is no receipt
    assert (await gw.call("memory.get", {"factId": "nope"})).text == "unknown fact nope"


async def test_history(gw: GatewayClient) -> None:
    subject = unique()
    old = (await write(gw, subject=subject))["fact"]["factId"]
    new = (await write(gw, subject=subject, supersedes=old))["fact"]["factId"]
    await gw.call("memory.retract", {"factId": new, "reason": "r"})
    history = await gw.call("memory.history", {"factId": old})
    assert [e["kind"] for e in history.data["events"]] == ["assert", "assert"]
    history = await gw.call("memory.history", {"factId": new})
    assert [e["kind"] for e in history.data["events"]] == ["assert", "retract"]
    assert (await gw.call("memory.history", {"factId": "nope"})).data == {"events": []}


async def test_sweep_with_before_and_with_retention(gw: GatewayClient) -> None:
    space = unique("sweep")
    kept = await write(gw, space=space)
    held = (await write(gw, space=space))["fact"]["factId"]
    await gw.call("memory.hold", {"factId": held, "reason": "keep"})
    result = await gw.call(
        "memory.sweep",
        {"reason": "retention", "space": space, "before": "2000-01-01T01:00:00+01:00"},
    )
    assert result.data == {
        "before": "2000-01-01T00:00:00.000Z",
        "retention": None,
        "space": space,
        "forgotten": [],
        "held": [],
        "stillHeld": [],
    }
    result = await gw.call("memory.sweep", {"reason": "retention", "space": space})
    assert result.data["before"] is None
    assert result.data["retention"] == {"sweep:*": "PT0S"}
    assert [f["factId"] for f in result.data["forgotten"]] == [kept["fact"]["factId"]]
    entry = result.data["forgotten"][0]
    assert list(entry) == ["factId", "valueDigest", "digestKind", "removedFrom", "verification"]
    assert result.data["held"] == [held]
    other = await write(gw, space="org")
    await gw.call("memory.sweep", {"reason": "retention"})  # org has no window: never swept
    assert (await gw.call("memory.get", {"factId": other["fact"]["factId"]})).data["value"] == "pro"


async def test_concurrent_calls_keep_their_own_receipts(gw: GatewayClient) -> None:
    import anyio

    results: dict[int, Any] = {}

    async def one(i: int) -> None:
        results[i] = await gw.call(
            "memory.write",
            {"subject": unique(), "predicate": "p", "value": i, "space": "org"},
            agent=f"agent-{i}",
            receipt=f"rcpt-{i}",
        )

    async with anyio.create_task_group() as tg:
        for i in range(24):
            tg.start_soon(one, i)
    for i, result in results.items():
        fact = result.data["fact"]
        assert (fact["value"], fact["actor"], fact["source"]["receiptId"]) == (
            i,
            f"agent-{i}",
            f"rcpt-{i}",
        )


async def test_ledger_refusals_reach_the_caller_verbatim(gw: GatewayClient) -> None:
    subject = unique()
    old = (await write(gw, subject=subject, validFrom="2026-05-01T00:00:00Z"))["fact"]["factId"]
    texts = {}

    async def refusal(tool: str, args: dict[str, Any], **options: Any) -> str:
        result = await gw.call(tool, args, **options)
        assert result.is_error, result.texts
        return result.text

    texts["early"] = await refusal(
        "memory.write",
        {
            "subject": subject,
            "predicate": "plan",
            "value": 1,
            "space": "org",
            "supersedes": old,
            "validFrom": "2026-04-01T00:00:00Z",
        },
    )
    texts["other"] = await refusal(
        "memory.write",
        {"subject": subject, "predicate": "tier", "value": 1, "space": "org", "supersedes": old},
    )
    await gw.call("memory.retract", {"factId": old, "reason": "r"})
    texts["retracted"] = await refusal(
        "memory.write",
        {"subject": subject, "predicate": "plan", "value": 1, "space": "org", "supersedes": old},
    )
    texts["confirm"] = await refusal("memory.confirm", {"factId": old})
    texts["hold"] = await refusal("memory.hold", {"factId": "nope", "reason": "r"})
    texts["release"] = await refusal("memory.release", {"factId": "nope", "reason": "r"})
    texts["forget"] = await refusal("memory.forget", {"factId": "nope", "reason": "r"})
    gone = (await write(gw))["fact"]["factId"]
    await gw.call("memory.forget", {"factId": gone, "reason": "r"})
    texts["hold-forgotten"] = await refusal("memory.hold", {"factId": gone, "reason": "r"})
    texts["retract-forgotten"] = await refusal("memory.retract", {"factId": gone, "reason": "r"})
    assert texts == {
        "early": "replacement cannot start before the fact it supersedes",
        "other": "a replacement must keep the subject and predicate of the fact it supersedes",
        "retracted": f"fact {old} is retracted",
        "confirm": f"fact {old} is retracted",
        "hold": "cannot hold unknown fact nope",
        "release": "cannot release unknown fact nope",
        "forget": "cannot forget unknown fact nope",
        "hold-forgotten": f"fact {gone} is already forgotten",
        "retract-forgotten": f"fact {gone} is already retracted",
    }


async def test_sweep_without_before_or_windows_is_refused(tmp_path: Path) -> None:
    async with GatewayClient.stdio("serve", "--ledger", str(tmp_path / "l.jsonl")) as plain:
        result = await plain.call("memory.sweep", {"reason": "r"})
        assert result.text == ("sweep needs `before`, or a server started with retention windows")
