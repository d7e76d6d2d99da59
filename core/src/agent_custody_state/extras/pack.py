"""``pack``: the custody pack of one fact, signed, and its verification (SPEC-EXTRAS 4).

Everything about one fact as a single artefact a reviewer can check with public keys alone: its
history with the receipt behind each event, its blast radius with every downstream receipt, its
holds, and, once it is forgotten, the forget event with what the forget receipt recorded of the
stores.
"""

from __future__ import annotations

import os
from typing import Any

from agent_custody_state.canonical import js_key_order
from agent_custody_state.extras.actionpack import NO_ISSUER_KEY, Checks, PackVerification
from agent_custody_state.extras.blast import blast_radius
from agent_custody_state.extras.bundles import decode_statement, load_receipts
from agent_custody_state.extras.jsview import at, compact, items, parse, text, truthy
from agent_custody_state.extras.signed import open_pack, sign_statement
from agent_custody_state.extras.verify import VerifyOptions, verify_bundle
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import (
    AssertEvent,
    Event,
    ForgetEvent,
    HoldEvent,
    ReleaseEvent,
)
from agent_custody_state.signing import KeyPair, PublicKeyRef
from agent_custody_state.timeutil import format_time, utc_now

PACK_TYPE = "https://agent-custody.dev/custody-pack/v0.1"


def _cited(event: Any) -> Any:
    """The receipt an event (wire dict) came from: the fact's source for an assert."""
    if at(event, "kind") == "assert":
        return at(event, "fact", "source", "receiptId")
    return at(event, "source", "receiptId")


def _event_receipt(event: Event) -> str | None:
    return (
        event.fact.source.receipt_id if isinstance(event, AssertEvent) else event.source.receipt_id
    )


def receipt_result(bundle: Any) -> Any:
    """The first text item of the receipt's result, parsed as JSON or kept as text; else None."""
    try:
        content = at(decode_statement(bundle), "predicate", "execution", "result", "content")
    except ValueError:
        return None  # a damaged bundle; its receipt check reports it
    first = (
        next((c for c in content if at(c, "type") == "text"), None)
        if isinstance(content, list)
        else None
    )
    body = at(first, "text")
    if not isinstance(body, str) or not body:
        return None
    try:
        return parse(body)
    except ValueError:
        return body


def build_pack(ledger: Ledger, directory: str | os.PathLike[str], fact_id: str) -> dict[str, Any]:
    bundles, summaries = load_receipts(directory)  # each receipt file read once
    with ledger.backend.reading():  # one moment: history and blast agree on a forget
        history = ledger.history(fact_id)
        blast = blast_radius(ledger, summaries, fact_id)
    wanted: set[str] = {rid for e in history if (rid := _event_receipt(e))}
    wanted.update(r.receipt_id for r in blast.receipts)
    wanted.update(f.source.receipt_id for f in blast.derived_facts if f.source.receipt_id)
    receipts: dict[str, Any] = {}
    missing: list[str] = []
    for rid in sorted(wanted):
        if rid in bundles:
            receipts[rid] = bundles[rid]
        else:
            missing.append(rid)
    forget: dict[str, Any] | None = None
    first_forget = next((e for e in history if isinstance(e, ForgetEvent)), None)
    if first_forget is not None:
        rid = first_forget.source.receipt_id
        result = receipt_result(receipts[rid]) if rid and rid in receipts else None
        forget = {
            "event": first_forget.to_dict(),
            "receiptId": rid,
            "verification": _field(result, "verification"),
            "removedFrom": _field(result, "removedFrom"),
        }
    return {
        "version": "0.1",
        "generatedAt": format_time(utc_now()),
        "factId": fact_id,
        "fact": blast.to_dict()["fact"],
        "history": [e.to_dict() for e in history],
        "receipts": receipts,
        "missingReceipts": missing,
        "blast": blast.to_dict(),
        "forget": forget,
        "holds": [e.to_dict() for e in history if isinstance(e, HoldEvent | ReleaseEvent)],
    }


def held_note(pack: dict[str, Any]) -> str:
    """A line after ``format_pack`` (text output) for a forgotten fact whose writing call is in
    the pack: that receipt still holds the value. The gateway signed it (request args, result),
    a forget does not reach the receipts directory, and the pack must carry the receipt for its
    checks to pass, so the pack is a copy of the erased value to handle as such. Else ""."""
    receipts = pack.get("receipts") or {}
    writes = [_cited(e) for e in items(pack.get("history")) if at(e, "kind") == "assert"]
    held = sorted({rid for rid in writes if isinstance(rid, str) and rid in receipts})
    if not pack.get("forget") or not held:
        return ""
    return (
        f"\nnote: fact {text(pack.get('factId'))} is forgotten, but the pack holds receipt "
        f"{', '.join(rid[:8] for rid in held)}, the call that wrote it, with the value as the "
        "gateway signed it (a forget does not reach the receipts): share the pack only where "
        "the receipts themselves may go"
    )


