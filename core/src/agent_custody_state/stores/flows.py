"""Custody with stores: the ledger and its write-through stores, moved together (SPEC 4.2, 6).

The one home of every flow that crosses the ledger and the stores. The MCP server and the command
line only translate arguments in and these reports out; a Python program gets the same behaviour
with ``Custody(ledger, stores)`` and ``await custody.write(...)``.

- **write**: validate, put into every store in configuration order, append with the stores' ids;
  a store that fails, or a ledger that refuses at append time (another writer got there first),
  compensates the puts already made. The store whose put failed is asked for a copy it kept all
  the same, which is removed (``orphans``); a cleanup that could not finish is recorded in the
  outbox, when there is one, for ``resume`` to retry (``orphan_resume``). A write that
  supersedes then removes the old value from the mirroring stores.
- **retract / forget**: the ledger first, then removal from each store holding the fact, verified;
  what the retraction makes current again is put back first (``mirror``).
- **sweep** (``sweeping``): the ledger forgets what is older than ``before`` (or each space's
  retention window), then each forgotten fact leaves the stores. ``plan_sweep`` answers what a
  sweep would do, changing nothing (``sweep --dry-run``).
- a forget (and each fact of a sweep) can carry a signed erasure certificate, the stores'
  removal included (``certificate``); with ``certificates`` (a folder, ``archive``) every one
  is issued and kept there inside the flow, so a cancelled caller's is not lost.
- with an ``outbox``, the removals a retract, forget or sweep owes the stores are recorded
  durably before the ledger changes and settled once tried, and ``resume`` finishes those a
  crash left (``outbox``).

Each flow runs to its end when its caller is cancelled (``finish``): a caller that hangs up
between the ledger and the stores must not leave the two disagreeing. Ledger calls go through
``run`` (the server passes its ledger thread's ``run``; the default calls inline) and asserts
through ``append`` (the server passes its group-commit queue).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import anyio

from agent_custody_state.ledger.arguments import new_id
from agent_custody_state.ledger.certificate import CertificateOptions, options_of
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.forgetting import Certify
from agent_custody_state.ledger.ledger import Ledger, Precondition
from agent_custody_state.ledger.model import AssertEvent, Fact, ForgetEvent, RetractEvent
from agent_custody_state.ledger.requests import AssertRequest, request_arg
from agent_custody_state.ledger.retention import RetentionPolicy
from agent_custody_state.stores.archive import CertificateArchive, archive_of
from agent_custody_state.stores.base import Store
from agent_custody_state.stores.certificate import certify_removal, stores_part
from agent_custody_state.stores.finish import finish
from agent_custody_state.stores.keeping import OwnForget
from agent_custody_state.stores.mirror import (
    E,
    LeavingPlan,
    Removal,
    Restore,
    current_fact,
    left_meanwhile,
    plan_leaving,
    put_back,
    remove_put_back,
    restored_meanwhile,
)
from agent_custody_state.stores.orphan_resume import resume_failed_puts
from agent_custody_state.stores.outbox import Operation, Outbox, Owed, Resumed, resume
from agent_custody_state.stores.reports import (
    SweepPreview,
    SweepReport,
    SweptFact,
    WriteReport,
)
from agent_custody_state.stores.storeset import (
    RemovalReport,
    StoreSet,
    StoreWriteError,
    VerifyPolicy,
    describe_compensation,
)
from agent_custody_state.stores.sweeping import SWEEP_NEEDS_BEFORE, CustodySweep, SweepProgress
from agent_custody_state.stores.where import WHERE_KEY, locate, wheres, with_where

T = TypeVar("T")
Runner = Callable[..., Awaitable[Any]]
Append = Callable[[AssertRequest], Awaitable[AssertEvent]]

log = logging.getLogger(__name__)

__all__ = ["SWEEP_NEEDS_BEFORE", "Custody", "Removal", "Restore", "SweepPreview", "SweepProgress"]
__all__ += ["SweepReport", "SweptFact", "WriteReport"]


async def run_inline(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """The default ``run``: call the ledger on the caller's thread."""
    return fn(*args, **kwargs)


