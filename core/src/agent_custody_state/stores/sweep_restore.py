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
where each fact is held. A put-back whose forget did not happen (the fact was held or forgotten
meanwhile, or the sweep stopped) is compensated (removed); a put-back of a fact some other call
erased meanwhile is removed too (``drop_erased_restore``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import Fact, ForgetEvent
from agent_custody_state.stores.mirror import (
    Restore,
    drop_erased_restore,
    first_live_ancestor,
    put_back,
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


async def settle_restores(
    ledger_get: Any,
    stores: StoreSet,
    uncovered: dict[str, Fact],
    restores: dict[str, Restore],
    forgotten: Iterable[ForgetEvent] | None,
) -> None:
    """After the ledger swept: compensate the put-backs whose head this sweep did not forget
    (``forgotten``: its forget events; None when the sweep failed and none is known), and remove
    those of facts erased meanwhile. ``ledger_get``: an awaitable ``Ledger.get``."""
    done = {e.fact_id for e in forgotten or () if "restored" in e.extra}
    for head, restore in restores.items():
        if not restore.external:
            continue
        fact = uncovered[head]
        if head not in done:
            await stores.compensate(fact, restore.external)
            continue
        await drop_erased_restore(stores, await ledger_get(fact.fact_id), restore)
