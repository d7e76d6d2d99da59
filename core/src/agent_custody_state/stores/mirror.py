"""Stores mirror the present (SPEC 6 improvement): what leaves and what returns to the stores.

The ledger keeps every version; a retrieval store should hold only what is believed now, or an
agent recalls a superseded value as if it were current. So, for every store that mirrors (all
but those configured ``mirror = false``):

- a write that supersedes X removes X from the stores after the ledger has appended
  (``Custody.write`` in ``flows``), verified like any removal;
- a retraction or forget of the head of a chain makes the fact it superseded current again; that
  fact is put back into the stores *before* the ledger appends the retraction, and its new
  external ids are recorded on that retract/forget event as
  ``"restored": {"factId": <fact>, "external": {<store>: <id>}}``. SPEC 1.2 keeps unknown keys,
  so the TypeScript implementation reads and writes such a ledger unchanged, and the ledger stays
  the only record of where each fact is held (:meth:`Ledger.current_external`).

Why put back before appending: the new ids must be on the event, and events are immutable. The
ledger still decides: a retraction it refuses compensates (removes) the puts. A store that fails
the put-back does not block the retraction (an undo must never be held hostage by a vendor);
the failure is reported and the fact is simply absent from that store: a copy the failed put
left all the same is looked up by the fact id and removed (``orphans``), and the outcome added
to the reported failure. A cleanup that cannot finish is logged (ERROR) but not put in the
outbox: the copy carries the id of a fact the ledger records, so a later forget's check by fact
id still reports it (``stillIndexed``) rather than missing it silently.

This module plans (which fact a retraction or forget uncovers) and puts back; ``flows`` runs
the whole retract/forget/supersede around it; ``sweep_restore`` does the same for the heads a
sweep forgets.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from agent_custody_state.ledger.envelope import kid_of
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import Fact, ForgetEvent, RetractEvent
from agent_custody_state.ledger.queries import RESTORED_KEY
from agent_custody_state.stores.base import error_message, refusal_of
from agent_custody_state.stores.orphans import clear_failed_put
from agent_custody_state.stores.storeset import RemovalReport, StoreSet
from agent_custody_state.stores.where import WHERE_KEY, locate, store_where, with_where

E = TypeVar("E", RetractEvent, ForgetEvent)

log = logging.getLogger(__name__)


@dataclass
class Restore:
    """A fact put back into the mirroring stores because it became current again."""

    fact_id: str
    external: dict[str, str] = field(default_factory=dict)  # store -> new id
    failed: dict[str, str] = field(default_factory=dict)  # store -> error message
    where: dict[str, str] = field(default_factory=dict)  # store -> its ``where`` (declared)

    def record(self) -> dict[str, Any]:
        """The extra key written on the retract/forget event (only the puts that succeeded),
        with each declaring store's ``where`` beside the ids (``where``)."""
        record: dict[str, Any] = {"factId": self.fact_id, "external": dict(self.external)}
        where = {k: v for k, v in self.where.items() if k in self.external}
        if where:
            record[WHERE_KEY] = where
        return {RESTORED_KEY: record}

    def to_dict(self) -> dict[str, Any]:
        """The wire shape reported in tool results."""
        return {
            "factId": self.fact_id,
            "external": dict(self.external),
            "failed": dict(self.failed),
        }


#: Why a fact whose value this process reads sealed is not put back into a store.
SEALED_PUT_BACK = (
    "its value is sealed by crypto-shred mode and this process reads the ledger in plain mode: "
    "not put back (a store would get the envelope, not the value); open the ledger in "
    'crypto-shred mode (forget_mode = "crypto-shred") to put it back'
)


@dataclass
class Removal(Generic[E]):
    """What a retraction or forget did: the event, the removal from the stores, any restore;
    ``held_by``: the stores that held the fact; ``certificate``: a forget's signed erasure
    certificate, when one was asked for."""

    event: E
    removal: RemovalReport
    restored: Restore | None = None
    held_by: list[str] = field(default_factory=list)
    certificate: dict[str, Any] | None = None


def current_fact(ledger: Ledger, fact_id: str) -> Fact | None:
    """The fact with ``external`` set to where the stores hold it now (restores included),
    and the places recorded for those copies (``where``)."""
    fact = ledger.get(fact_id)
    if fact is None:
        return None
    return locate(ledger, fact, ledger.current_external(fact_id))


def _made_current_by_leaving(ledger: Ledger, fact: Fact) -> Fact | None:
    """The fact that becomes current if ``fact`` (current now) leaves the present, if any.

    Only the head of a chain uncovers anything: walk up ``supersedes`` past retracted links to
    the first live ancestor. Rule 2.1.2 guarantees ``fact`` is that ancestor's only live
    superseder, so once ``fact`` is retracted the ancestor has none (SPEC 2.2 step 4).
    """
    if fact.valid_to is not None:  # superseded itself: its successor keeps the chain covered
        return None
    return first_live_ancestor(ledger, fact.fact_id)


