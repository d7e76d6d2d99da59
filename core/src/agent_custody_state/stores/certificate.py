"""The stores' part of an erasure certificate: each write-through store's removal, verified.

``Custody.forget(..., certificate=...)`` (and each fact of a sweep) has the ledger build and
sign its part (``ledger.certificate``), removes the fact from the stores, then adds one entry
per store that held it and signs again. An entry is ``{name, acknowledged, verification}``:
``acknowledged`` is whether the store's removal call returned, ``verification`` what
``StoreSet`` found afterwards (``verified``, ``stillIndexed``, ``unverified``, ``failed``), plus
``error`` when the removal failed. A store the ledger records as holding the fact but that is no
longer configured is listed as ``notConfigured``. Only ``verified`` counts towards a
``complete`` outcome: a store that timed out, acknowledged without removing, or answered "ok"
for an id it never had is named in ``incomplete``. Each store that held the fact adds its
residual windows (``residual``: its backups, old row versions, the embedding model's logs)
to the certificate's, naming itself; they do not make the outcome partial, as the ledger's
own do not. A flow whose forget committed but whose certificate could not be made has its
stores' part all the same (``stores_part``): the recovered certificate it settles its intent
with names what the flow found in each store (``intents.recovered``), not ``unknown``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from agent_custody_state.ledger.certificate import CertifiedForget, sign, with_stores
from agent_custody_state.stores.residual import Window, residual_of
from agent_custody_state.stores.storeset import RemovalReport
from agent_custody_state.timeutil import format_time, utc_now

if TYPE_CHECKING:
    from agent_custody_state.ledger.model import Fact
    from agent_custody_state.stores.reports import SweptFact

#: A fact's stores in its certificate: the entries (``store_entries``) and the stores' residual
#: windows (``store_windows``).
StoresPart = tuple[list[dict[str, Any]], list[dict[str, str]]]


def store_entries(report: RemovalReport, held_by: Collection[str]) -> list[dict[str, Any]]:
    """One entry per store in ``held_by`` (the stores the ledger says hold the fact)."""
    entries = []
    for name in held_by:
        verification = report.verification.get(name)
        entry: dict[str, Any] = {
            "name": name,
            "acknowledged": name in report.removed_from,
            "verification": verification or "notConfigured",
        }
        if name in report.still_held:
            entry["error"] = report.still_held[name]
        entries.append(entry)
    return entries


def store_windows(
    held_by: Collection[str], store_named: Callable[[str], object]
) -> list[dict[str, str]]:
    """The residual windows of every store in ``held_by``, each naming its store
    (``store_named``: the configured store of a name, or None)."""
    windows: list[Window] = []
    for name in held_by:
        windows += [{"store": name, **w} for w in residual_of(store_named(name))]
    return windows


def stores_part(
    report: RemovalReport, held_by: Collection[str], store_named: Callable[[str], object]
) -> StoresPart:
    """What the stores' removal of a fact adds to its certificate (``StoresPart``)."""
    return store_entries(report, held_by), store_windows(held_by, store_named)


def swept_parts(
    swept: Iterable[SweptFact], copies: Mapping[str, Fact], store_named: Callable[[str], object]
) -> dict[str, StoresPart]:
    """``stores_part`` of each fact of a sweep, its removal from the stores ``copies`` names
    (those that held it when the sweep listed it; none: held by no store)."""
    parts: dict[str, StoresPart] = {}
    for fact in swept:
        copy = copies.get(fact.event.fact_id)
        held_by = list(copy.external or {}) if copy is not None else []
        parts[fact.event.fact_id] = stores_part(fact.removal, held_by, store_named)
    return parts


def certify_removal(
    certified: CertifiedForget,
    report: RemovalReport,
    held_by: Collection[str],
    store_named: Callable[[str], object],
) -> dict[str, Any]:
    """The certificate of ``certified`` with the stores' removal, signed again."""
    now = format_time(utc_now())
    entries, windows = stores_part(report, held_by, store_named)
    predicate = with_stores(certified.predicate, entries, now, windows)
    return sign(predicate, certified.forgetting, certified.key)