def _field(result: Any, key: str) -> Any:
    """``result?.<key> ?? null`` (a text result has no fields)."""
    return at(result, key)


def sign_pack(pack: dict[str, Any], key: KeyPair) -> dict[str, Any]:
    return sign_statement(f"custody-pack:{pack['factId']}", PACK_TYPE, pack, key)


def verify_pack(
    envelope: Any, pack_keys: list[PublicKeyRef], receipt_keys: VerifyOptions | None = None
) -> PackVerification:
    c = Checks()
    pack = open_pack(envelope, pack_keys, PACK_TYPE, c.add)
    if pack is None:
        return PackVerification(False, c.checks)
    missing = pack.get("missingReceipts")
    count = len(missing) if isinstance(missing, list) else 0
    c.add(
        "no receipts missing",
        isinstance(missing, list) and count == 0,
        f"{count} cited receipt(s) absent" if count else None,
    )
    receipts = pack.get("receipts") if isinstance(pack.get("receipts"), dict) else {}
    for event in items(pack.get("history")):
        rid = _cited(event)
        if truthy(rid):
            c.add(
                f"{text(at(event, 'kind'))} event cites a receipt in the pack",
                isinstance(rid, str) and rid in receipts,
                text(rid)[:8],
            )
    if receipt_keys is not None:
        for rid in js_key_order(receipts, sort=False):  # Object.entries' order
            bundle = receipts[rid]
            r = verify_bundle(bundle, receipt_keys)
            c.add(f"receipt {rid[:8]} verifies", r.ok, None if r.ok else r.failed_names())
            if r.ok and at(r.statement, "predicate", "receiptId") != rid:
                c.add(f"receipt {rid[:8]} is the receipt it claims to be", False)
    else:
        c.add("receipts checked against the gateway's keys", False, NO_ISSUER_KEY)
    forget = pack.get("forget")
    if truthy(forget):
        rid = at(forget, "receiptId")
        bundle = receipts.get(rid) if isinstance(rid, str) and rid else None
        result = receipt_result(bundle) if bundle is not None else None
        c.add(
            "forget receipt names this fact and records the erasure",
            isinstance(result, dict)
            and result.get("factId") == pack.get("factId")
            and result.get("erasedFromLedger") is True,
            None if bundle is not None else "forget receipt not in the pack",
        )
    return PackVerification(c.ok, c.checks, pack)


def format_pack(p: Any) -> str:
    fact = at(p, "fact")
    fact_id = text(at(p, "factId"))
    if truthy(fact):
        value = "(erased)" if truthy(at(fact, "forgotten")) else compact(at(fact, "value"))
        first = (
            f"fact {fact_id}: {text(at(fact, 'subject'))} {text(at(fact, 'predicate'))} = {value} "
            f"(space {text(at(fact, 'space'))}, by {text(at(fact, 'actor'))}, "
            f"{text(at(fact, 'provenance'))})"
        )
    else:
        first = f"fact {fact_id}: not in this ledger"
    lines = [first]
    history = items(at(p, "history"))
    lines.append(f"history: {' → '.join(text(at(e, 'kind')) for e in history)}")
    receipts = at(p, "receipts")
    receipts = receipts if isinstance(receipts, dict) else {}
    missing = items(at(p, "missingReceipts"))
    lines.append(
        f"receipts in pack: {len(receipts)}" + (f", missing {len(missing)}" if missing else "")
    )
    holds = items(at(p, "holds"))
    if holds:
        lines.append(
            "holds: "
            + "; ".join(
                f"{text(at(e, 'kind'))} by {text(at(e, 'actor'))} ({text(at(e, 'reason'))})"
                for e in holds
            )
        )
    forget = at(p, "forget")
    if truthy(forget):
        event = at(forget, "event")
        rid = at(forget, "receiptId")
        verification = at(forget, "verification")
        stores = (
            ", ".join(
                f"{k}={text(verification[k])}" for k in js_key_order(verification, sort=False)
            )
            if isinstance(verification, dict)
            else "none"
        )
        lines.append(
            f"forgotten at {text(at(event, 'txTime'))} by {text(at(event, 'actor'))}; receipt "
            f"{text(rid)[:8] if rid is not None else 'none'}; stores: {stores}"
        )
    blast = at(p, "blast")
    lines.append(
        f"blast radius: {len(items(at(blast, 'receipts')))} later call(s), "
        f"{len(items(at(blast, 'derivedFacts')))} derived belief(s), "
        f"{len(items(at(blast, 'stillBelieved')))} still believed"
    )
    return "\n".join(lines)
