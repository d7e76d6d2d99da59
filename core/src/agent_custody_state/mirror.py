"""Stores mirror the present (SPEC 6 improvement): the flows the server runs around the ledger.

The ledger keeps every version; a retrieval store should hold only what is believed now, or an
agent recalls a superseded value as if it were current. So, for every store that mirrors (all
but those configured ``mirror = false``):

- a write that supersedes X removes X from the stores after the ledger has appended
  (:func:`supersede_through`), verified like any removal;
- a retraction or forget of the head of a chain makes the fact it superseded current again; that
  fact is put back into the stores *before* the ledger appends the retraction, and its new
  external ids are recorded on that retract/forget event as
  ``"restored": {"factId": <fact>, "external": {<store>: <id>}}``. SPEC 1.2 keeps unknown keys,
  so the TypeScript implementation reads and writes such a ledger unchanged, and the ledger stays
  the only record of where each fact is held (:meth:`Ledger.current_external`).

Why put back before appending: the new ids must be on the event, and events are immutable. The
ledger still decides: a retraction it refuses compensates (removes) the puts. A store that fails
the put-back does not block the retraction (an undo must never be held hostage by a vendor);
the failure is reported and the fact is simply absent from that store.

Ledger calls go through ``run`` (the server passes its ledger worker's ``run``), store calls are
awaited directly. Sweeps do not put back: a sweep forgets whole stretches of history, and a
superseded fact older than a swept one is swept with it unless it is on hold.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from .ledger.ledger import Ledger
from .ledger.model import AssertEvent, Fact, ForgetEvent, RetractEvent
from .ledger.queries import RESTORED_KEY
from .stores import RemovalReport, StoreSet, _message

T = TypeVar("T")
E = TypeVar("E", RetractEvent, ForgetEvent)
Runner = Callable[..., Awaitable[Any]]

__all__ = [
    "Removal",
    "Restore",
    "current_fact",
    "forget_through",
    "retract_through",
    "supersede_through",
]


async def _inline(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return fn(*args, **kwargs)


@dataclass
class Restore:
    """A fact put back into the mirroring stores because it became current again."""

    fact_id: str
    external: dict[str, str] = field(default_factory=dict)  # store -> new id
    failed: dict[str, str] = field(default_factory=dict)  # store -> error message

    def record(self) -> dict[str, Any]:
        """The extra key written on the retract/forget event (only the puts that succeeded)."""
        return {RESTORED_KEY: {"factId": self.fact_id, "external": dict(self.external)}}

    def to_dict(self) -> dict[str, Any]:
        """The wire shape reported in tool results."""
        return {"factId": self.fact_id, "external": dict(self.external),
                "failed": dict(self.failed)}


@dataclass
class Removal(Generic[E]):
    """What a retraction or forget did: the event, the removal from the stores, any restore."""

    event: E
    removal: RemovalReport
    restored: Restore | None = None


def current_fact(ledger: Ledger, fact_id: str) -> Fact | None:
    """The fact with ``external`` set to where the stores hold it now (restores included)."""
    fact = ledger.get(fact_id)
    if fact is None:
        return None
    return fact.with_(external=ledger.current_external(fact_id) or None)


def _made_current_by_leaving(ledger: Ledger, fact: Fact) -> Fact | None:
    """The fact that becomes current if ``fact`` (current now) leaves the present, if any.

    Only the head of a chain uncovers anything: walk up ``supersedes`` past retracted links to
    the first live ancestor. Rule 2.1.2 guarantees ``fact`` is that ancestor's only live
    superseder, so once ``fact`` is retracted the ancestor has none (SPEC 2.2 step 4).
    """
    if fact.valid_to is not None:  # superseded itself: its successor keeps the chain covered
        return None
    event = ledger.store.get_assert(fact.fact_id)
    parent = event.supersedes if event is not None else None
    seen: set[str] = set()
    while parent is not None and parent not in seen:
        seen.add(parent)
        if not ledger.is_retracted(parent):
            return current_fact(ledger, parent)
        above = ledger.store.get_assert(parent)
        parent = above.supersedes if above is not None else None
    return None


@dataclass
class _Plan:
    fact: Fact | None  # the fact leaving, with its value and current external ids
    uncovers: Fact | None  # what becomes current again


def _plan(ledger: Ledger, fact_id: str, *, forgetting: bool) -> _Plan:
    ledger.store.refresh()
    fact = current_fact(ledger, fact_id)
    if fact is None or ledger.is_retracted(fact_id):
        return _Plan(fact, None)  # the ledger refuses (retract) or nothing is uncovered (forget)
    if forgetting and ledger.held(fact_id):
        return _Plan(fact, None)  # the ledger will refuse; put nothing back
    return _Plan(fact, _made_current_by_leaving(ledger, fact))


async def _put_back(stores: StoreSet, fact: Fact) -> Restore:
    restore = Restore(fact.fact_id)
    clean = fact.with_(external=None, valid_to=None)
    for store in stores.mirroring():
        try:
            external_id = await store.put(clean)
            if not isinstance(external_id, str) or not external_id:
                raise ValueError(f"put returned {external_id!r}, not an id")
        except Exception as exc:
            restore.failed[store.name] = _message(exc)
            continue
        restore.external[store.name] = external_id
    return restore


async def _leave_present(
    ledger: Ledger,
    stores: StoreSet,
    fact_id: str,
    mutate: Callable[[dict[str, Any] | None], E],
    *,
    forgetting: bool,
    run: Runner,
) -> Removal[E]:
    if not stores:
        return Removal(await run(mutate, None), RemovalReport())
    plan: _Plan = await run(_plan, ledger, fact_id, forgetting=forgetting)
    restore: Restore | None = None
    if plan.uncovers is not None and stores.mirroring():
        restore = await _put_back(stores, plan.uncovers)
    extra = restore.record() if restore is not None and restore.external else None
    try:
        event = await run(mutate, extra)
    except BaseException:
        if restore is not None and restore.external and plan.uncovers is not None:
            await stores.compensate(plan.uncovers, restore.external)
        raise
    fact = plan.fact
    if fact is None or not fact.external:
        return Removal(event, RemovalReport(), restore)
    return Removal(event, await stores.remove_all(fact), restore)


async def retract_through(
    ledger: Ledger,
    stores: StoreSet,
    *,
    fact_id: str,
    actor: str,
    reason: str,
    receipt_id: str | None = None,
    run: Runner = _inline,
) -> Removal[RetractEvent]:
    """Retract in the ledger and remove from every store holding the fact; put back what the
    retraction makes current again (mirroring stores), recording its ids on the event."""

    def mutate(extra: dict[str, Any] | None) -> RetractEvent:
        return ledger.retract(fact_id=fact_id, actor=actor, reason=reason,
                              receipt_id=receipt_id, extra=extra)

    return await _leave_present(ledger, stores, fact_id, mutate, forgetting=False, run=run)


async def forget_through(
    ledger: Ledger,
    stores: StoreSet,
    *,
    fact_id: str,
    actor: str,
    reason: str,
    receipt_id: str | None = None,
    keep_digest: bool = True,
    run: Runner = _inline,
) -> Removal[ForgetEvent]:
    """Forget in the ledger, then remove from every store (the removal and its verification
    use the value taken before the erasure, the ledger no longer has it); puts back what the
    forget makes current again, like :func:`retract_through`."""

    def mutate(extra: dict[str, Any] | None) -> ForgetEvent:
        return ledger.forget(fact_id=fact_id, actor=actor, reason=reason, receipt_id=receipt_id,
                             keep_digest=keep_digest, extra=extra)

    return await _leave_present(ledger, stores, fact_id, mutate, forgetting=True, run=run)


async def supersede_through(
    ledger: Ledger, stores: StoreSet, event: AssertEvent, *, run: Runner = _inline
) -> RemovalReport | None:
    """After ``event`` (appended) superseded a fact, remove that fact from the mirroring stores.

    Returns None when there is nothing to mirror (no supersession, no mirroring store).
    """
    mirroring = [s.name for s in stores.mirroring()]
    if event.supersedes is None or not mirroring:
        return None
    old: Fact | None = await run(current_fact, ledger, event.supersedes)
    if old is None or not old.external:
        return RemovalReport()
    return await stores.remove_all(old, only=mirroring)
