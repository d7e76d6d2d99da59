"""How each value a forget erases is stored, read before the forget (``plain`` or
``crypto-shred``): an erasure intent records it (``intents.record``), since a forget leaves
nothing that says it (the sealed value goes with the data key), and its recovered certificate
names it (``intents.recovered``). Split from ``intents`` by role."""

from __future__ import annotations

from collections.abc import Collection

from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import AssertEvent


def stored_kinds(ledger: Ledger, fact_ids: Collection[str]) -> dict[str, str]:
    """How each value is stored, before its forget: ``crypto-shred`` when sealed under a data
    key, else ``plain`` (every value of a ledger that is not in crypto-shred mode: empty)."""
    from agent_custody_state.ledger.envelope import kid_of
    from agent_custody_state.ledger.shred import ShreddingBackend

    backend = ledger.backend
    if not isinstance(backend, ShreddingBackend) or not fact_ids:
        return {}
    kinds = dict.fromkeys(fact_ids, "plain")
    for event in backend.inner.events_for(list(fact_ids)):
        if isinstance(event, AssertEvent) and kid_of(event.fact.value) is not None:
            kinds[event.fact.fact_id] = "crypto-shred"
    return kinds


def mode_of(ledger: Ledger) -> str:
    """Without a record (an intent of a fact not read before), the ledger's own mode."""
    return "crypto-shred" if shredding(ledger) else "plain"


def shredding(ledger: Ledger) -> bool:
    """Whether the ledger seals its values under data keys (crypto-shred mode)."""
    from agent_custody_state.ledger.shred import ShreddingBackend

    return isinstance(ledger.backend, ShreddingBackend)