def first_live_ancestor(ledger: Ledger, fact_id: str, leaving: Collection[str] = ()) -> Fact | None:
    """Up the ``supersedes`` links from ``fact_id``: the first fact neither retracted nor
    ``leaving`` (facts leaving the present with it: a sweep's), as ``current_fact`` gives it."""
    event = ledger.backend.get_assert(fact_id)
    parent = event.supersedes if event is not None else None
    seen: set[str] = set()
    while parent is not None and parent not in seen:
        seen.add(parent)
        if parent not in leaving and not ledger.is_retracted(parent):
            return current_fact(ledger, parent)
        above = ledger.backend.get_assert(parent)
        parent = above.supersedes if above is not None else None
    return None


@dataclass
class LeavingPlan:
    fact: Fact | None  # the fact leaving, with its value and current external ids
    uncovers: Fact | None  # what becomes current again


def plan_leaving(ledger: Ledger, fact_id: str, *, forgetting: bool) -> LeavingPlan:
    ledger.backend.refresh()
    fact = current_fact(ledger, fact_id)
    if fact is None or ledger.is_retracted(fact_id):
        return LeavingPlan(
            fact, None
        )  # the ledger refuses (retract) or nothing is uncovered (forget)
    if forgetting and ledger.held(fact_id):
        return LeavingPlan(fact, None)  # the ledger will refuse; put nothing back
    return LeavingPlan(fact, _made_current_by_leaving(ledger, fact))


async def put_back(stores: StoreSet, fact: Fact) -> Restore:
    restore = Restore(fact.fact_id)
    clean = with_where(fact.with_(external=None, valid_to=None), {})
    if kid_of(fact.value) is not None:  # sealed: this process reads a crypto-shred ledger plain
        for store in stores.mirroring():
            restore.failed[store.name] = SEALED_PUT_BACK
        if restore.failed:
            log.error(
                "fact %s is current again but not put back: %s", fact.fact_id, SEALED_PUT_BACK
            )
        return restore
    for store in stores.mirroring():
        reason = await refusal_of(store, clean)  # a store that cannot hold it is not asked to
        if reason is not None:
            log.error(
                "fact %s is current again but %s cannot hold it (absent there): %s",
                fact.fact_id,
                store.name,
                reason,
                extra={"store": store.name, "fact": fact.fact_id},
            )
            restore.failed[store.name] = reason
            continue
        try:
            external_id = await store.put(clean)
            if not isinstance(external_id, str) or not external_id:
                raise ValueError(f"put returned {external_id!r}, not an id")
        except Exception as exc:
            log.error(
                "putting fact %s back into %s failed (it is current again, but absent there): %s",
                fact.fact_id,
                store.name,
                error_message(exc, fact),
                extra={"store": store.name, "fact": fact.fact_id},
            )
            leftover = await clear_failed_put(store, clean, stores.check_removed)
            restore.failed[store.name] = f"{error_message(exc, fact)}; {leftover.outcome}"
            continue
        restore.external[store.name] = external_id
        if (where := store_where(store)) is not None:
            restore.where[store.name] = where
    return restore


def left_meanwhile(ledger: Ledger, fact_id: str) -> tuple[Fact | None, str | None]:
    """The fact a retraction put back, as the ledger has it after the retraction's append, and
    why its copies must go again when it left the present in between (a concurrent forget,
    sweep or retraction: that call's removal ran before these ids were recorded); else None."""
    fact = ledger.get(fact_id)
    if fact is None:
        return None, None
    if fact.forgotten is not None:
        return fact, "forgotten meanwhile"
    return fact, "retracted meanwhile" if ledger.is_retracted(fact_id) else None


def restored_meanwhile(ledger: Ledger, fact: Fact) -> dict[str, str]:
    """Ids the ledger records for ``fact`` now that ``fact.external`` (read earlier) lacks: a
    retraction put it back and recorded them in between; the copies must leave with it."""
    known = fact.external or {}
    return {k: v for k, v in ledger.current_external(fact.fact_id).items() if known.get(k) != v}


async def drop_erased_restore(stores: StoreSet, erased: Fact | None, restore: Restore) -> None:
    """Remove the copies put back of a fact a concurrent forget or sweep erased between the
    put-back and the retraction's append (``erased``: the fact as the ledger has it now, the
    value taken before the put-back in ``restore``'s fact). That forget's removal ran before
    these ids were recorded, so nothing else would ever remove them: the erased value would
    stay in the stores."""
    if erased is None or erased.forgotten is None or not restore.external:
        return
    await remove_put_back(stores, erased, restore, "forgotten meanwhile")


async def remove_put_back(stores: StoreSet, fact: Fact, restore: Restore, why: str) -> None:
    """Remove the copies ``restore`` put back of ``fact``, and record each store's outcome in
    ``restore.failed`` with ``why`` it was removed again."""
    log.warning(
        "fact %s: %s; removing the copies put back", fact.fact_id, why, extra={"fact": fact.fact_id}
    )
    copies = with_where(fact.with_(external=dict(restore.external)), restore.where)
    report = await stores.remove_all(copies, only=list(restore.external))
    for name in restore.external:
        outcome = report.still_held.get(name) or report.verification.get(name, "unverified")
        restore.failed[name] = f"{why}; the copy put back was removed: {outcome}"
