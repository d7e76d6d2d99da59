"""``explain``: one receipt's action answered as ten questions, and the action pack behind them
(SPEC-EXTRAS 3.1 and 3.2).

The receipt answers the first eight on its own (who acted, who authorized it, what was allowed,
what the agent saw, what it did, why, the evidence, whether it verifies); the ledger answers the
last two (what depended on it, what needs reversal). Without a ledger those two say "unknown",
never "nothing", so a reader can tell "nothing depended on it" from "nobody looked". The pack is
a plain JSON dict in the original's wire form; ``format_explain`` reads a built pack and one that
came out of a signed file alike.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_custody_state.canonical import js_key_order
from agent_custody_state.extras.blast import Shown, walk
from agent_custody_state.extras.bundles import (
    ReceiptSummary,
    decode_statement,
    load_bundle,
    load_summaries,
    time_key,
)
from agent_custody_state.extras.erased import (
    CHECKED_AS_STORED,
    STILL_HELD,
    Erasures,
    TextMarker,
    redact,
)
from agent_custody_state.extras.erased import erasures as erasures  # the CLI's import
from agent_custody_state.extras.jsview import at, compact, items, parse, text, truthy
from agent_custody_state.extras.ledgerview import Snapshot, fresh, get_fact, status_of
from agent_custody_state.extras.verify import VerifyResult
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.signing import b64decode_lenient
from agent_custody_state.timeutil import format_time, utc_now

LABEL_WIDTH = 28


def safe_name(receipt_id: str) -> bool:
    """A receipt id usable as a file name in the receipts directory (no path, no dot names)."""
    return (
        bool(receipt_id) and Path(receipt_id).name == receipt_id and receipt_id not in {".", ".."}
    )


def read_receipt(directory: str | os.PathLike[str], receipt_id: str) -> Any:
    if not safe_name(receipt_id):
        # An id with a path in it is never looked up outside the receipts directory.
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), f"{receipt_id}.json")
    return load_bundle(directory, receipt_id)


def build_action_pack(
    directory: str | os.PathLike[str],
    receipt_id: str,
    ledger: Ledger | None = None,
    known: Snapshot | None = None,
    summaries: list[ReceiptSummary] | Shown | None = None,
    *,
    bundles: bool = True,
) -> dict[str, Any]:
    """The pack of SPEC-EXTRAS 3.1; a missing or unreadable receipt file raises. ``known``
    and ``summaries``: the ledger's snapshot and the directory's receipts (indexed: ``Shown``),
    read once by a caller building many packs (``review``); the snapshot is used while the
    ledger is unchanged, the summaries as given. ``bundles=False``: the downstream receipts
    are not read into ``receipts`` (the review's pages show none of them; reading them made a
    page cost as many file reads as its call has later calls)."""
    receipt = read_receipt(directory, receipt_id)
    predicate = at(decode_statement(receipt), "predicate")
    consumed_ids = at(predicate, "consumed", "factIds")
    consumed_ids = consumed_ids if isinstance(consumed_ids, list) else []
    consumed: dict[str, list[Any]] = {"facts": [], "unknown": []}
    written: list[Any] = []
    status: dict[str, str] = {}
    downstream: dict[str, list[Any]] = {"receipts": [], "derivedFacts": [], "stillBelieved": []}
    receipts: dict[str, Any] = {}
    missing: list[str] = []
    if ledger is None:
        consumed["unknown"].extend(consumed_ids)
    else:
        if isinstance(summaries, Shown):
            shown = summaries
        else:
            shown = Shown(load_summaries(directory) if summaries is None else summaries)
        # One moment of the ledger (``EventBackend.reading``): a forget another process
        # commits meanwhile never pairs a value read before it with a status read after it.
        # The ledger is read once (``Snapshot``), not once per fact this call wrote.
        with ledger.backend.reading():
            snap = fresh(ledger, known)
            for fact_id in consumed_ids:
                fact = get_fact(ledger, fact_id) if isinstance(fact_id, str) else None
                if fact is not None:
                    consumed["facts"].append(fact.to_dict())
                else:
                    consumed["unknown"].append(fact_id)
            mine = snap.written_by(receipt_id)
            seen_receipts: dict[Any, Any] = {}
            seen_facts: dict[str, Any] = {}
            believed: set[str] = set()
            for fact in mine:
                written.append(fact.to_dict())
                history = ledger.history(fact.fact_id)
                status[fact.fact_id] = status_of(history, fact)
                radius = walk(snap, shown, fact.fact_id, history)
                for r in radius.receipts:
                    seen_receipts[r.receipt_id] = r
                for d in radius.derived_facts:
                    seen_facts[d.fact_id] = d
                believed.update(f.fact_id for f in radius.still_believed)
            ordered = sorted(seen_receipts.values(), key=lambda r: time_key(r.timestamp))
            downstream["receipts"] = [r.to_dict() for r in ordered]
            downstream["derivedFacts"] = [f.to_dict() for f in seen_facts.values()]
            downstream["stillBelieved"] = [
                f.to_dict() for f in seen_facts.values() if f.fact_id in believed
            ]
        wanted = {r.receipt_id for r in ordered} | {
            f.source.receipt_id for f in seen_facts.values() if f.source.receipt_id
        }
        for rid in sorted(wanted) if bundles else ():
            try:
                receipts[rid] = read_receipt(directory, rid)
            except (OSError, ValueError):
                missing.append(rid)
    return {
        "version": "0.1",
        "generatedAt": format_time(utc_now()),
        "receiptId": receipt_id,
        "receipt": receipt,
        "consumed": consumed,
        "written": written,
        "status": status,
        "downstream": downstream,
        "receipts": receipts,
        "missingReceipts": missing,
    }


def _grant(envelope: Any) -> Any:
    """The grant payload, decoded **unverified** (only CAN I VERIFY IT reflects verification)."""
    payload = at(envelope, "payload")
    if not isinstance(payload, str):
        return None
    try:
        return parse(b64decode_lenient(payload))
    except ValueError:
        return None


def fact_line(f: Any) -> str:
    """``<subject> <predicate> = <value> [<id8>]``; ``(erased)`` for a forgotten value, and
    ``(claimed)`` after a quarantined fact, as the server's resources mark it by its provenance
    (never passed off as an attested belief)."""
    value = " (erased)" if truthy(at(f, "forgotten")) else f" = {compact(at(f, 'value'))}"
    claimed = " (claimed)" if at(f, "provenance") == "claimed" else ""
    return (
        f"{text(at(f, 'subject'))} {text(at(f, 'predicate'))}{value} "
        f"[{text(at(f, 'factId'))[:8]}]{claimed}"
    )


def _joined(values: Any, sep: str) -> str:
    return (
        sep.join("" if v is None else text(v) for v in values) if isinstance(values, list) else ""
    )


def _count(values: Any) -> int:
    return len(values) if isinstance(values, list | str) else 0


class _Rows:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def row(self, label: str, answer: str) -> None:
        self.lines.append(f"{label:<{LABEL_WIDTH}} {answer}")

    def more(self, answer: str) -> None:
        self.lines.append(f"{'':<{LABEL_WIDTH}} {answer}")


def format_explain(
    pack: Any,
    verification: VerifyResult | None,
    with_ledger: bool,
    erased: Erasures | None = None,
) -> str:
    """The ten answers of SPEC-EXTRAS 3.2. ``erased``: the ledger's forgotten facts; a value of
    one that the receipt holds shows as ``(erased)``, with a note (``extras.erased``)."""
    p = at(decode_statement(at(pack, "receipt")), "predicate")
    marker = TextMarker()
    p, hidden = redact(p, erased, at(p, "receiptId"), marker)
    show = marker.compact if hidden else compact
    out = _Rows()
    tail = (
        ", self-reported by its own process"
        if at(p, "issuer", "kind") == "sdk"
        else ", named in a signed grant"
    )
    out.row("WHO", f"{text(at(p, 'agent', 'id'))} ({text(at(p, 'agent', 'provenance'))}{tail})")
    d = _grant(at(p, "delegation", "envelope")) if truthy(at(p, "delegation")) else None
    if at(p, "principal", "provenance") == "attested":
        valid = (
            f", valid {text(at(d, 'issuedAt'))} to {text(at(d, 'expiresAt'))}" if truthy(d) else ""
        )
        out.row(
            "WHO AUTHORIZED IT",
            f"{text(at(p, 'principal', 'id'))}, grant signed by key "
            f"{text(at(p, 'principal', 'keyid'))[:12]}{valid}",
        )
    else:
        who = at(p, "principal", "id")
        out.row(
            "WHO AUTHORIZED IT",
            f"{'nobody named' if who is None else text(who)} (claimed; no signed grant)",
        )
    scopes = at(d, "scopes")
    out.row(
        "WHAT WAS ALLOWED",
        f"tools {_joined(scopes, ', ')}" if truthy(scopes) else "no grant in this receipt",
    )
    policy = at(p, "policy")
    if truthy(policy):
        reasons, errors = at(policy, "reasons"), at(policy, "errors")
        out.more(
            f"policy {text(at(policy, 'policyDigest'))[:12]} decided {text(at(policy, 'decision'))}"
            + (f" by {_joined(reasons, ', ')}" if _count(reasons) else "")
            + (f"; errors: {_joined(errors, '; ')}" if _count(errors) else "")
        )
    _saw(out, p, pack, with_ledger, show)
    _did(out, p, policy, show)
    _evidence(out, p, pack)
    if hidden:
        out.more(STILL_HELD)
    if verification is None:
        out.row(
            "CAN I VERIFY IT", "not checked here; pass the gateway's and principal's public keys"
        )
    elif verification.ok:
        out.row("CAN I VERIFY IT", f"VERIFIED, {len(verification.checks)} checks")
    else:
        out.row("CAN I VERIFY IT", f"NOT VERIFIED: {verification.failed_names()}")
    if hidden and verification is not None:
        out.more(CHECKED_AS_STORED)
    if with_ledger:
        _depends(out, pack)
    else:
        out.row("DID ANYTHING DEPEND ON THIS", "unknown without a ledger")
        out.row("WHAT NEEDS REVERSAL", "unknown without a ledger")
    return "\n".join(out.lines)


def _saw(out: _Rows, p: Any, pack: Any, with_ledger: bool, show: Callable[[Any], str]) -> None:
    facts = at(p, "facts")
    entries = (
        [(k, facts[k]) for k in js_key_order(facts, sort=False)] if isinstance(facts, dict) else []
    )
    out.row(
        "WHAT THE AGENT SAW",
        "; ".join(
            f"{k} = {show(at(f, 'value'))} (fetched by the gateway via {text(at(f, 'tool'))})"
            for k, f in entries
        )
        if entries
        else "no facts fetched for this call",
    )
    shown = _count(at(p, "consumed", "factIds"))
    if not with_ledger:
        out.more(
            f"{shown} belief(s) shown before this call; open with a ledger to see them"
            if shown
            else "no beliefs shown before this call"
        )
    elif shown == 0:
        out.more("no beliefs shown before this call")
    else:
        out.more(f"{shown} belief(s) shown before this call:")
        for f in items(at(pack, "consumed", "facts")):
            out.more(f"  {fact_line(f)}")
        for fact_id in items(at(pack, "consumed", "unknown")):
            out.more(f"  {text(fact_id)[:8]} (not in this ledger)")


def _did(out: _Rows, p: Any, policy: Any, show: Callable[[Any], str]) -> None:
    status = at(p, "execution", "status")
    suffix = ""
    if status in ("denied", "withheld"):
        suffix = f": {text(at(p, 'execution', 'reason'))}"
    elif status == "error":
        suffix = f": {text(at(p, 'execution', 'error'))}"
    args = at(p, "request", "args")
    out.row("WHAT IT DID", f"{text(at(p, 'tool', 'name'))} {show(args)} -> {text(status)}{suffix}")
    if not truthy(policy):
        out.row("WHY", "no policy was evaluated")
        return
    reasons, errors = at(policy, "reasons"), at(policy, "errors")
    if at(policy, "decision") == "allow":
        out.row(
            "WHY",
            "the policy permitted it" + (f" ({_joined(reasons, ', ')})" if _count(reasons) else ""),
        )
        return
    every = [
        *(reasons if isinstance(reasons, list) else []),
        *(errors if isinstance(errors, list) else []),
    ]
    out.row("WHY", f"the policy refused it: {_joined(every, '; ') or 'no permit matched'}")


def _evidence(out: _Rows, p: Any, pack: Any) -> None:
    head_key = at(pack, "receipt", "treeHead", "signatures", 0, "keyid")
    out.row(
        "WHAT EVIDENCE",
        f"receipt {text(at(p, 'receiptId'))}, leaf {text(at(pack, 'receipt', 'inclusion', 'leafIndex'))} "
        f"of a log whose head is signed by {('?' if head_key is None else text(head_key))[:12]}",
    )
    if truthy(at(p, "authorization")):
        index = text(at(p, "authorization", "inclusion", "leafIndex"))
        out.more(f"authorization committed as leaf {index}, before the call was forwarded")
    executed = at(p, "execution", "status") in ("executed", "failed")
    if executed and truthy(at(p, "execution", "upstream")):
        out.more("the upstream's own signature over the result is embedded")


def _depends(out: _Rows, pack: Any) -> None:
    written = items(at(pack, "written"))
    status = at(pack, "status") or {}
    later = items(at(pack, "downstream", "receipts"))
    derived = items(at(pack, "downstream", "derivedFacts"))
    if not written:
        out.row(
            "DID ANYTHING DEPEND ON THIS",
            "this call wrote no beliefs; nothing in the ledger descends from it",
        )
    else:
        out.row(
            "DID ANYTHING DEPEND ON THIS",
            f"{len(written)} belief(s) written in this call, {len(later)} later call(s) made "
            f"after seeing them, {len(derived)} belief(s) derived",
        )
        for f in written:
            out.more(f"  wrote {fact_line(f)}: {text(at(status, text(at(f, 'factId'))))}")
        for r in later:
            out.more(
                f"  then {text(at(r, 'timestamp'))} {text(at(r, 'tool'))} {text(at(r, 'status'))} "
                f"(receipt {text(at(r, 'receiptId'))[:8]})"
            )
    still = items(at(pack, "downstream", "stillBelieved"))
    open_facts = [f for f in written if at(status, text(at(f, "factId"))) == "believed"] + list(
        still
    )
    if not open_facts:
        out.row(
            "WHAT NEEDS REVERSAL",
            "nothing"
            if not written
            else "nothing still believed; every belief from this call and after it is retracted, "
            "forgotten, or superseded",
        )
        return
    out.row(
        "WHAT NEEDS REVERSAL",
        f"{len(open_facts)} belief(s) still believed"
        + (f", and {len(later)} later call(s) to review" if later else ""),
    )
    for f in open_facts:
        out.more(f"  {fact_line(f)} (space {text(at(f, 'space'))})")
