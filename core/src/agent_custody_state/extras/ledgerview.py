"""What the extras ask the ledger: every fact with its computed ``validTo``, what is believed now,
and the status of a fact (SPEC-EXTRAS 2, 3.1 and 9.4).

The ledger stores ``validTo`` as null; the extras show the computed one (the ``validFrom`` of the
fact's superseder), in text and in every JSON output, as the original does. The superseder is the
*effective* one of SPEC 2.2 (a retracted or forgotten link is skipped), so a fact shown as
superseded here is exactly one the ledger's own reads no longer return.
"""

from __future__ import annotations

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
