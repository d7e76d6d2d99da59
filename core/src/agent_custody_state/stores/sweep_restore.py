"""What a sweep makes current again, put back into the mirroring stores (``mirror``'s rule for
sweeps).

A sweep forgets every fact learned before a cutoff, but keeps the held ones, and a run of
retention windows sweeps each space at its own cutoff. So the head of a supersession chain may
be swept while a fact it superseded stays: held, in a space not swept (or kept longer), or
learned after the cutoff. That ancestor is current again in the ledger, and a mirroring store,
which dropped it when it was superseded, must hold it again, as after a retraction.

The plan is made before the ledger sweeps, from the facts the sweep will forget (every pass's,
so an ancestor swept by a later pass of the same sweep is not put back only to be removed): for
each swept head, the first ancestor up its ``supersedes`` links that is neither retracted, nor
swept, nor forgotten already. It is put back before the ledger appends the head's forget, and
the new store ids go on that forget event as its ``restored`` record (``Ledger.sweep``'s
``extras``), where ``Ledger.current_external`` finds them: the ledger stays the only record of
where each fact is held. Which put-backs were recorded is read back from the ledger after the
sweep (also when it failed part-way): one whose record is not there (the head was held,
forgotten or retracted meanwhile, the fact put back was retracted or forgotten meanwhile, or the
sweep stopped first) is compensated (removed); a put-back of a fact some other call erased
after it was recorded is removed too (``drop_erased_restore``).

A sweep its caller stopped (Ctrl-C, ``stop``) does not wait on the stores for this: they get
``STOPPED_SECONDS`` at most. A put-back not recorded and not removed by then is owed in the
outbox, for the next start to remove (``orphan_resume``: the store's copies of the fact the
ledger does not record), or, without an outbox, named in an ERROR with what to do; a recorded
one whose fact may still be superseded is named in an ERROR.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from typing import Any

import anyio

from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import Fact, ForgetEvent
from agent_custody_state.ledger.queries import RESTORED_KEY
from agent_custody_state.stores.mirror import (
    Restore,
    drop_erased_restore,
    first_live_ancestor,
    put_back,
    remove_put_back,
)
from agent_custody_state.stores.storeset import StoreSet

log = logging.getLogger(__name__)

#: How long a stopped sweep still tells the stores about its put-backs, at most.
STOPPED_SECONDS = 2.0

#: ``owe(fact, stores)``: record durably that ``stores`` hold a copy of ``fact`` the ledger
#: does not record (``Outbox.owe_puts``); False when there is no outbox to record it in.
Owe = Callable[[Fact, list[str]], Any]

NOT_TOLD = "not recorded by the sweep, which was stopped before the store removed it again; "


def uncovered_by_sweep(ledger: Ledger, passes: Iterable[tuple[str | None, Any]]) -> dict[str, Fact]:
    """Swept head's fact id -> the fact its forget makes current again (with its current
    external ids), for a sweep of ``passes`` (``(space, cutoff)``, as ``CustodySweep._cutoffs``)."""
    ledger.backend.refresh()
    swept: set[str] = set()
    for where, cutoff in passes:
        swept.update(e.fact_id for e in ledger.plan_sweep(cutoff, where).forget)
    uncovered: dict[str, Fact] = {}
    for fact_id in swept:
        fact = ledger.get(fact_id)
        if fact is None or fact.valid_to is not None or ledger.is_retracted(fact_id):
            continue  # superseded (its successor keeps the chain covered) or not current
        ancestor = first_live_ancestor(ledger, fact_id, swept)
        if ancestor is not None and ancestor.forgotten is None:  # a value to put back
            uncovered[fact_id] = ancestor
    return uncovered


async def put_back_all(stores: StoreSet, uncovered: dict[str, Fact]) -> dict[str, Restore]:
    """Each uncovered fact put back into the mirroring stores, by the swept head's fact id."""
    return {head: await put_back(stores, fact) for head, fact in uncovered.items()}


