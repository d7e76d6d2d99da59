"""Custody with stores: the ledger and its write-through stores, moved together (SPEC 4.2, 6).

The one home of every flow that crosses the ledger and the stores. The MCP server and the command
line only translate arguments in and these reports out; a Python program gets the same behaviour
with ``Custody(ledger, stores)`` and ``await custody.write(...)``.

- **write**: validate, put into every store in configuration order, append with the stores' ids;
  a store that fails, or a ledger that refuses at append time (another writer got there first),
  compensates the puts already made. A write that supersedes then removes the old value from the
  mirroring stores.
- **retract / forget**: the ledger first, then removal from each store holding the fact, verified;
  what the retraction makes current again is put back first (``mirror``).
- **sweep**: the ledger forgets what is older than ``before`` (or each space's retention window),
  then each forgotten fact leaves the stores. ``plan_sweep`` answers what a sweep would do,
  changing nothing (``sweep --dry-run``).

Each flow runs shielded from cancellation: a caller that hangs up between the ledger and the
stores must not leave the two disagreeing. Ledger calls go through ``run`` (the server passes its
ledger thread's ``run``; the default calls inline) and asserts through ``append`` (the server
passes its group-commit queue).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import anyio

from agent_custody_state.ledger.arguments import new_id
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.ledger import Ledger, Precondition
from agent_custody_state.ledger.model import AssertEvent, Fact, ForgetEvent, RetractEvent
from agent_custody_state.ledger.requests import AssertRequest, TimeLike
from agent_custody_state.ledger.retention import RetentionPolicy
from agent_custody_state.stores.base import Store
from agent_custody_state.stores.mirror import (
    E,
    Removal,
    Restore,
    current_fact,
    plan_leaving,
    put_back,
)
from agent_custody_state.stores.reports import (
    SweepPreview,
    SweepReport,
    SweptFact,
    WriteReport,
)
from agent_custody_state.stores.storeset import (
    RemovalReport,
    StoreSet,
    VerifyPolicy,
    describe_compensation,
)
from agent_custody_state.timeutil import format_time, parse_time

T = TypeVar("T")
Runner = Callable[..., Awaitable[Any]]
Append = Callable[[AssertRequest], Awaitable[AssertEvent]]
#: ``progress(stage, done, total)``: ``stage`` is ``"ledger"`` (forgetting) or ``"stores"``
#: (removing from the stores); a command line draws its progress bar from it.
SweepProgress = Callable[[str, int, int], None]

SWEEP_NEEDS_BEFORE = "sweep needs `before`, or a server started with retention windows"

log = logging.getLogger(__name__)

__all__ = [
    "SWEEP_NEEDS_BEFORE",
    "Custody",
    "Removal",
    "Restore",
    "SweepPreview",
    "SweepProgress",
    "SweepReport",
    "SweptFact",
    "WriteReport",
]


async def run_inline(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """The default ``run``: call the ledger on the caller's thread."""
    return fn(*args, **kwargs)


