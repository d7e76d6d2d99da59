"""The world of the sweep put-back tests (``test_sweep_putback``, ``test_review4_sweep``): an
in-memory ledger on a clock the test moves, the builtin in-memory reference store mirroring it
(its vendor rows read directly) and, when asked, an append-only store beside it, moved by the
custody flows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agent_custody_state import Ledger
from agent_custody_state.ledger.model import AssertEvent
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.reports import SweepReport

OLD, NEW = datetime(2020, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC)
CUTOFF = "2021-01-01T00:00:00.000Z"


class SweepWorld:
    """Writes at ``OLD``; ``sweep`` moves the clock to ``NEW`` and sweeps before ``CUTOFF``."""

    def __init__(self, run: Any = None, *, with_log: bool = False, **ledger_args: Any) -> None:
        self.clock = [OLD]
        self.ledger = Ledger("memory:", clock=lambda: self.clock[0], **ledger_args)
        self.mirror = InProcessStore("mirror")
        self.log = InProcessStore("log")
        stores = [self.mirror, self.log] if with_log else [self.mirror]
        append_only = {"log"} if with_log else set()
        self.stores = StoreSet(stores, VerifyPolicy(attempts=2, delay=0), append_only=append_only)
        self.custody = Custody(self.ledger, self.stores, **({"run": run} if run else {}))

    async def write(
        self, value: Any, supersedes: str | None = None, space: str = "org"
    ) -> AssertEvent:
        request = AssertRequest(
            subject="acct:42", predicate="plan", value=value, space=space, actor="agent",
            supersedes=supersedes,
        )  # fmt: skip
        return (await self.custody.write(request)).event

    def rows(self) -> dict[str, tuple[str, Any]]:
        """The mirror's rows: store id -> (fact id, value)."""
        return {
            k: (r["metadata"]["factId"], r["value"]) for k, r in self.mirror.vendor.rows.items()
        }

    def mirrored(self) -> dict[str, Any]:
        return {fact: value for fact, value in self.rows().values()}

    async def sweep(self, **kwargs: Any) -> SweepReport:
        self.clock[0] = NEW
        kwargs.setdefault("before", CUTOFF)
        return await self.custody.sweep(actor="dpo", reason="retention", **kwargs)
