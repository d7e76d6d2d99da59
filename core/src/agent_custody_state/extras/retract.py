"""``blast --retract``: undo every belief derived from a fact, in one command (beyond the original).

The plan is the blast radius's ``stillBelieved``. Applying it retracts each fact through the
custody flows (``Custody.retract``), so with configured stores each value also leaves them, is
checked gone, and whatever a retraction makes current again is put back. All retractions carry
the one reason, actor and receipt id given. A derived fact that was superseded by another derived
fact becomes current again when its superseder is retracted; it is derived too, so it is
retracted in turn, until no derived fact is believed. The root fact itself is left alone.
Each round looks below what it retracted (``uncovered_by``), and at every belief only when that
finds nothing, so the rounds of a long chain do not each read the whole ledger.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_custody_state.extras.blast import BlastRadius
from agent_custody_state.extras.jsview import compact, text
from agent_custody_state.extras.ledgerview import believed_ids
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import Fact, RetractEvent
from agent_custody_state.stores.flows import Custody, Removal


@dataclass
class Retracted:
    """One fact of the plan: what its retraction did, or why it was not retracted."""

    fact: Fact
    done: Removal[RetractEvent] | None = None
    error: str | None = None
    uncovered: bool = False  # made current again by an earlier retraction of this run

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"factId": self.fact.fact_id, "uncovered": self.uncovered}
        if self.done is not None:
            event, removal = self.done.event, self.done.removal
            out.update(
                eventId=event.event_id,
                txTime=event.tx_time,
                removedFrom=removal.removed_from,
                stillHeld=removal.still_held,
                verification=removal.verification,
            )
            if self.done.restored is not None:
                out["restored"] = self.done.restored.to_dict()
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass
class RetractReport:
    applied: bool
    actor: str
    reason: str
    receipt_id: str | None
    items: list[Retracted] = field(default_factory=list)

    def problems(self) -> list[str]:
        """Stores that still hold a retracted value, and retractions the ledger refused."""
        out = [f"{r.fact.fact_id}: {r.error}" for r in self.items if r.error]
        for r in self.items:
            if r.done is not None:
                out += [
                    f"{n} ({r.fact.fact_id}): {m}" for n, m in r.done.removal.still_held.items()
                ]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "applied": self.applied,
            "actor": self.actor,
            "reason": self.reason,
            "receiptId": self.receipt_id,
            "facts": [r.to_dict() for r in self.items],
        }


def plan(blast: BlastRadius, *, actor: str, reason: str, receipt_id: str | None) -> RetractReport:
    """The dry run: the derived facts still believed, nothing changed."""
    report = RetractReport(False, actor, reason, receipt_id)
    report.items = [Retracted(f) for f in blast.still_believed]
    return report


async def apply(
    custody: Custody, blast: BlastRadius, *, actor: str, reason: str, receipt_id: str | None
) -> RetractReport:
    """Retract the plan, then whatever derived fact the retractions made current again."""
    report = RetractReport(True, actor, reason, receipt_id)
    derived = {f.fact_id: f for f in blast.derived_facts}
    queue = [(f, False) for f in blast.still_believed]
    tried: set[str] = set()
    while queue:
        this_round = [fact.fact_id for fact, _ in queue]
        for fact, uncovered in queue:
            tried.add(fact.fact_id)
            item = Retracted(fact, uncovered=uncovered)
            try:
                item.done = await custody.retract(
                    fact_id=fact.fact_id, actor=actor, reason=reason, receipt_id=receipt_id
                )
            except LedgerError as exc:  # e.g. another process retracted it meanwhile
                item.error = str(exc)
            report.items.append(item)
        found = await custody.run(uncovered_by, custody.ledger, this_round, derived, tried)
        if not found:  # nothing made current below this round's: one look at every belief
            believed = await custody.run(believed_ids, custody.ledger)
            found = {i for i in derived if i in believed and i not in tried}
        queue = [(derived[i], True) for i in derived if i in found]
    return report


def uncovered_by(
    ledger: Ledger, retracted: list[str], derived: dict[str, Fact], tried: set[str]
) -> set[str]:
    """The derived facts not yet tried that retracting ``retracted`` made current again: below
    each, down its ``supersedes`` links past those retracted or forgotten, the first fact still
    standing, when an as-of of its subject and predicate believes it. Asked per round instead
    of an as-of of the whole ledger, which made a chain of k derived replacements (a value each
    call updated) cost k passes over every fact; the whole ledger is looked at only when a
    round uncovers nothing (``apply``), so a derived belief current for another reason is still
    retracted before the run ends."""
    found: set[str] = set()
    for fact_id in retracted:
        below: str | None = fact_id
        seen: set[str] = set()
        while below is not None and below not in seen:
            seen.add(below)
            event = ledger.backend.get_assert(below)
            if event is None or not (event.fact.forgotten or ledger.is_retracted(below)):
                break
            below = event.supersedes
        if below is None or below not in derived or below in tried or below in found:
            continue
        f = derived[below]
        now = ledger.as_of(space=f.space, subject=f.subject, predicate=f.predicate)
        if any(g.fact_id == below for g in now):
            found.add(below)
    return found


def format_report(report: RetractReport) -> str:
    facts = report.items
    if not report.applied:
        if not facts:
            return "nothing to retract: no belief derived from this fact is still believed"
        lines = [
            f"would retract {len(facts)} belief(s) (dry run; pass --apply to retract them, "
            "and any derived belief a retraction makes current again):"
        ]
        lines += [f"  {_line(r.fact)}" for r in facts]
        return "\n".join(lines)
    if not facts:
        return "nothing retracted: no belief derived from this fact is still believed"
    done = [r for r in facts if r.done is not None]
    receipt = f", receipt {report.receipt_id}" if report.receipt_id else ""
    lines = [f"retracted {len(done)} belief(s) as {report.actor} ({report.reason}{receipt}):"]
    for r in facts:
        if r.done is None:
            lines.append(f"  {_line(r.fact)}  NOT RETRACTED: {r.error}")
            continue
        note = "  (current again after an earlier retraction)" if r.uncovered else ""
        lines.append(f"  {_line(r.fact)}  event {r.done.event.event_id[:8]}{note}")
        removal = r.done.removal
        if removal.removed_from or removal.still_held:
            stores = [f"{n}={removal.verification.get(n, 'removed')}" for n in removal.removed_from]
            stores += [f"{n}=STILL HELD ({m})" for n, m in removal.still_held.items()]
            lines.append(f"    stores: {', '.join(stores)}")
    return "\n".join(lines)


def _line(fact: Fact) -> str:
    value = compact(fact.value)
    return f"{text(fact.subject)} {text(fact.predicate)} = {value}  fact {fact.fact_id[:8]}"
