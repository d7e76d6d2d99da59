"""A sweep its caller stops (Ctrl-C, SIGTERM, ``Custody.sweep(stop=...)``): what it keeps on
the way out (``sweeping``).

The forgets before the stop stand. Every one of them gets its full certificate now, with the
ledger's byte scan (made once for all, as a finished sweep's: ``ledger.stopped``), instead of a
``recovered`` one without it at the next start: a fact whose stores were asked and verified
before the stop as a finished sweep certifies it; a fact held by no store alike (there is
nothing to remove); a fact whose stores were not asked yet (the flow contacts no store after
the stop) names each such store ``unknown``, with why and who finishes the removal (the outbox,
at the next start); so does the fact whose stores the stop cut mid-call, saying which store
was asked and not answered (``NO_ANSWER``, ``NOT_CHECKED``) and which not asked. A store not
configured here is ``notConfigured``, as in a finished sweep, saying that no start here
finishes its removal (``ELSEWHERE``). Writing them is bounded (``KEEP_SECONDS``): those not
kept by then, and the fact whose forget the stop may have cut after its commit, are left to
the erasure intent, which the next start finishes (``stores.intents``). The exception then
carries the report of what was done (``swept``), as a sweep a fact stopped does
(``sweep_stopped``); so does the caller's ``stop`` (its ``swept``, ``StopCheck.stopped``), from
the moment the sweep stops: a second Ctrl-C raised outside the flow (in the event loop's own
code, or while the certificates are written) carries no report, and its caller still has one
to print.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from agent_custody_state.ledger.certificate import CertifiedForget, sign, with_stores
from agent_custody_state.ledger.model import Fact, ForgetEvent
from agent_custody_state.stores import intents
from agent_custody_state.stores.certificate import certify_removal, store_entries, store_windows
from agent_custody_state.stores.owed import LEFT_ELSEWHERE
from agent_custody_state.stores.reports import SweepReport, SweptFact
from agent_custody_state.stores.storeset import RemovalReport, StoreSet
from agent_custody_state.timeutil import format_time, utc_now

#: How long a stopped sweep still writes certificates, at most (a few ms each): the stop waits
#: no longer; the intent keeps the rest for the next start.
KEEP_SECONDS = 5.0

NOT_ASKED = (
    "not asked: the sweep was stopped before it reached this store; the outbox, when kept, "
    "finishes the removal at the next start (its log says how)"
)
#: the store the stop cut mid-call: its removal was sent, its answer never read
NO_ANSWER = (
    "asked, no answer before the stop: the sweep was stopped while this store removed the "
    "fact, so whether it did is not known; the removal stays owed in the outbox, when kept, "
    "which finishes it at the next start (its log says how)"
)
#: the store that answered its removal, whose check (``verify_removed``) the stop cut
NOT_CHECKED = (
    "removed, not checked: the store answered the removal, and the sweep was stopped while it "
    "checked that the value is gone; the removal stays owed in the outbox, when kept, which "
    "finishes it at the next start (its log says how)"
)
#: added to ``StoreSet.report_unconfigured``'s words for a store of a fact the stop left, not
#: configured here: its outbox entry stays owed (released, not settled), and a start with this
#: configuration leaves it (``outbox._finish``), so "the outbox finishes it" would be untrue
ELSEWHERE = (
    "; the sweep was stopped, so this removal was not settled: with an outbox it stays owed "
    "there, " + LEFT_ELSEWHERE
)
#: the words of a store whose removal a stop left owed (``owed_by_stop``)
STOPPED = (NOT_ASKED, NO_ANSWER, NOT_CHECKED)


class SweepInterrupted(KeyboardInterrupt):
    """The sweep stopped between two facts because its caller asked (``stop``: the ``sweep``
    command's SIGINT or SIGTERM). A ``KeyboardInterrupt``: it ends a program as Ctrl-C does.
    ``signal``: the signal's name, when one asked."""

    def __init__(self, signal: str | None = None) -> None:
        super().__init__(signal or "stop requested")
        self.signal = signal


class StopCheck:
    """``Custody.sweep``'s ``stop`` as the flow asks it: called before each fact, it raises
    ``SweepInterrupted`` once ``stop()`` is true (never without one); ``stopped`` hands the
    report of a stopped sweep to ``stop`` when it has a ``swept`` attribute."""

    def __init__(self, stop: Callable[[], bool] | None) -> None:
        self.stop = stop

    def __call__(self) -> None:
        if self.stop is not None and self.stop():
            raise SweepInterrupted(getattr(self.stop, "signal", None))

    def stopped(self, report: SweepReport) -> None:
        """``report`` (completed in place as the stop proceeds) to ``stop.swept``."""
        stop: Any = self.stop
        if hasattr(stop, "swept"):
            stop.swept = report


def stop_check(stop: Callable[[], bool] | None) -> StopCheck:
    """The flow's check of ``stop`` (``StopCheck``)."""
    return StopCheck(stop)


def interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` stops a sweep as its caller's stop does, not as a fact's error: Ctrl-C,
    ``SystemExit``, a cancel (``asyncio``'s, when a flow is cut)."""
    return not isinstance(exc, Exception)


def unasked(fact: Fact | None, stores: StoreSet) -> RemovalReport:
    """The removal report of a fact whose stores the stopped sweep did not ask: each still
    holds it, as far as anyone knows (``NOT_ASKED``; one not configured here: ``unconfigured``)."""
    report = RemovalReport()
    if fact is not None:
        names = sorted(n for n in fact.external or {} if stores.by_name(n) is not None)
        report.still_held = dict.fromkeys(names, NOT_ASKED)
        unconfigured(fact, stores, report)
    return report


def unconfigured(fact: Fact, stores: StoreSet, report: RemovalReport) -> None:
    """Name in ``report`` each store ``fact`` is recorded in that is not configured here, as
    ``StoreSet.report_unconfigured`` does, and who can still remove its copy (``ELSEWHERE``)."""
    names = [name for name in fact.external or {} if stores.by_name(name) is None]
    if names:
        stores.report_unconfigured(fact, report)
        for name in names:
            report.still_held[name] += ELSEWHERE


def cut_short(fact: Fact | None, partial: RemovalReport, stores: StoreSet) -> RemovalReport:
    """The removal report of the fact whose stores the stop cut mid-way: what the stores
    answered before it (``partial``, filled by ``StoreSet.remove_all`` store by store, asked in
    their order), then the store it was waiting on (``NO_ANSWER``, or ``NOT_CHECKED`` when the
    removal was answered and its check cut), then those after it (``NOT_ASKED``), and those
    not configured here, which ``remove_all`` names only at its end (``unconfigured``)."""
    order = [store.name for store in stores.stores]
    held = (fact.external or {}) if fact is not None else {}
    report = RemovalReport(
        list(partial.removed_from),
        dict(partial.still_held),
        dict(partial.verification),
        list(partial.moved),
    )
    cut = False
    for name in order:
        if name not in held or name in report.still_held or name in report.verification:
            continue  # not holding it, or answered (and checked) before the stop
        answered = name in report.removed_from
        report.still_held[name] = NOT_ASKED if cut else NOT_CHECKED if answered else NO_ANSWER
        cut = True
    if fact is not None:
        unconfigured(fact, stores, report)
    return report


def owed_by_stop(removal: RemovalReport) -> bool:
    """Whether a stop left a removal of this fact owed (a store not asked or not answered)."""
    return any(text in STOPPED for text in removal.still_held.values())


def certify_stopped(
    certified: CertifiedForget,
    removal: RemovalReport,
    held_by: Collection[str],
    store_named: Callable[[str], object],
) -> dict[str, Any]:
    """The certificate of a forget whose stores a stop left unfinished: the ledger's part as
    made, the stores as ``removal`` reports them (``store_entries``), each one the stop left
    owed ``unknown`` with why (the outcome is partial, nothing found), signed again."""
    entries = store_entries(removal, held_by)
    for entry in entries:
        if entry.get("error") in STOPPED:
            entry["verification"] = "unknown"
    windows = store_windows(held_by, store_named)
    predicate = with_stores(certified.predicate, entries, format_time(utc_now()), windows)
    return sign(predicate, certified.forgetting, certified.key)


async def keep_stopped(
    custody: Any,
    report: SweepReport,
    forgotten: list[ForgetEvent],
    copies: Mapping[str, Fact],
    certified: Mapping[str, CertifiedForget],
    issued: dict[str, bool],
    intended: list[intents.Intent],
    check: Callable[[], None] | None = None,
    asking: tuple[str, RemovalReport] | None = None,
) -> None:
    """On a stop: hand ``report`` to the caller's stop (``check``, a ``StopCheck``), complete
    it with the facts forgotten and not reached in the stores, keep the certificates not kept
    yet (until ``KEEP_SECONDS`` have passed), then drop each intent all of whose facts are kept
    and leave the others for the next start, this process's included (``intents.release``). A
    second interrupt while they are written stops the writing only; the intents are left as
    they are, and the caller's stop has the report as far as it got. ``asking``: the fact whose
    stores were being asked at the stop, and what they had answered (``cut_short``)."""
    if isinstance(check, StopCheck):
        check.stopped(report)
    done = {swept.event.fact_id: swept for swept in report.forgotten}
    unreached = {event.fact_id for event in forgotten} - set(done)
    for event in forgotten:  # first, at once: what was done, before any certificate
        if event.fact_id in unreached:
            fact = copies.get(event.fact_id)
            partial = asking[1] if asking is not None and asking[0] == event.fact_id else None
            stores = custody.stores
            removal = unasked(fact, stores) if partial is None else cut_short(fact, partial, stores)
            done[event.fact_id] = SweptFact(event, removal)
            report.forgotten.append(done[event.fact_id])
    deadline = time.monotonic() + KEEP_SECONDS
    try:
        for event in forgotten:
            swept = done[event.fact_id]
            fact = copies.get(event.fact_id)
            held_by = sorted(fact.external or {}) if fact is not None else []
            # its stores not asked (or their removal cut short): each such one unknown
            if event.fact_id in unreached and event.fact_id in certified and held_by:
                swept.certificate = certify_stopped(
                    certified[event.fact_id], swept.removal, held_by, custody.stores.by_name
                )
            if issued.get(event.fact_id) or event.fact_id not in certified:
                continue
            if swept.certificate is None:  # held by no store, or its removal reported
                swept.certificate = certify_removal(
                    certified[event.fact_id], swept.removal, held_by, custody.stores.by_name
                )
            if time.monotonic() < deadline:
                kept = await custody._keep(event.fact_id, swept.certificate)
                issued[event.fact_id] = kept is not None
    finally:
        for intent in intended:
            if all(issued.get(fact_id) for fact_id in intent.facts):
                await custody.run(intents.drop, intent)
            else:
                intents.release(intent)
