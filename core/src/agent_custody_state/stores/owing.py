"""The outbox's part of the flows (``flows``, ``sweeping``): the removals a retract, forget or
sweep owes the stores recorded before the ledger changes and settled once tried, the cleanups
a failed write or a stopped sweep's put-back leaves owed, for ``resume`` at the next start
(``outbox``, ``orphan_resume``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import Fact
from agent_custody_state.stores.base import error_message
from agent_custody_state.stores.outbox import Operation, Outbox, Owed
from agent_custody_state.stores.storeset import RemovalReport, StoreWriteError

log = logging.getLogger(__name__)


class Owing:
    """What ``Custody`` owes the stores, kept in its outbox when it has one."""

    ledger: Ledger
    run: Any
    #: owed store removals, kept across a crash (``stores.outbox``); None: not kept
    outbox: Outbox | None

    async def _owe(self, fact: Fact | None, operation: Operation) -> list[Owed]:
        """Record the removals ``fact`` will be owed, before the ledger changes."""
        if self.outbox is None or fact is None or not fact.external:
            return []
        owed: list[Owed] = await self.run(self.outbox.owe, [fact], operation, self.ledger.now())
        return owed

    def _release(self, owed: Iterable[Owed]) -> None:
        """A flow that ends unfinished (an error, a stop, a cancel): its entries stay owed but
        are no longer in flight here, so a later ``resume`` in this process finishes them too
        (in flight, it left them to a writer that had given up)."""
        if self.outbox is not None:
            self.outbox.leave(owed)

    async def _owe_cleanup(self, fact: Fact, exc: StoreWriteError) -> None:
        """Record the cleanups a failed write left unfinished (``StoreWriteError.owed``), so
        ``resume`` retries them; without an outbox, an ERROR for the operator. Never raises
        over the write's own error."""
        if not exc.owed:
            return
        why = "no outbox is configured"
        if self.outbox is not None:
            try:
                await self.run(self.outbox.owe_puts, fact, exc.owed, self.ledger.now())
            except Exception as error:
                why = f"recording it in the outbox failed: {error_message(error)}"
            else:
                for name in exc.owed:
                    exc.compensation[name] += "; owed in the outbox, retried by the next resume"
                return
        for name in exc.owed:
            log.error(
                "store %s may still hold a copy of fact %s left by its failed put, and %s; "
                "delete its copies whose custody metadata has factId %s",
                name,
                fact.fact_id,
                why,
                fact.fact_id,
                extra={"store": name, "fact": fact.fact_id},
            )

    async def _settle(self, owed: list[Owed], report: RemovalReport | None = None) -> None:
        """The removals were tried and reported (``report``): settle the entries of the stores
        asked, a failed removal's included (reported in ``stillHeld``). The others stay owed,
        released for ``resume``: a store not configured here, never asked (a process with it
        configured finishes it), and a copy left where its store no longer writes (``where``:
        a store configured at that place finishes it). Without ``report`` (the ledger refused
        the change) nothing is owed: every entry is settled."""
        if self.outbox is None or not owed:
            return
        kept = [o for o in owed if report is not None and not _asked(o.store, report)]
        await self.run(self.outbox.settle, [o for o in owed if o not in kept])
        self.outbox.leave(kept)

    async def _owe_put(self, fact: Fact, names: list[str]) -> bool:
        """Owe in the outbox the removal of copies of ``fact`` the ledger does not record
        (``Outbox.owe_puts``); False without an outbox."""
        if self.outbox is None:
            return False
        await self.run(self.outbox.owe_puts, fact, names, self.ledger.now())
        return True


def _asked(store: str, report: RemovalReport) -> bool:
    """Whether ``remove_all`` asked ``store`` to remove its copy: it has a verification then,
    ``failed`` for a removal that raised; a store not configured here has none, and a moved
    one was not asked at its new place."""
    return store in report.verification and store not in report.moved
