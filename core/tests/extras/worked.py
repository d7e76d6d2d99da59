"""The worked fixture of SPEC-EXTRAS 1.8, built from its inputs verbatim.

Three gateway receipts (R1 writes acct:42 plan, R2 reads it, R3 writes a discount after seeing
F1), the ledger with the two matching asserts, and the keys from seeds 01, 02 and 03. Upstream's
own ``verifyBundle``, ``blastRadius``, ``formatExplain``, ``buildPack`` and ``verifyPack``
printed the outputs the tests compare against.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gatewaysim import Gateway, seeded, text_result, write_keys

from agent_custody_state.canonical import js_json
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import AssertEvent, Fact, Source

R1 = "11111111-1111-4111-8111-111111111111"
R2 = "22222222-2222-4222-8222-222222222222"
R3 = "33333333-3333-4333-8333-333333333333"
F1 = "f1f1f1f1-0000-4000-8000-000000000001"
F2 = "f2f2f2f2-0000-4000-8000-000000000002"
E1 = "e1e1e1e1-0000-4000-8000-000000000001"
E2 = "e2e2e2e2-0000-4000-8000-000000000002"

GATEWAY_KEYID = "fd110d301d2f077de1414b8f99f441b1403fab207b2052fbd2c065e4ee8e7dc2"
PRINCIPAL_KEYID = "47dea58ea00fae9417ee19d76755bfef690899021132effb04fe1f9e4f0c8059"
PACK_KEYID = "8cef065b7af83669150b7d32704d3d3e75c3e9aee0d4f6740544c68e81b377aa"


def wire_fact(fact_id: str, predicate: str, value: Any, receipt: str, at: str) -> dict[str, Any]:
    return {
        "factId": fact_id,
        "subject": "acct:42",
        "predicate": predicate,
        "value": value,
        "space": "org",
        "actor": "support-agent",
        "source": {"receiptId": receipt},
        "provenance": "attested",
        "validFrom": at,
        "validTo": None,
        "confidence": None,
    }


F1_WIRE = wire_fact(F1, "plan", "enterprise", R1, "2026-09-01T10:00:00.010Z")
F2_WIRE = wire_fact(F2, "discount", 20, R3, "2026-09-01T10:02:00.010Z")


def write_result(fact: dict[str, Any], event_id: str) -> dict[str, Any]:
    return {
        "content": [
            {
                "type": "text",
                "text": js_json(
                    {
                        "fact": fact,
                        "eventId": event_id,
                        "txTime": fact["validFrom"],
                        "supersedes": None,
                    }
                ),
            }
        ]
    }


@dataclass
class Worked:
    """Paths of the built fixture."""

    root: Path
    receipts: Path
    ledger: Path
    gateway_key: Path
    gateway_pub: Path
    principal_key: Path
    principal_pub: Path
    pack_key: Path
    pack_pub: Path
    bundles: dict[str, dict[str, Any]]


def build(root: Path) -> Worked:
    receipts = root / "receipts"
    receipts.mkdir()
    keys = root / "keys"
    keys.mkdir()
    gateway, principal, signer = seeded(1), seeded(2), seeded(3)
    gk, gp = write_keys(gateway, keys, "gateway")
    pk, pp = write_keys(principal, keys, "principal")
    sk, sp = write_keys(signer, keys, "pack")
    gw = Gateway(receipts, gateway, principal)
    bundles = {
        R1: gw.call(
            R1,
            "2026-09-01T10:00:00.000Z",
            "memory.write",
            {"subject": "acct:42", "predicate": "plan", "value": "enterprise", "space": "org"},
            write_result(F1_WIRE, E1),
        ),
        R2: gw.call(
            R2,
            "2026-09-01T10:01:00.000Z",
            "memory.read",
            {"subject": "acct:42"},
            text_result({"facts": [F1_WIRE]}, {"agent-custody/facts": [F1]}),
        ),
        R3: gw.call(
            R3,
            "2026-09-01T10:02:00.000Z",
            "memory.write",
            {"subject": "acct:42", "predicate": "discount", "value": 20, "space": "org"},
            write_result(F2_WIRE, E2),
        ),
    }
    ledger = root / "ledger.jsonl"
    with Ledger(ledger) as opened:
        opened.import_events(
            [
                AssertEvent(E1, F1_WIRE["validFrom"], Fact.from_dict(F1_WIRE)),
                AssertEvent(E2, F2_WIRE["validFrom"], Fact.from_dict(F2_WIRE)),
            ]
        )
    return Worked(root, receipts, ledger, gk, gp, pk, pp, sk, sp, bundles)


def retract(ledger: Path, fact_id: str, at: str, actor: str, reason: str) -> None:
    """Retract with the ledger's clock pinned to ``at``."""
    from agent_custody_state.timeutil import parse_time

    with Ledger(ledger, clock=lambda: parse_time(at)) as opened:
        opened.retract(fact_id=fact_id, actor=actor, reason=reason, receipt_id=None)


__all__ = ["Source", "Worked", "build", "retract"]
