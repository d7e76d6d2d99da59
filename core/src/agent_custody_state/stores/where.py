"""Where each copy went: a store's ``where``, recorded with the fact, checked before removal.

A store's location settings can change after facts were written through it (a Zep graph, a
Letta agent, a pgvector table, a mem0 user, a LangGraph namespace, a Cognee dataset, a base
URL). Removal and verification then look only at the new place: the old copy reads as gone,
and a forget would report ``verified`` while the erased value is still served from the old
place. So a store may declare ``where`` (``base.Store``): a short, stable, secret-free text
naming the container its copies go into. Then:

- ``Custody.write`` records each declaring store's ``where`` on the fact, as the fact key
  ``externalWhere: {<store>: <where>}`` beside ``external`` (SPEC 1.2 keeps unknown keys: the
  TypeScript original reads and writes such a ledger unchanged); a put-back records it beside
  the new ids in the event's ``restored`` record, and an outbox entry beside the external id;
- before a removal or a check (``StoreSet.remove_all``), a recorded ``where`` that differs from
  the store's current one stops it: nothing is removed or checked at the new place (a remove
  there could even delete an unrelated item with the same id), the store is reported ``failed``
  with an error naming both places, and the forget is ``partial``. Its outbox entry stays owed,
  so a store configured for the old place finishes the removal at the next start.

A fact with no recorded ``where`` (an older ledger, the original's, a store that declares none)
is removed and checked as before.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import Fact
from agent_custody_state.ledger.queries import put_backs
from agent_custody_state.stores.base import Store, error_message

log = logging.getLogger(__name__)

#: The fact key (and ``restored`` record key) naming where each store's copy went.
WHERE_KEY = "externalWhere"
#: Stores whose ``where`` was found not to be a text (warned once each).
_ODD: set[str] = set()


def store_where(store: Store | None) -> str | None:
    """The store's declared ``where`` (a non-empty text), else None. A ``where`` that raises
    (a property with a bug) names no place, and is logged: it is read after a forget's commit
    (``moved``), where an exception would stop every store's removal, and after a put, where it
    would leave copies no ledger records. A copy recorded at a place then reads as moved. One
    that is not a non-empty text (a URL object: its text may differ between processes) names no
    place either, warned once per store."""
    if store is None:
        return None
    try:
        where = getattr(store, "where", None)
    except Exception as exc:
        log.error(
            "store %s: its where raised (%s); it is taken to name no place",
            getattr(store, "name", "?"),
            error_message(exc),
            extra={"store": getattr(store, "name", "?")},
        )
        return None
    if isinstance(where, str) and where:
        return str(where)
    if where is not None and store.name not in _ODD:  # once per store: it is read per fact
        _ODD.add(store.name)
        what = "an empty text" if where == "" else f"a {type(where).__name__} value, not a text"
        log.warning(
            "store %s: its where is %s; its copies are recorded without a place",
            store.name,
            what,
            extra={"store": store.name},
        )
    return None


def wheres(stores: Iterable[Store], names: Iterable[str] | None = None) -> dict[str, str]:
    """Store name -> ``where`` of each declaring store (only those ``names``, if given)."""
    keep = None if names is None else set(names)
    out = {}
    for store in stores:
        where = store_where(store)
        if where is not None and (keep is None or store.name in keep):
            out[store.name] = where
    return out


def _text_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str) and v}


def recorded(fact: Fact) -> dict[str, str]:
    """Where the fact's copies went, as recorded with it ({} when nothing is recorded)."""
    return _text_map(fact.extra.get(WHERE_KEY))


def with_where(fact: Fact, where: Mapping[str, str]) -> Fact:
    """``fact`` with ``where`` as its recorded places (none: the key left out)."""
    extra = {k: v for k, v in fact.extra.items() if k != WHERE_KEY}
    if where:
        extra[WHERE_KEY] = dict(where)
    return fact.with_(extra=extra)


def moved(store: Store, fact: Fact) -> str | None:
    """Why ``store`` must not remove or check ``fact``'s copy where it writes now: the copy
    was recorded at another place. None when it may (same place, or nothing recorded)."""
    was = recorded(fact).get(store.name)
    if was is None:
        return None
    now = store_where(store)
    if now == was:
        return None
    external_id = (fact.external or {}).get(store.name)
    return (
        f"the copy (id {external_id}) was written to {was}; store {store.name} now writes to "
        f"{now or 'a place it does not name'}, so it was neither removed nor checked there: "
        f"configure a store named {store.name} for {was} to remove it"
    )


def current_where(backend: EventBackend, fact_id: str) -> dict[str, str]:
    """Where the fact's copies are now: its assert's record, updated by later ``restored``
    records (as ``queries.current_external`` updates the ids)."""
    event, records = put_backs(backend, fact_id)
    where = recorded(event.fact) if event is not None else {}
    for restored in records:
        places = _text_map(restored.get(WHERE_KEY))
        for name in _text_map(restored.get("external")):  # a put-back's id: its place replaces
            where.pop(name, None)  # the recorded one (recorded, or unknown)
            if name in places:
                where[name] = places[name]
    return where


def locate(ledger: Ledger, fact: Fact, external: Mapping[str, str] | None) -> Fact:
    """``fact`` with ``external`` as its ids and the places the ledger records for them."""
    located = fact.with_(external=dict(external) if external else None)
    return with_where(located, current_where(ledger.backend, fact.fact_id))
