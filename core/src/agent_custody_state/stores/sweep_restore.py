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
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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
) -> None:
    """After the ledger swept: compensate the put-backs not ``recorded`` on their head's forget
    event (``recorded_heads``), and remove those of facts erased since or still superseded
    (a sweep stopped before forgetting a link between the head and the fact put back).
    ``ledger_get``: an awaitable ``Ledger.get``."""
    for head, restore in restores.items():
        if not restore.external:
            continue
        fact = uncovered[head]
        if head not in recorded:
            outcome = await stores.compensate(fact, restore.external)
            for name in restore.external:
                restore.failed[name] = (
                    f"not recorded by the sweep; removed again: {outcome.get(name, 'unknown')}"
                )
            restore.external = {}
            continue
        now = await ledger_get(fact.fact_id)
        if now is not None and now.forgotten is None and now.valid_to is not None:
            # A link between it and the swept head stayed (the sweep stopped before forgetting
            # it): the fact is not current, and a store must not recall it as if it were.
            await remove_put_back(stores, fact, restore, "still superseded after the sweep")
        else:
            await drop_erased_restore(stores, now, restore)
