"""Settling a crypto-shred ledger's data keys after a crash, a failed section or a restore.

``doomed_keys_settled``: the keys a forget doomed but did not destroy (a crash between its
commit and the destruction) are destroyed when their fact is forgotten, spared when its forget
did not commit. ``restored_keys_destroyed``: keys a restored key store holds again of facts the
ledger records forgotten are destroyed again. ``ShreddingBackend`` (``shred``) calls both.
"""

from __future__ import annotations

from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.keystore import KeyStore
from agent_custody_state.ledger.model import AssertEvent
from agent_custody_state.ledger.shredreads import (
    forgotten_among,
    restored_keys,
    sealing_live,
    without_live,
)


def doomed_keys_settled(inner: EventBackend, keys: KeyStore) -> list[str]:
    """Settle what a crash (or a failed section) left between a forget and its key's
    destruction; returns what was done (for ``repair``). One read when nothing is pending.
    A read-only open (``readonly``) leaves it to the next writer: it may not write. A doomed
    key whose fact this ledger does not hold is left alone: with a key store shared by two
    ledgers it is the other's, whose forget may still be under way (destroying it here lost
    a live fact's value when that forget then failed).
    """
    if inner.read_only or not keys.doomed():
        return []
    done: list[str] = []
    with inner.transaction():  # no forget of another process is half-way now
        kill: list[str] = []
        spare: list[str] = []
        for kid, fact_id in keys.doomed().items():
            asserts = [e for e in inner.events_for([fact_id]) if isinstance(e, AssertEvent)]
            if not asserts:  # another ledger's fact (a shared key store): its own to settle
                continue
            live = any(a.fact.forgotten is None for a in asserts)
            (spare if live else kill).append(kid)
        if kill:
            keys.destroy(kill)
            done.append(f"destroyed {len(kill)} key(s) of forgotten facts")
        if spare:
            keys.spare(spare)
            done.append(f"kept {len(spare)} key(s) of facts whose forget did not commit")
    return done


def restored_keys_destroyed(
    inner: EventBackend, keys: KeyStore, *, dry_run: bool = False
) -> dict[str, list[str]]:
    """Destroy the data keys ``keys`` holds again of facts ``inner`` records forgotten (a key
    store restored from before their forgets, found by its erasure log:
    ``shredreads.restored_keys``); returns them by fact id. It reads the whole erasure log, so
    no open does it."""
    found = restored_keys(keys, forgotten_among(inner, keys.buried()))
    found = without_live(found, sealing_live(inner, {k for ks in found.values() for k in ks}))
    if found and not dry_run:
        keys.destroy([k for kids in found.values() for k in kids])
        keys.compact()
    return found