class Custody(CustodySweep):
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
        certificate_key: Any = None,
        outbox: Outbox | str | os.PathLike[str] | None = None,
        certificates: CertificateArchive | str | os.PathLike[str] | None = None,
    ) -> None:
        self.ledger = ledger
        self.certificates = archive_of(certificates)
        #: owed store removals, kept across a crash (``stores.outbox``); None: not kept
        self.outbox = Outbox.of(outbox, ledger)  # a path: the ledger's lock bound
        #: signs erasure certificates (the server's key); None: the ledger's checkpoint key
        self.certificate_key = certificate_key
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
        return await finish(self._write(request_arg("Custody.write", request), precondition))

    async def _write(
        self, request: AssertRequest, precondition: Precondition | None
    ) -> WriteReport:
        if not self.stores:
            return WriteReport(await self._append_checked(request, precondition))
        # The stores record the fact id and validFrom before the ledger appends: fix both now
        # (at the ledger's present: never before its last append, if the clock stepped back).
        request = request.with_(
            fact_id=request.fact_id or new_id(),
            valid_from=request.valid_from or self.ledger.present(),
        )
        planned: AssertEvent = await self.run(self.ledger.validate_assert, request)
        # Where each declaring store writes, recorded beside its id (``where``).
        fact = with_where(planned.fact, wheres(self.stores))
        try:
            external = await self.stores.put_all(fact)
        except StoreWriteError as exc:
            await self._owe_cleanup(fact, exc)
            raise
        # What the stores did, recorded as the ids are: a caller's own ``externalWhere`` goes
        # with its ``external`` (a stored place no store reported would refuse a removal).
        extra = {k: v for k, v in (request.fact_extra or {}).items() if k != WHERE_KEY}
        recorded = wheres(self.stores, external)
        if recorded:
            extra[WHERE_KEY] = recorded
        request = request.with_(fact_extra=extra or None)
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
        except Exception:
            # The backend failed (disk full, connection lost). Unless the fact landed anyway,
            # the stores hold a fact no ledger records, which no forget could ever reach.
            if not await self._recorded(fact.fact_id):
                log.error(
                    "the ledger failed to append fact %s after the stores took it; compensating",
                    fact.fact_id,
                    extra={"fact": fact.fact_id},
                )
                await self.stores.compensate(fact, external)
            raise
        return WriteReport(event, await self._leave_mirrors(event))

    async def _recorded(self, fact_id: str) -> bool:
        """Whether the ledger holds ``fact_id``; False when it cannot even be read."""
        try:
            return await self.run(self.ledger.get, fact_id) is not None
        except Exception:
            return False

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
        certificate: Certify = False,
    ) -> Removal[ForgetEvent]:
        """Forget in the ledger, then remove from every store: the removal and its check use
        the value taken before the erasure (the ledger no longer has it).
        ``precondition``: as for ``retract``. ``certificate``: True or ``CertificateOptions``
        puts a signed erasure certificate, stores included, on the result (``stores.certificate``);
        without a key to sign it the call is refused before anything changes."""
        options = self._certificate_options(certificate)
        own = OwnForget(self.ledger)  # what it committed: the only forget its intent certifies

        def mutate(extra: dict[str, Any] | None) -> ForgetEvent:
            return own.forget(
                fact_id=fact_id,
                actor=actor,
                reason=reason,
                receipt_id=receipt_id,
                keep_digest=keep_digest,
                extra=extra,
                precondition=precondition,
                certificate=options or False,
            )

        async def flow() -> Removal[ForgetEvent]:
            issued: dict[str, bool] = {}  # fact id: its certificate kept
            intent = await self._intend_one(fact_id, actor, reason, receipt_id, options)
            try:  # a kill before the certificate is kept: the next start issues it (intents)
                removal = await self._leave(fact_id, mutate, forgetting=True)
                if own.certified:
                    held_by = list(removal.held_by)
                    removal.certificate = certify_removal(
                        own.certified[0], removal.removal, held_by, self.stores.by_name
                    )
                    issued[fact_id] = await self._keep(fact_id, removal.certificate) is not None
            except BaseException:  # the intent is released however closing it ends
                await self._close_failed(intent, options, issued, own.ids)
                raise
            if own.not_made is not None:  # the forget and the stores' removals stand: say so
                # a recovered certificate, naming what this removal found in each store
                found = stores_part(removal.removal, removal.held_by, self.stores.by_name)
                await self._close_failed(intent, options, issued, own.ids, {fact_id: found})
                held = "; ".join(f"{n}: {why}" for n, why in removal.removal.still_held.items())
                raise own.not_made.still_held_by(held)
            await self._close_intent(intent, options, issued, own.ids)
            return removal

        return await finish(flow())  # the certificate is kept also when the caller is cancelled

    def _certificate_options(self, certificate: Certify) -> CertificateOptions | None:
        """``certificate=`` with its key resolved now (the custody's, else the ledger's), so a
        missing key refuses the call before the stores or the ledger are touched."""
        options = options_of(certificate) or options_of(self.certificates is not None)
        if options is None:
            return None
        if options.key is None and self.certificate_key is not None:
            options = replace(options, key=self.certificate_key)
        _, key = self.ledger.certifying(options)
        return replace(options, key=key)

    async def _leave_present(
        self, fact_id: str, mutate: Callable[[dict[str, Any] | None], E], *, forgetting: bool
    ) -> Removal[E]:
        return await finish(self._leave(fact_id, mutate, forgetting=forgetting))

    async def _leave(
        self, fact_id: str, mutate: Callable[[dict[str, Any] | None], E], *, forgetting: bool
    ) -> Removal[E]:
        # Even with no store configured, the plan names the stores the ledger records the fact
        # in: ``remove_all`` reports those it cannot reach as still holding it.
        plan = await self.run(plan_leaving, self.ledger, fact_id, forgetting=forgetting)
        operation: Operation = "forget" if forgetting else "retract"
        # Owed before the put-back: an outbox that cannot record it stops the call untouched.
        owed = await self._owe(plan.fact, operation)
        try:
            return await self._left(plan, mutate, operation, owed)
        except BaseException:  # they stay owed, no longer in flight: ``resume`` finishes them
            self._release(owed)
            raise

    async def _left(
        self,
        plan: LeavingPlan,
        mutate: Callable[[dict[str, Any] | None], E],
        operation: Operation,
        owed: list[Owed],
    ) -> Removal[E]:
        """``_leave`` once ``owed`` is recorded (``owed`` grows with the ids found later)."""
        restore: Restore | None = None
        if plan.uncovers is not None and self.stores.mirroring():
            restore = await put_back(self.stores, plan.uncovers)
        extra = restore.record() if restore is not None and restore.external else None
        try:
            event = await self.run(mutate, extra)
        except BaseException as exc:
            if isinstance(exc, LedgerError):  # refused: the ledger did not change
                await self._settle(owed)
            # Any other failure may have committed: the entries stay for ``resume`` to decide.
            if restore is not None and restore.external and plan.uncovers is not None:
                await self.stores.compensate(plan.uncovers, restore.external)
            raise
        if restore is not None and restore.external and plan.uncovers is not None:
            now, why = await self.run(left_meanwhile, self.ledger, plan.uncovers.fact_id)
            if now is not None and why is not None:
                await remove_put_back(self.stores, now, restore, why)
        if plan.fact is None:
            return Removal(event, RemovalReport(), restore)
        # A retraction that put this fact back after the plan was read recorded new ids.
        added = await self.run(restored_meanwhile, self.ledger, plan.fact)
        external = {**(plan.fact.external or {}), **added}
        fact = await self.run(locate, self.ledger, plan.fact, external) if added else plan.fact
        owed.extend(await self._owe(fact.with_(external=added), operation))
        if not fact.external:
            return Removal(event, RemovalReport(), restore)
        held_by = list(fact.external)
        report = await self.stores.remove_all(fact)
        await self._settle(owed, report)
        return Removal(event, report, restore, held_by=held_by)

    # -- the outbox ------------------------------------------------------------------------------

    async def resume(self) -> Resumed | None:
        """Finish the store removals a crash left owed in the outbox: removed by external id
        and verified where the ledger change committed, dropped where it never did (see
        ``stores.outbox``), and first the certificates a kill lost (``finish_intents``). None
        without an outbox. The server, ``forget`` and ``sweep`` call it at start; the server also
        every ``resume_every`` seconds (``server/resumer.py``)."""
        with anyio.CancelScope(shield=True):
            await self.finish_intents()  # certificates a kill lost after their forget
        if self.outbox is None:
            return None
        with anyio.CancelScope(shield=True):
            done = await resume(self.outbox, self.ledger, self.stores, self.run)
            await resume_failed_puts(self.outbox, self.ledger, self.stores, self.run, done)
        return done