class Custody:
    """A ledger and its write-through stores, moved together by the flows above."""

    def __init__(
        self,
        ledger: Ledger,
        stores: StoreSet | Sequence[Store] = (),
        *,
        retention: RetentionPolicy | None = None,
        verify: VerifyPolicy | None = None,
        run: Runner = run_inline,
        append: Append | None = None,
    ) -> None:
        self.ledger = ledger
        self.stores = stores if isinstance(stores, StoreSet) else StoreSet(list(stores), verify)
        self.retention = retention
        self.run = run
        self._append = append or (lambda request: run(ledger.assert_fact, request))

    # -- write ---------------------------------------------------------------------------------

    async def write(
        self, request: AssertRequest, *, precondition: Precondition | None = None
    ) -> WriteReport:
        """Assert through the stores (see the module docstring); raises ``LedgerError`` or
        ``StoreWriteError`` with nothing appended and every put compensated.
        ``precondition``: the caller's condition on the superseded fact (``Ledger.assert_fact``)."""
        with anyio.CancelScope(shield=True):
            report = await self._write(request, precondition)
        return report

    async def _write(
        self, request: AssertRequest, precondition: Precondition | None
    ) -> WriteReport:
        if not self.stores:
            return WriteReport(await self._append_checked(request, precondition))
        # The stores record the fact id and validFrom before the ledger appends: fix both now.
        request = request.with_(
            fact_id=request.fact_id or new_id(), valid_from=request.valid_from or self.ledger.now()
        )
        planned: AssertEvent = await self.run(self.ledger.validate_assert, request)
        fact = planned.fact
        external = await self.stores.put_all(fact)
        try:
            event = await self._append_checked(request.with_(external=external), precondition)
        except LedgerError as exc:
            log.warning(
                "the ledger refused fact %s after the stores took it (%s); compensating",
                fact.fact_id,
                exc.code or "refused",
                extra={"fact": fact.fact_id},
            )
            outcome = await self.stores.compensate(fact, external)
            raise LedgerError(
                f"{exc}; compensated: {describe_compensation(outcome)}",
                field=exc.field,
                code=exc.code,
            ) from exc
        return WriteReport(event, await self._leave_mirrors(event))

    async def _append_checked(
        self, request: AssertRequest, precondition: Precondition | None
    ) -> AssertEvent:
        if precondition is None:
            return await self._append(request)
        # A caller's condition belongs to its own write section, not to a group-commit batch.
        event: AssertEvent = await self.run(
            self.ledger.assert_fact, request, precondition=precondition
        )
        return event

    async def _leave_mirrors(self, event: AssertEvent) -> RemovalReport | None:
        """The fact ``event`` superseded leaves the mirroring stores."""
        mirroring = [s.name for s in self.stores.mirroring()]
        if event.supersedes is None or not mirroring:
            return None
        old: Fact | None = await self.run(current_fact, self.ledger, event.supersedes)
        if old is None or not old.external:
            return RemovalReport()
        return await self.stores.remove_all(old, only=mirroring)

    # -- retract, forget -------------------------------------------------------------------------

    async def retract(
        self,
        *,
        fact_id: str,
        actor: str,
        reason: str,
        receipt_id: str | None = None,
        precondition: Precondition | None = None,
    ) -> Removal[RetractEvent]:
        """Retract in the ledger and remove from every store holding the fact; put back what
        the retraction makes current again, recording its new ids on the event.
        ``precondition``: the caller's condition on the fact (``Ledger.retract``)."""

        def mutate(extra: dict[str, Any] | None) -> RetractEvent:
            return self.ledger.retract(
                fact_id=fact_id,
                actor=actor,
                reason=reason,
                receipt_id=receipt_id,
                extra=extra,
                precondition=precondition,
            )

        return await self._leave_present(fact_id, mutate, forgetting=False)

    async def forget(
        self,
        *,
        fact_id: str,
        actor: str,
        reason: str,
        receipt_id: str | None = None,
        keep_digest: bool = True,
        precondition: Precondition | None = None,
    ) -> Removal[ForgetEvent]:
        """Forget in the ledger, then remove from every store: the removal and its check use
        the value taken before the erasure (the ledger no longer has it).
        ``precondition``: as for ``retract``."""

        def mutate(extra: dict[str, Any] | None) -> ForgetEvent:
            return self.ledger.forget(
                fact_id=fact_id,
                actor=actor,
                reason=reason,
                receipt_id=receipt_id,
                keep_digest=keep_digest,
                extra=extra,
                precondition=precondition,
            )

        return await self._leave_present(fact_id, mutate, forgetting=True)

    async def _leave_present(
        self, fact_id: str, mutate: Callable[[dict[str, Any] | None], E], *, forgetting: bool
    ) -> Removal[E]:
        with anyio.CancelScope(shield=True):
            removal = await self._leave(fact_id, mutate, forgetting=forgetting)
        return removal

    async def _leave(
        self, fact_id: str, mutate: Callable[[dict[str, Any] | None], E], *, forgetting: bool
    ) -> Removal[E]:
        if not self.stores:
            return Removal(await self.run(mutate, None), RemovalReport())
        plan = await self.run(plan_leaving, self.ledger, fact_id, forgetting=forgetting)
        restore: Restore | None = None
        if plan.uncovers is not None and self.stores.mirroring():
            restore = await put_back(self.stores, plan.uncovers)
        extra = restore.record() if restore is not None and restore.external else None
        try:
            event = await self.run(mutate, extra)
        except BaseException:
            if restore is not None and restore.external and plan.uncovers is not None:
                await self.stores.compensate(plan.uncovers, restore.external)
            raise
        if plan.fact is None or not plan.fact.external:
            return Removal(event, RemovalReport(), restore)
        return Removal(event, await self.stores.remove_all(plan.fact), restore)

    # -- sweep ---------------------------------------------------------------------------------

    async def sweep(
        self,
        *,
        actor: str,
        reason: str,
        before: TimeLike | None = None,
        space: str | None = None,
        receipt_id: str | None = None,
        keep_digest: bool = True,
        progress: SweepProgress | None = None,
        within: Callable[[str], bool] | None = None,
    ) -> SweepReport:
        """Forget what was learned before ``before`` (or, without it, before each space's
        retention window), then remove each forgotten fact from the stores holding it.
        ``within``: without ``space``, sweep only the spaces it accepts (a scoped caller's)."""
        if before is None and self.retention is None:
            raise LedgerError(SWEEP_NEEDS_BEFORE, field="before")
        with anyio.CancelScope(shield=True):
            forgotten, held, copies = await self.run(
                self._sweep_ledger,
                before,
                space,
                actor,
                reason,
                receipt_id,
                keep_digest,
                progress,
                within,
            )
            report = SweepReport(
                before=_time_text(before),
                retention=self.retention if before is None else None,
                space=space,
                held=held,
            )
            leaving = sum(1 for e in forgotten if e.fact_id in copies)
            done = 0
            for event in forgotten:
                fact = copies.get(event.fact_id)
                removal = RemovalReport()
                if fact is not None:
                    if progress is not None:
                        progress("stores", done, leaving)
                    removal = await self.stores.remove_all(fact)
                    done += 1
                report.forgotten.append(SweptFact(event, removal))
            if progress is not None and leaving:
                progress("stores", leaving, leaving)
        return report

    async def plan_sweep(
        self, *, before: TimeLike | None = None, space: str | None = None, holders: bool = False
    ) -> SweepPreview:
        """What ``sweep`` with these arguments would forget and keep, changing nothing.
        ``holders``: also name the stores holding each fact now (a query per fact)."""
        if before is None and self.retention is None:
            raise LedgerError(SWEEP_NEEDS_BEFORE, field="before")

        def plan() -> SweepPreview:
            preview = SweepPreview(
                _time_text(before), self.retention if before is None else None, space
            )
            for where, cutoff in self._cutoffs(before, space):
                found = self.ledger.plan_sweep(cutoff, where)
                preview.forget.extend(found.forget)
                preview.held.extend(found.held)
            if holders:
                for event in preview.forget:
                    preview.holders[event.fact_id] = sorted(
                        self.ledger.current_external(event.fact_id)
                    )
            return preview

        preview: SweepPreview = await self.run(plan)
        return preview

    def _cutoffs(
        self,
        before: TimeLike | None,
        space: str | None,
        within: Callable[[str], bool] | None = None,
    ) -> list[tuple[str | None, Any]]:
        names: list[str] | None = [space] if space is not None else None
        if names is None and within is not None:
            names = [name for name in self.ledger.spaces() if within(name)]
        if before is not None:
            return [(space, before)] if names is None else [(name, before) for name in names]
        assert self.retention is not None
        now = parse_time(self.ledger.now())
        plan: list[tuple[str | None, Any]] = []
        for name in names if names is not None else self.ledger.spaces():
            window = self.retention.window_for(name)
            if window is not None:
                plan.append((name, format_time(window[1].before(now))))
        return plan

    def _sweep_ledger(
        self,
        before: TimeLike | None,
        space: str | None,
        actor: str,
        reason: str,
        receipt_id: str | None,
        keep_digest: bool,
        progress: SweepProgress | None = None,
        within: Callable[[str], bool] | None = None,
    ) -> tuple[list[ForgetEvent], list[str], dict[str, Fact]]:
        forgotten: list[ForgetEvent] = []
        held: list[str] = []
        copies: dict[str, Fact] = {}
        for where, cutoff in self._cutoffs(before, space, within):
            if self.stores:
                # Keep the values the stores must find again to remove and verify, with the ids
                # the stores hold them under now (a fact put back has new ones).
                for f in self.ledger.learned_before(cutoff, where):
                    external = self.ledger.current_external(f.fact_id)
                    if external:
                        copies[f.fact_id] = f.with_(external=external)
            result = self.ledger.sweep(
                before=cutoff,
                space=where,
                actor=actor,
                reason=reason,
                receipt_id=receipt_id,
                keep_digest=keep_digest,
                progress=(lambda done, total: progress("ledger", done, total))
                if progress
                else None,
            )
            forgotten.extend(result.forgotten)
            held.extend(result.held)
        return forgotten, held, copies


def _time_text(value: TimeLike | None) -> str | None:
    return value if isinstance(value, str) or value is None else format_time(value)
