"""What the extras ask the ledger: every fact with its computed ``validTo``, what is believed now,
and the status of a fact (SPEC-EXTRAS 2, 3.1 and 9.4).

The ledger stores ``validTo`` as null; the extras show the computed one (the ``validFrom`` of the
fact's superseder), in text and in every JSON output, as the original does. The superseder is the
*effective* one of SPEC 2.2 (a retracted or forgotten link is skipped), so a fact shown as
superseded here is exactly one the ledger's own reads no longer return.

``Snapshot`` is those answers read once, for a command that asks them about many facts or
receipts (``review --out``, ``explain``'s blast radius of every fact a call wrote): each
answer is a pass over the whole ledger, so asking it per item made a run cost items x events.
A snapshot is used only while the ledger holds the events it was read from (``fresh``): a
write since (another process's forget, say) makes the next user read a new one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import Event, Fact
from agent_custody_state.ledger.queries import effective_superseders

Status = Literal["believed", "retracted", "forgotten", "superseded"]


def all_facts(ledger: Ledger) -> list[Fact]:
    """``ledger.facts()`` (first-assert order) with ``validTo`` computed."""
    ledger.backend.refresh()
    facts = ledger.facts()
    supers = effective_superseders(ledger.backend, [f.fact_id for f in facts])
    return [
        f.with_(valid_to=supers[f.fact_id].fact.valid_from) if f.fact_id in supers else f
        for f in facts
    ]


def get_fact(ledger: Ledger, fact_id: str) -> Fact | None:
    """``ledger.get(id)`` with ``validTo`` computed the same way as ``all_facts``."""
    fact = ledger.get(fact_id)
    if fact is None:
        return None
    supers = effective_superseders(ledger.backend, [fact_id])
    return fact.with_(valid_to=supers[fact_id].fact.valid_from if fact_id in supers else None)


def believed_ids(ledger: Ledger) -> set[str]:
    """The ids of every fact believed now, whatever its provenance."""
    return {f.fact_id for f in ledger.as_of()}


@dataclass
class Snapshot:
    """``all_facts`` and ``believed_ids`` at one moment, indexed, with the ledger's event count
    then (``events``: a write, a forget included, appends an event, so an equal count is the
    same ledger)."""

    events: int
    facts: list[Fact]
    believed: set[str]
    by_id: dict[str, Fact] = field(default_factory=dict)
    by_source: dict[str, list[Fact]] = field(default_factory=dict)
    position: dict[str, int] = field(default_factory=dict)
    #: What callers derive from the snapshot once (``erased.erasures``), by name.
    memo: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for i, f in enumerate(self.facts):
            self.by_id[f.fact_id] = f
            self.position[f.fact_id] = i
            if f.source.receipt_id:
                self.by_source.setdefault(f.source.receipt_id, []).append(f)

    def written_by(self, receipt_id: str) -> list[Fact]:
        """The facts whose source is ``receipt_id``, in first-assert order."""
        return list(self.by_source.get(receipt_id, ()))

    def sourced(self, receipt_ids: Iterable[Any]) -> list[Fact]:
        """The facts written by any of ``receipt_ids``, in first-assert order."""
        found = [f for r in receipt_ids if isinstance(r, str) for f in self.by_source.get(r, ())]
        return sorted(found, key=lambda f: self.position[f.fact_id])


def snapshot(ledger: Ledger) -> Snapshot:
    """The ledger's answers at one moment (``EventBackend.reading``)."""
    with ledger.backend.reading():
        ledger.backend.refresh()
        events = ledger.backend.count()
        facts = all_facts(ledger)
        believed = believed_ids(ledger)
    return Snapshot(events, facts, believed)


def fresh(ledger: Ledger, known: Snapshot | None) -> Snapshot:
    """``known`` while the ledger still holds exactly its events, else a new snapshot. Inside
    ``reading()``, what the caller reads next belongs to the same moment as the answer."""
    if known is not None:
        ledger.backend.refresh()
        if ledger.backend.count() == known.events:
            return known
    return snapshot(ledger)


def status_of(history: list[Event], fact: Fact) -> Status:
    """forgotten > retracted > superseded > believed (SPEC-EXTRAS 3.1)."""
    kinds = {e.kind for e in history}
    if "forget" in kinds:
        return "forgotten"
    if "retract" in kinds:
        return "retracted"
    return "superseded" if fact.valid_to is not None else "believed"


def wire(fact: Fact | None) -> dict[str, Any] | None:
    return None if fact is None else fact.to_dict()
