"""The sweep flow of ``Custody`` (``flows``): the ledger forgets what is older than a cutoff or
each space's retention window, then each forgotten fact leaves the stores holding it, each with
its erasure certificate when asked. With an outbox, the removals are recorded before each
cutoff's forgets and settled fact by fact once tried (``outbox``). ``plan_sweep`` answers what a
sweep would do, changing nothing (``sweep --dry-run``: ``sweep_plan``). A sweep its caller stops
(Ctrl-C, ``stop``) keeps every forgotten fact's certificate on its way out (``sweep_interrupt``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_custody_state.ledger.certificate import CertificateOptions, CertifiedForget
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.forgetting import Certify
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import Fact, ForgetEvent
from agent_custody_state.ledger.owned import sweep_callbacks
from agent_custody_state.ledger.queries import SweepResult
from agent_custody_state.ledger.requests import TimeLike
from agent_custody_state.ledger.retention import RetentionPolicy
from agent_custody_state.ledger.stopped import stopped_result
from agent_custody_state.stores import intents
from agent_custody_state.stores.archive import CertificateArchive
from agent_custody_state.stores.certificate import certify_removal, swept_parts
from agent_custody_state.stores.finish import finish
from agent_custody_state.stores.intents import Intent
from agent_custody_state.stores.keeping import CertificateKeeping
from agent_custody_state.stores.outbox import Outbox, Owed
from agent_custody_state.stores.owing import Owing
from agent_custody_state.stores.reports import SweepReport, SweptFact
from agent_custody_state.stores.storeset import RemovalReport, StoreSet
from agent_custody_state.stores.sweep_interrupt import interrupt, keep_stopped, stop_check
from agent_custody_state.stores.sweep_plan import SWEEP_NEEDS_BEFORE as SWEEP_NEEDS_BEFORE
from agent_custody_state.stores.sweep_plan import SweepPlanning, time_text
from agent_custody_state.stores.sweep_progress import PassProgress
from agent_custody_state.stores.sweep_restore import (
    put_back_all,
    recorded_heads,
    restored_extras,
    settle_restores,
    uncovered_by_sweep,
)
from agent_custody_state.stores.sweep_stopped import forgotten_before, mark_unswept
from agent_custody_state.stores.where import locate

#: ``progress(stage, done, total)``: ``stage`` is ``"ledger"`` (forgetting) or ``"stores"``
#: (removing from the stores); a command line draws its progress bar from it.
SweepProgress = Callable[[str, int, int], None]


class CustodySweep(SweepPlanning, CertificateKeeping, Owing):
    """``sweep`` and ``plan_sweep``; ``flows.Custody`` provides the rest."""

    ledger: Ledger
    stores: StoreSet
    retention: RetentionPolicy | None
    run: Any
    outbox: Outbox | None
    #: every certificate issued is kept here (``archive``); None: only in the answers
    certificates: CertificateArchive | None

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
        certificates: Certify = False,
        within: Callable[[str], bool] | None = None,
        at: TimeLike | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> SweepReport:
        """Forget what was learned before ``before`` (or, without it, before each space's
        retention window), then remove each forgotten fact from the stores holding it.
        ``certificates``: as ``forget``'s ``certificate``, one per forgotten fact.
        ``within``: without ``space``, sweep only the spaces it accepts (a scoped caller's).
        ``at``: measure the windows from this instant, not the clock's (``measured_at``).
        ``stop``: asked before each fact (a signal handler's flag): once true, the sweep stops
        there as Ctrl-C stops it (``sweep_interrupt``: ``SweepInterrupted``, carrying what
        was done as ``swept``, every forgotten fact's certificate kept)."""
        if before is None and self.retention is None:
            raise LedgerError(SWEEP_NEEDS_BEFORE, field="before")
        sweep_callbacks(progress, certificates)  # not Python's TypeError half-way
        if stop is not None and not callable(stop):
            raise LedgerError("stop: a function that says whether to stop, or None", field="stop")
        options = self._certificate_options(certificates)
        swept = self._sweep(
            actor,
            reason,
            before,
            space,
            receipt_id,
            keep_digest,
            progress,
            options,
            within,
            at,
            stop_check(stop),
        )
        return await finish(swept)  # to its end, also when the caller is cancelled

    async def _sweep(
        self,
        actor: str,
        reason: str,
        before: TimeLike | None,
        space: str | None,
        receipt_id: str | None,
        keep_digest: bool,
        progress: SweepProgress | None,
        options: CertificateOptions | None,
        within: Callable[[str], bool] | None,
        at: TimeLike | None = None,
        check: Callable[[], None] = lambda: None,
    ) -> SweepReport:
        """The sweep's steps (``sweep``): the puts-back, the ledger's forgets, the removals.
        ``check`` raises once its caller asked it to stop (``sweep_interrupt``)."""
        passes = await self.run(self._cutoffs, before, space, within, at)
        uncovered: dict[str, Fact] = {}
        if self.stores.mirroring():  # what the sweep makes current again goes back first
            for where, cutoff in passes:  # a sweep the ledger would refuse puts nothing
                self.ledger.check_sweep(cutoff, actor, reason, where, receipt_id, keep_digest)
            uncovered = await self.run(uncovered_by_sweep, self.ledger, passes)
        restores = await put_back_all(self.stores, uncovered)
        intended: list[Intent] = []  # each pass's, recorded before its forgets
        cut = False  # its caller stopped it: the stores get a bounded time (``sweep_restore``)
        try:
            forgotten, held, copies, certified, owed, stopped = await self.run(
                self._sweep_ledger,
                passes,
                actor,
                reason,
                receipt_id,
                keep_digest,
                progress,
                options,
                restored_extras(restores),
                intended,
                check,
            )
            cut = stopped is not None and interrupt(stopped)
        except BaseException as exc:  # before any forget is known: the intents are for ``resume``
            cut = interrupt(exc)
            for intent in intended:
                intents.release(intent)
            raise
        finally:  # what the ledger recorded, read back: also when the sweep failed
            recorded = await self.run(recorded_heads, self.ledger, restores) if restores else set()
            await settle_restores(
                self._get,
                self.stores,
                uncovered,
                restores,
                recorded,
                stopped=cut,
                owe=self._owe_put,
            )
        report = SweepReport(
            before=time_text(before),
            retention=self.retention if before is None else None,
            space=space,
            held=held,
        )
        leaving = sum(1 for e in forgotten if e.fact_id in copies)
        done = 0
        issued: dict[str, bool] = {}  # fact id: its certificate kept
        asking: tuple[str, RemovalReport] | None = None  # the fact whose stores are asked
        try:
            if stopped is not None and interrupt(stopped):
                raise stopped  # Ctrl-C in the ledger's part: no store is contacted after it
            for event in forgotten:
                fact = copies.get(event.fact_id)
                removal = RemovalReport()
                if fact is not None:
                    check()  # a stop asked: before this fact's stores, never half-way
                    if progress is not None:
                        progress("stores", done, leaving)
                    asking = (event.fact_id, removal)  # a stop now cuts it mid-call
                    await self.stores.remove_all(fact, into=removal)
                    await self._settle(owed.get(event.fact_id, []), removal)
                    done += 1
                swept = SweptFact(event, removal, restored=restores.get(event.fact_id))
                report.forgotten.append(swept)
                if event.fact_id in certified:
                    held_by = list(fact.external or {}) if fact is not None else []
                    swept.certificate = certify_removal(
                        certified[event.fact_id], removal, held_by, self.stores.by_name
                    )
                    kept = await self._keep(event.fact_id, swept.certificate)
                    issued[event.fact_id] = kept is not None
        except BaseException as exc:
            self._release(o for entries in owed.values() for o in entries)  # for ``resume``
            if interrupt(exc):  # every forgotten fact's certificate, then what was done
                await keep_stopped(
                    self, report, forgotten, copies, certified, issued, intended, check, asking
                )
                exc.swept = report  # type: ignore[attr-defined]  # read by ``cli``
            else:  # failed after its forgets: the intents are for the next ``resume``
                for intent in intended:
                    intents.release(intent)
            raise
        if progress is not None and leaving:
            progress("stores", leaving, leaving)
        mine = {e.event_id for e in forgotten}
        try:  # a fact that stopped the ledger part-way: its forgotten ones
            # forgotten without a certificate (a pass's failed): recovered, its stores as found
            uncertified = [s for s in report.forgotten if s.event.fact_id not in certified]
            found = swept_parts(uncertified, copies, self.stores.by_name) if intended else {}
            for intent in intended:
                await self._close_intent(intent, options, issued, mine, found)
        finally:  # one that raised: the rest are left to the next ``resume``, here too
            for intent in intended:
                intents.release(intent)
        if stopped is not None:  # what it forgot before has left the stores: now say why
            stopped.swept = report  # type: ignore[attr-defined]  # what it did before (``cli``)
            raise stopped
        return report

    async def _get(self, fact_id: str) -> Fact | None:
        fact: Fact | None = await self.run(self.ledger.get, fact_id)
        return fact

    def _sweep_ledger(
        self,
        passes: list[tuple[str | None, Any]],
        actor: str,
        reason: str,
        receipt_id: str | None,
        keep_digest: bool,
        progress: SweepProgress | None = None,
        options: CertificateOptions | None = None,
        extras: dict[str, dict[str, Any]] | None = None,
        intended: list[Intent] | None = None,
        check: Callable[[], None] = lambda: None,
    ) -> tuple[
        list[ForgetEvent],
        list[str],
        dict[str, Fact],
        dict[str, CertifiedForget],
        dict[str, list[Owed]],
        BaseException | None,
    ]:
        certified: dict[str, CertifiedForget] = {}
        owed: dict[str, list[Owed]] = {}
        forgotten: list[ForgetEvent] = []
        held: list[str] = []
        copies: dict[str, Fact] = {}
        stopped: BaseException | None = None
        counted = self._pass_progress(passes, progress)
        for index, (where, cutoff) in enumerate(passes):
            listed: dict[str, Fact] = {}
            leaving: list[Fact] = []
            try:
                self._list_leaving(cutoff, where, listed, leaving, copies, owed)
                intent = self._intend(list(listed), actor, reason, receipt_id, options)
                if intent is not None and intended is not None:
                    intended.append(intent)
                result = self.ledger.sweep(
                    before=cutoff,
                    space=where,
                    actor=actor,
                    reason=reason,
                    receipt_id=receipt_id,
                    keep_digest=keep_digest,
                    progress=_checked(counted.for_pass() if counted else None, check),
                    certificates=options or False,
                    extras=extras,
                    only=listed,  # what it owes the stores for; one appended since waits
                )
            except BaseException as exc:
                # A fact (or a read before it) stopped the sweep: those it forgot before still
                # leave the stores, this pass's and the earlier passes' alike (``sweep_stopped``).
                # Ctrl-C: the ledger's own account only (no read per fact on the way out).
                stopped = exc
                mark_unswept(exc, (name for name, _ in passes[index + 1 :]))  # ``stopped_text``
                result = (
                    (stopped_result(exc) or SweepResult())
                    if interrupt(exc)
                    else forgotten_before(self.ledger, listed, exc)
                )
            forgotten.extend(result.forgotten)
            held.extend(result.held)
            certified.update(result.certificates)
            try:
                self._restored_meanwhile(result.forgotten, listed, copies, owed)
                if self.outbox is not None and leaving:  # held: never forgotten, nothing owed
                    gone = {e.fact_id for e in result.forgotten}
                    kept = [f.fact_id for f in leaving if f.fact_id not in gone]
                    self.outbox.settle([o for fact_id in kept for o in owed.pop(fact_id, [])])
            except Exception as exc:
                stopped = stopped or exc
            if stopped is not None:
                break
            if counted is not None:
                counted.pass_done()
        if counted is not None and stopped is None:
            counted.finish()
        return forgotten, held, copies, certified, owed, stopped

    def _pass_progress(
        self, passes: list[tuple[str | None, Any]], progress: SweepProgress | None
    ) -> PassProgress | None:
        """One growing count over every pass (``sweep_progress``): the passes after the first
        are counted now (a read per pass, only when progress is asked for)."""
        if progress is None:
            return None
        later = [len(self.ledger.learned_before(cutoff, where)) for where, cutoff in passes[1:]]
        return PassProgress(progress, later)

    def _list_leaving(
        self,
        cutoff: Any,
        where: str | None,
        listed: dict[str, Fact],
        leaving: list[Fact],
        copies: dict[str, Fact],
        owed: dict[str, list[Owed]],
    ) -> None:
        """The facts a pass may forget (``listed``) and, in ``copies`` and ``leaving``, those
        held by a store, with the ids the stores hold them under now (a fact put back has new
        ones), so the stores can find their values again to remove and verify. Without
        stores, a fact recorded in one is still kept: the report must name who still holds
        it. With an outbox, their removals are owed before the ledger forgets them."""
        for f in self.ledger.learned_before(cutoff, where):
            listed[f.fact_id] = f
            if self.stores or f.external:
                external = self.ledger.current_external(f.fact_id)
                if external:
                    copies[f.fact_id] = locate(self.ledger, f, external)
                    leaving.append(copies[f.fact_id])
        if self.outbox is not None and leaving:
            for entry in self.outbox.owe(leaving, "forget", self.ledger.now()):
                owed.setdefault(entry.fact_id, []).append(entry)

    def _restored_meanwhile(
        self,
        events: list[ForgetEvent],
        listed: dict[str, Fact],
        copies: dict[str, Fact],
        owed: dict[str, list[Owed]],
    ) -> None:
        """A fact put back into a store (a retraction recorded its new ids) after the listing
        and before its forget: the ids read at the listing miss that copy, which would keep the
        erased value. Read them again now that the forget is committed, and owe the new ones."""
        for event in events:
            fact = listed.get(event.fact_id)
            if fact is None:
                continue
            known = copies[fact.fact_id].external or {} if fact.fact_id in copies else {}
            external = self.ledger.current_external(fact.fact_id)
            added = {k: v for k, v in external.items() if known.get(k) != v}
            if not added:
                continue
            copies[fact.fact_id] = now = locate(self.ledger, fact, external)
            if self.outbox is not None:
                more = self.outbox.owe([now.with_(external=added)], "forget", self.ledger.now())
                owed.setdefault(fact.fact_id, []).extend(more)


def _checked(
    progress: Callable[[int, int], None] | None, check: Callable[[], None]
) -> Callable[[int, int], None]:
    """The ledger's ``progress``, which first asks ``check`` (before each fact's forget)."""

    def report(done: int, total: int) -> None:
        check()
        if progress is not None:
            progress(done, total)

    return report
