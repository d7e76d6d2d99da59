"""Finishing, at the next start, the cleanups failed writes left owed in the outbox.

``Custody.write`` records an outbox entry (operation ``put``) when a store's put raised and the
copy it may have kept could not be looked up or removed (``orphans``). ``resume`` (run by the
server and ``sweep`` at start) hands those entries here: the store is asked again for its copies
of the fact (``held_ids``), each is removed, and the entry settles once the store is known to
hold none the ledger does not record. The entry stays (and is logged) when the store is not
configured here, now writes elsewhere than when the put failed (``where``), has no
``held_ids`` any more, or fails again.

A put the store did not see answered may still land at the vendor after the process that sent
it ended, and a fresh store cannot know of it: an empty lookup then is no promise. A store that
declares ``settle_seconds`` (``base.Store``) keeps its entry owed until that long after the
entry was written (its ``at``, by the ledger's clock: after the put was sent, so the wait is
never shorter): the lookup still runs and removes what it finds, but the entry settles only at
a ``resume`` after that time (the next start, or a server's next pass: ``resume_every``).

The ledger never recorded the failed write, so the fact is usually unknown to it: the lookup
gets a fact carrying only the id and space (``held_ids`` must need no more), and the removal is
verified only by stores whose check needs no value (``verify_without_value``). When the ledger
does hold the fact (the same fact id was written again, successfully), the ids it records for
the store are kept: those copies are the ledger's, not the failed put's.
"""

from __future__ import annotations

import logging

from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import Fact
from agent_custody_state.stores.base import Store, settle_seconds_of, verifies_without_value
from agent_custody_state.stores.orphans import NO_LOOKUP, Check, clear_failed_put
from agent_custody_state.stores.outbox import Outbox, Owed, Resumed, Run
from agent_custody_state.stores.storeset import RemovalReport, StoreSet
from agent_custody_state.stores.where import store_where
from agent_custody_state.timeutil import TimeFormatError, parse_time

log = logging.getLogger(__name__)


def _lookup(ledger: Ledger, owed: Owed) -> tuple[Fact, tuple[str, ...]]:
    """The fact to look copies up by, and the ids the ledger records for the store."""
    known = ledger.get(owed.fact_id)
    if known is not None:
        kept = ledger.current_external(owed.fact_id).get(owed.store)
        return known, (kept,) if kept else ()
    husk = Fact(owed.fact_id, "", "", None, owed.space or "", "", valid_from=owed.at)
    return husk, ()


async def resume_failed_puts(
    outbox: Outbox, ledger: Ledger, stores: StoreSet, run: Run, done: Resumed
) -> None:
    """Retry every cleanup a failed write left owed; report into ``done``."""
    for owed in await run(outbox.pending):
        if owed.operation != "put":
            continue
        store = stores.by_name(owed.store)
        if store is None:
            why = f"store {owed.store} is not configured here; it may hold a copy of the fact"
            log.error("outbox: fact %s: %s", owed.fact_id, why, extra={"fact": owed.fact_id})
            done.left[owed.entry] = why
            continue
        if owed.where is not None and store_where(store) != owed.where:
            now = store_where(store) or "a place it does not name"
            why = (
                f"store {owed.store} now writes to {now}; the copy its failed put may have left "
                f"is at {owed.where}: configure a store named {owed.store} for it to look it up"
            )
            log.error("outbox: fact %s: %s", owed.fact_id, why, extra={"fact": owed.fact_id})
            done.left[owed.entry] = why
            continue
        wait = _still_landing(ledger, store, owed)
        fact, keep = await run(_lookup, ledger, owed)
        leftover = await clear_failed_put(store, fact, _checker(stores, store, fact), keep=keep)
        if leftover.owed or leftover.outcome == NO_LOOKUP:
            done.left[owed.entry] = f"{owed.store}: {leftover.outcome}"
            continue
        if leftover.removed:
            report = done.finished.setdefault(owed.fact_id, RemovalReport())
            report.removed_from.append(owed.store)
            report.verification[owed.store] = leftover.verification or "unverified"
        log.warning(
            "outbox: the failed write of fact %s: %s: %s",
            owed.fact_id,
            owed.store,
            leftover.outcome,
            extra={"store": owed.store, "fact": owed.fact_id},
        )
        if wait is not None:
            why = (
                f"{owed.store}: {leftover.outcome}, but the put it did not see answered may "
                f"still land for {wait:.0f}s more (its settle_seconds after {owed.at}): "
                "looked up again by a resume after that"
            )
            log.warning("outbox: fact %s: %s", owed.fact_id, why, extra={"fact": owed.fact_id})
            done.left[owed.entry] = why
            continue
        await run(outbox.settle, [owed])


def _still_landing(ledger: Ledger, store: Store, owed: Owed) -> float | None:
    """The seconds the put ``owed`` is for may still land (``Store.settle_seconds`` after the
    entry's ``at``, by the ledger's clock), while it may; None once it cannot, or when the
    store does not say. An entry whose time cannot be read (edited by hand) is not waited for."""
    wait = settle_seconds_of(store)
    if wait <= 0:
        return None
    try:
        age = (parse_time(ledger.now()) - parse_time(owed.at)).total_seconds()
    except TimeFormatError:
        return None
    return wait - age if age < wait else None


def _checker(stores: StoreSet, store: Store, fact: Fact) -> Check | None:
    """Verify only where the check can work with what is known (the value may be absent)."""
    has_value = bool(fact.subject) and fact.forgotten is None
    return stores.check_removed if has_value or verifies_without_value(store) else None
