"""``blast``: everything that relied on one fact (SPEC-EXTRAS 2).

The receipts say which facts the agent had been shown before each call; the ledger says which
facts each call wrote. Walking both forward until nothing is added gives every later call that
saw the fact (or a belief derived from it) and every belief derived, transitively. It is an upper
bound by design: a receipt shows what the agent was shown, not what it relied on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_custody_state.extras.bundles import ReceiptSummary, time_key
from agent_custody_state.extras.jsview import compact, pad, text
from agent_custody_state.extras.ledgerview import Snapshot, fresh, wire
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import Event, Fact, RetractEvent


@dataclass
class BlastRadius:
    fact: Fact | None
    receipts: list[ReceiptSummary]
    derived_facts: list[Fact]
    retraction: RetractEvent | None
    still_believed: list[Fact]

    def to_dict(self) -> dict[str, Any]:
        return {
            "fact": wire(self.fact),
            "receipts": [r.to_dict() for r in self.receipts],
            "derivedFacts": [f.to_dict() for f in self.derived_facts],
            "retraction": self.retraction.to_dict() if self.retraction else None,
            "stillBelieved": [f.to_dict() for f in self.still_believed],
        }


def blast_radius(
    ledger: Ledger,
    receipts: list[ReceiptSummary],
    fact_id: str,
    known: Snapshot | None = None,
) -> BlastRadius:
    """The walk of SPEC-EXTRAS 2; ``receipts`` sorted by timestamp (``load_summaries``).
    The ledger is read at one moment (``EventBackend.reading``): a forget committed by another
    process between two of its questions would otherwise pair a value read before it with a
    state read after it. ``known``: a snapshot the caller read (``ledgerview.Snapshot``), used
    while the ledger is unchanged; the walk of several facts then reads the ledger once."""
    with ledger.backend.reading():
        snap = fresh(ledger, known)
        history = ledger.history(fact_id)
    return walk(snap, receipts, fact_id, history)


class Shown:
    """The receipts (``load_summaries``' order) indexed by the facts each was shown, built once
    for every walk over them (a page's facts, a review's pages)."""

    def __init__(self, receipts: list[ReceiptSummary]) -> None:
        self.position = {id(r): i for i, r in enumerate(receipts)}
        self.by_fact: dict[str, list[ReceiptSummary]] = {}
        for r in receipts:
            for i in dict.fromkeys(i for i in r.consumed if isinstance(i, str)):
                self.by_fact.setdefault(i, []).append(r)


def walk(
    snap: Snapshot,
    receipts: list[ReceiptSummary] | Shown,
    fact_id: str,
    history: list[Event],
) -> BlastRadius:
    """The fixpoint of SPEC-EXTRAS 2, in rounds as the original computes it (its order is
    theirs): each round adds the calls shown a fact added in the round before, then the facts
    those calls wrote. With the receipts indexed by the facts they were shown (``Shown``), each
    receipt and fact is looked at a bounded number of times, not once per round (a chain of
    calls each shown what the one before wrote took rounds x (receipts + facts))."""
    shown = receipts if isinstance(receipts, Shown) else Shown(receipts)
    position, by_fact = shown.position, shown.by_fact
    hit: dict[Any, ReceiptSummary] = {}
    derived: dict[str, Fact] = {}
    added = [fact_id]
    while added:
        calls = {id(r): r for i in added for r in by_fact.get(i, ()) if r.receipt_id not in hit}
        new = sorted(calls.values(), key=lambda r: position[id(r)])
        for r in new:
            hit.setdefault(r.receipt_id, r)
        fresh_ids = dict.fromkeys(r.receipt_id for r in new)
        added = []
        for f in snap.sourced(fresh_ids):
            if f.fact_id != fact_id and f.fact_id not in derived:
                derived[f.fact_id] = f
                added.append(f.fact_id)
    retraction = next((e for e in history if isinstance(e, RetractEvent)), None)
    derived_facts = list(derived.values())
    return BlastRadius(
        fact=snap.by_id.get(fact_id),
        receipts=sorted(hit.values(), key=lambda r: time_key(r.timestamp)),
        derived_facts=derived_facts,
        retraction=retraction,
        still_believed=[f for f in derived_facts if f.fact_id in snap.believed],
    )


def fact_line(fact_id: str, fact: Fact | None) -> str:
    """``fact <id>: <subject> <predicate> = <value> (space .., by .., <provenance>)``."""
    if fact is None:
        return f"fact {text(fact_id)}: not in this ledger"
    return (
        f"fact {text(fact_id)}: {text(fact.subject)} {text(fact.predicate)} = "
        f"{shown_value(fact)} (space {text(fact.space)}, by {text(fact.actor)}, "
        f"{text(fact.provenance)})"
    )


def shown_value(fact: Fact) -> str:
    """The value as the text outputs show it: ``(erased)`` for a forgotten fact, as ``pack``
    shows it, never the ``null`` a forget leaves in its place (which reads as a value)."""
    return "(erased)" if fact.forgotten else compact(fact.value)


def format_blast(b: BlastRadius, fact_id: str) -> str:
    lines = [fact_line(fact_id, b.fact)]
    r = b.retraction
    lines.append(
        f"retracted at {r.tx_time} by {text(r.actor)}: {text(r.reason)}" if r else "not retracted"
    )
    lines.append(f"{len(b.receipts)} call(s) made after the agent was shown it:")
    for s in b.receipts:
        lines.append(
            f"  {text(s.timestamp)}  {pad(text(s.tool), 18)} {pad(text(s.status), 9)} "
            f"receipt {text(s.receipt_id)[:8]}"
        )
    still = {f.fact_id for f in b.still_believed}
    lines.append(
        f"{len(b.derived_facts)} belief(s) written in those calls, "
        f"{len(b.still_believed)} still believed:"
    )
    for f in b.derived_facts:
        lines.append(
            f"  {text(f.subject)} {text(f.predicate)} = {shown_value(f)}  "
            f"fact {text(f.fact_id)[:8]}{' (claimed)' if f.provenance == 'claimed' else ''}  "
            + ("STILL BELIEVED" if f.fact_id in still else "no longer believed")
        )
    return "\n".join(lines)