def restored_extras(restores: dict[str, Restore]) -> dict[str, dict[str, Any]]:
    """The ``restored`` record each swept head's forget event carries (puts that succeeded)."""
    return {head: r.record() for head, r in restores.items() if r.external}


def recorded_heads(ledger: Ledger, restores: dict[str, Restore]) -> set[str]:
    """The swept heads whose forget event records their put-back, ids and all, as the ledger
    has it now: read back, not taken from what the sweep returned, so a sweep that failed
    part-way keeps the put-backs it recorded, and a forget written by another call (with its
    own put-back) does not count as this sweep's."""
    ledger.backend.refresh()
    done: set[str] = set()
    for head, restore in restores.items():
        if not restore.external:
            continue
        record = restore.record()[RESTORED_KEY]
        for event in ledger.history(head):
            if (
                isinstance(event, ForgetEvent)
                and event.fact_id == head
                and event.extra.get(RESTORED_KEY) == record
            ):
                done.add(head)
    return done


async def settle_restores(
    ledger_get: Any,
    stores: StoreSet,
    uncovered: dict[str, Fact],
    restores: dict[str, Restore],
    recorded: set[str],
    *,
    stopped: bool = False,
    owe: Owe | None = None,
) -> None:
    """After the ledger swept: compensate the put-backs not ``recorded`` on their head's forget
    event (``recorded_heads``), and remove those of facts erased since or still superseded
    (a sweep stopped before forgetting a link between the head and the fact put back).
    ``ledger_get``: an awaitable ``Ledger.get``. ``stopped``: the caller stopped the sweep;
    the stores get ``STOPPED_SECONDS``, and ``owe`` (awaitable, see ``Owe``) keeps what they
    did not finish (the module docstring)."""
    done: set[str] = set()
    with anyio.move_on_after(STOPPED_SECONDS) if stopped else nullcontext():
        for head, restore in restores.items():
            if restore.external:
                await _settle_one(ledger_get, stores, uncovered[head], restore, head in recorded)
            done.add(head)
    for head, restore in restores.items():
        if head not in done and restore.external:
            await _left_by_stop(uncovered[head], restore, head in recorded, owe)


async def _settle_one(
    ledger_get: Any, stores: StoreSet, fact: Fact, restore: Restore, recorded: bool
) -> None:
    if not recorded:
        outcome = await stores.compensate(fact, restore.external)
        for name in restore.external:
            restore.failed[name] = (
                f"not recorded by the sweep; removed again: {outcome.get(name, 'unknown')}"
            )
        restore.external = {}
        return
    now = await ledger_get(fact.fact_id)
    if now is not None and now.forgotten is None and now.valid_to is not None:
        # A link between it and the swept head stayed (the sweep stopped before forgetting
        # it): the fact is not current, and a store must not recall it as if it were.
        await remove_put_back(stores, fact, restore, "still superseded after the sweep")
    else:
        await drop_erased_restore(stores, now, restore)


async def _left_by_stop(fact: Fact, restore: Restore, recorded: bool, owe: Owe | None) -> None:
    """A put-back the stores were not told about in time after a stop: kept for later."""
    names = sorted(restore.external)
    if recorded:
        log.error(
            "fact %s was put back into %s by a sweep that was stopped; if it is still "
            "superseded, sweep again or retract its successor to remove it there",
            fact.fact_id,
            ", ".join(names),
            extra={"fact": fact.fact_id},
        )
        return
    why = "no outbox is configured"
    try:
        if owe is not None and await owe(fact, names):
            why = ""
    except Exception as exc:
        why = f"recording it in the outbox failed: {exc}"
    for name in names:
        if why:
            log.error(
                "store %s holds a copy of fact %s put back by a sweep that was stopped, which "
                "the ledger does not record, and %s; delete its copies whose custody metadata "
                "has factId %s and no id the ledger records",
                name,
                fact.fact_id,
                why,
                fact.fact_id,
                extra={"store": name, "fact": fact.fact_id},
            )
        restore.failed[name] = NOT_TOLD + (
            f"not removed: {why}" if why else "owed in the outbox, removed at the next start"
        )
    restore.external = {}
