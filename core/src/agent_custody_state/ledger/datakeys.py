"""How a value is stored, read before its forget for the erasure certificate (``forgetting``):
plain, or sealed under data keys (crypto-shred mode), and those keys, so the certificate's byte
scan can look for them in the key store's files once they are destroyed.
"""

from __future__ import annotations

from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.envelope import kid_of
from agent_custody_state.ledger.model import AssertEvent
from agent_custody_state.ledger.shred import ShreddingBackend


def data_keys(backend: EventBackend, fact_id: str) -> tuple[str, tuple[bytes, ...], int]:
    """How ``fact_id``'s value is stored (``"crypto-shred"``: sealed under a data key;
    ``"plain"``: as it is, which a ledger in crypto-shred mode holds for values written before
    it took that mode, or by the original), when sealed its data keys, read before the forget
    destroys them so the certificate's byte scan can look for them in the key store's files,
    and how many of its keys the key store does not hold (another key store may: their
    destruction cannot be verified)."""
    if not isinstance(backend, ShreddingBackend):
        return "plain", (), 0
    events = backend.inner.events_for([fact_id])
    kids = {
        kid
        for e in events
        if isinstance(e, AssertEvent) and (kid := kid_of(e.fact.value)) is not None
    }
    if not kids:
        return "plain", (), 0
    found = backend.keys.get(kids)
    return "crypto-shred", tuple(found.values()), len(kids) - len(found)
