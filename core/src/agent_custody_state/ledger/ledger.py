"""The Ledger: the public face of the bitemporal model (SPEC sections 2 and 7).

Every mutation runs inside one ``EventStore.transaction()``: the rules are checked against what
the store holds at that moment (including other processes' writes) and the event is appended
before the section ends, so two racing supersessions cannot both pass rule 2.1.2.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from os import PathLike
from typing import Any

from ..canonical import value_digest
from ..eventstore import EventStore
from ..timeutil import TimeFormatError, format_time, utc_now, wire_time_key
from .errors import LedgerError
from .model import (
    PROVENANCE_RANK,
    AssertEvent,
    ConfirmEvent,
    Event,
    Fact,
    ForgetEvent,
    Forgotten,
    HoldEvent,
    ReleaseEvent,
    RetractEvent,
    Source,
)
from .queries import (
    FactState,
    SweepResult,
    current_external,
    effective_superseders,
    fact_states,
    states_from,
)

from .arguments import (
    ACTION_WIRE_KEYS,
    FORGET_WIRE_KEYS,
    TimeLike,
    build_assert,
    extra_arg,
    new_id,
    text_arg,
    time_arg,
)

log = logging.getLogger(__name__)

class Ledger:
    """A bitemporal, append-only ledger of facts over an ``EventStore``.

    ``Ledger("ledger.jsonl")``, ``Ledger("ledger.sqlite")``, ``Ledger("postgresql://...")`` or
    ``Ledger(store)``. ``forget_key`` keys forget digests (HMAC-SHA256); ``clock`` returns an aware
    datetime (tests pin it).
    """

    def __init__(
        self,
        location: str | PathLike[str] | EventStore,
        forget_key: str | None = None,
        clock: Callable[[], datetime] | None = None,
        **store_options: Any,
    ) -> None:
        if isinstance(location, EventStore):
            self.store = location
        else:
            from ..plugins import open_store

            self.store = open_store(location, **store_options)
        self.forget_key = forget_key or None
        self._clock = clock or utc_now
        self._listeners: list[Callable[[Ledger, Event], None]] = []
        from ..plugins import get_plugin_manager

        self._pm = get_plugin_manager()

    # -- plumbing ------------------------------------------------------------------------------

    def now(self) -> str:
        moment = self._clock()
        try:
            return format_time(moment)
        except TimeFormatError as exc:
            raise LedgerError(f"clock: {exc}") from None

    def add_listener(self, listener: Callable[[Ledger, Event], None]) -> None:
        """Call ``listener(ledger, event)`` after each event is durably appended."""
        self._listeners.append(listener)

    def _appended(self, events: Iterable[Event]) -> None:
        for event in events:
            for listener in self._listeners:
                listener(self, event)
            try:
                self._pm.hook.event_appended(ledger=self, event=event)
            except Exception:  # a notification must never undo a durable write
                log.exception("event_appended hook failed for event %s", event.event_id)

    @property
    def location(self) -> str:
        return self.store.location

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()

    # -- assert --------------------------------------------------------------------------------

    def _build_assert(self, **kwargs: Any) -> AssertEvent:
        return build_assert(self.now, **kwargs)

    def _check_assert(
        self,
        event: AssertEvent,
        batch: Mapping[str, AssertEvent] = {},
        known: Container[str] | None = None,
    ) -> None:
        """Rules 2.1 for one assert. ``known``: the fact ids among a batch's that the store
        already holds, looked up in one query by ``assert_many`` (None: ask the store)."""
        fact = event.fact
        exists = (
            fact.fact_id in known if known is not None
            else self.store.get_assert(fact.fact_id) is not None
        )
        if fact.fact_id in batch or exists:
            raise LedgerError(f"fact {fact.fact_id} already exists", field="fact_id")
        sup = event.supersedes
        if sup is None:
            return
        old = batch.get(sup) or self.store.get_assert(sup)
        if old is None:
            raise LedgerError(f"cannot supersede unknown fact {sup}")
        around = self.store.events_around([sup])  # one question answers rules 2 and 3
        if effective_superseders(self.store, [sup], around=around).get(sup) is not None:
            raise LedgerError(f"fact {sup} is already superseded")
        state = states_from(around).get(sup)
        if state is not None and state.retracted:
            raise LedgerError(f"fact {sup} is retracted")
        if wire_time_key(fact.valid_from) < wire_time_key(old.fact.valid_from):
            raise LedgerError("replacement cannot start before the fact it supersedes")
        if fact.subject != old.fact.subject or fact.predicate != old.fact.predicate:
            raise LedgerError(
                "a replacement must keep the subject and predicate of the fact it supersedes"
            )

    def validate_assert(self, **kwargs: Any) -> None:
        """Run every check of ``assert_fact`` without writing; raises ``LedgerError``."""
        self.store.refresh()
        self._check_assert(self._build_assert(**kwargs))

    def assert_fact(self, **kwargs: Any) -> AssertEvent:
        """Assert a fact (SPEC 2.1). Keyword arguments as SPEC section 7; returns the event."""
        with self.store.transaction():
            # The transaction time is taken under the write lock, as every other event's is, so
            # append order and transaction time agree across processes: an event stamped before
            # another committed first would change what a read "as of" that instant returns.
            event = self._build_assert(**kwargs)
            self._check_assert(event)
            self.store.append([event])
        self._appended([event])
        return event

    def assert_many(self, items: Iterable[Mapping[str, Any]]) -> list[AssertEvent]:
        """Assert many facts in one transaction (bulk ingest): all are appended, or none.

        Each item takes ``assert_fact``'s keyword arguments; an item may supersede a fact asserted
        earlier in the same batch.
        """
        events: list[AssertEvent] = []
        with self.store.transaction():
            # Build every event first, so the store is asked once which of their fact ids it
            # already holds (not once per item); the first build error is raised at its place
            # in the item order, after the checks of the items before it, as before.
            built: list[AssertEvent] = []
            build_error: BaseException | None = None
            try:
                for item in items:
                    built.append(self._build_assert(**item))
            except Exception as exc:
                build_error = exc
            known = {
                e.fact_id for e in self.store.events_for([e.fact_id for e in built])
                if isinstance(e, AssertEvent)
            }
            batch: dict[str, AssertEvent] = {}
            pending_sup: set[str] = set()
            for i, event in enumerate(built):
                try:
                    sup = event.supersedes
                    if sup is not None and sup in batch:
                        # Superseding a fact from this batch: only the batch can hold a superseder.
                        if sup in pending_sup:
                            raise LedgerError(f"fact {sup} is already superseded")
                        self._check_assert(
                            AssertEvent(event.event_id, event.tx_time, event.fact, None), batch,
                            known,
                        )
                        old = batch[sup].fact
                        if wire_time_key(event.fact.valid_from) < wire_time_key(old.valid_from):
                            raise LedgerError(
                                "replacement cannot start before the fact it supersedes"
                            )
                        if (event.fact.subject, event.fact.predicate) != (
                            old.subject, old.predicate
                        ):
                            raise LedgerError(
                                "a replacement must keep the subject and predicate of the fact "
                                "it supersedes"
                            )
                    else:
                        if sup is not None and sup in pending_sup:
                            raise LedgerError(f"fact {sup} is already superseded")
                        self._check_assert(event, batch, known)
                except LedgerError as exc:
                    raise LedgerError(f"item {i}: {exc}", field=exc.field) from None
                if sup is not None:
                    pending_sup.add(sup)
                batch[event.fact_id] = event
                events.append(event)
            if build_error is not None:
                raise build_error
            self.store.append(events)
        self._appended(events)
        return events

    def import_events(self, events: Iterable[Event], *, batch_size: int = 5000) -> int:
        """Append exported events unchanged (``agent-custody-memory import``); needs an empty ledger."""
        if self.store.count():
            raise LedgerError(
                f"import needs an empty ledger; {self.location} already has "
                f"{self.store.count()} events"
            )
        total = 0
        batch: list[Event] = []
        for event in events:
            batch.append(event)
            if len(batch) >= batch_size:
                with self.store.transaction():
                    self.store.append(batch)
                total += len(batch)
                batch = []
        if batch:
            with self.store.transaction():
                self.store.append(batch)
            total += len(batch)
        return total

    # -- the other mutations ---------------------------------------------------------------------

    def _state(self, fact_id: str, verb: str) -> FactState:
        text_arg(fact_id, "fact_id")
        state = fact_states(self.store, [fact_id]).get(fact_id)
        if state is None:
            raise LedgerError(f"cannot {verb} unknown fact {fact_id}")
        return state

    def retract(
        self,
        *,
        fact_id: str,
        actor: str,
        reason: str,
        receipt_id: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> RetractEvent:
        """Retract a fact (SPEC 2.3): it leaves the present; what it superseded is believed again.

        ``extra``: additional keys recorded on the event after the wire keys (SPEC 1.2 keeps
        unknown keys); the store mirror records restored external ids there.
        """
        text_arg(actor, "actor", empty_ok=True)
        text_arg(reason, "reason", empty_ok=True)
        more = extra_arg(extra, ACTION_WIRE_KEYS)
        with self.store.transaction():
            state = self._state(fact_id, "retract")
            if state.retracted:
                raise LedgerError(f"fact {fact_id} is already retracted")
            event = RetractEvent(
                new_id(), self.now(), fact_id, actor, reason, Source(receipt_id), more
            )
            self.store.append([event])
        self._appended([event])
        return event

    def confirm(self, *, fact_id: str, actor: str, receipt_id: str | None = None) -> ConfirmEvent:
        """Lift a claimed fact out of quarantine (SPEC 2.4)."""
        text_arg(actor, "actor", empty_ok=True)
        with self.store.transaction():
            state = self._state(fact_id, "confirm")
            if state.retracted:
                raise LedgerError(f"fact {fact_id} is retracted")
            if state.assert_event.fact.provenance != "claimed" or state.confirmed:
                raise LedgerError(f"fact {fact_id} is already attested")
            event = ConfirmEvent(new_id(), self.now(), fact_id, actor, Source(receipt_id))
            self.store.append([event])
        self._appended([event])
        return event

    def hold(
        self, *, fact_id: str, actor: str, reason: str, receipt_id: str | None = None
    ) -> HoldEvent:
        """Place a legal hold (SPEC 2.6): forget and sweep are refused until released."""
        text_arg(actor, "actor", empty_ok=True)
        text_arg(reason, "reason", empty_ok=True)
        with self.store.transaction():
            state = self._state(fact_id, "hold")
            if state.forgotten:
                raise LedgerError(f"fact {fact_id} is already forgotten")
            if state.held:
                raise LedgerError(f"fact {fact_id} is already on hold")
            event = HoldEvent(new_id(), self.now(), fact_id, actor, reason, Source(receipt_id))
            self.store.append([event])
        self._appended([event])
        return event

    def release(
        self, *, fact_id: str, actor: str, reason: str, receipt_id: str | None = None
    ) -> ReleaseEvent:
        """Release a legal hold."""
        text_arg(actor, "actor", empty_ok=True)
        text_arg(reason, "reason", empty_ok=True)
        with self.store.transaction():
            state = self._state(fact_id, "release")
            if not state.held:
                raise LedgerError(f"fact {fact_id} is not on hold")
            event = ReleaseEvent(new_id(), self.now(), fact_id, actor, reason, Source(receipt_id))
            self.store.append([event])
        self._appended([event])
        return event

    def held(self, fact_id: str) -> bool:
        state = fact_states(self.store, [fact_id]).get(fact_id)
        return bool(state and state.held)

    def forget(
        self,
        *,
        fact_id: str,
        actor: str,
        reason: str,
        receipt_id: str | None = None,
        keep_digest: bool = True,
        extra: Mapping[str, Any] | None = None,
    ) -> ForgetEvent:
        """Erase a fact's value, keeping its digest (SPEC 2.5); rewrite and record are atomic.

        ``extra``: additional keys recorded on the forget event, as for ``retract``.
        """
        more = extra_arg(extra, FORGET_WIRE_KEYS)
        event = self._forget(fact_id, actor, reason, receipt_id, keep_digest, more)
        self.store.compact()
        self._appended([event])
        return event

    def _forget(
        self,
        fact_id: str,
        actor: str,
        reason: str,
        receipt_id: str | None,
        keep_digest: bool,
        extra: dict[str, Any] | None = None,
    ) -> ForgetEvent:
        text_arg(actor, "actor", empty_ok=True)
        text_arg(reason, "reason", empty_ok=True)
        with self.store.transaction():
            state = self._state(fact_id, "forget")
            if state.forgotten:
                raise LedgerError(f"fact {fact_id} is already forgotten")
            if state.held:
                raise LedgerError(f"fact {fact_id} is on legal hold; release it first")
            digest, kind = value_digest(
                state.assert_event.fact.value, forget_key=self.forget_key, keep_digest=keep_digest
            )
            tx = self.now()
            event = ForgetEvent(
                new_id(), tx, fact_id, actor, reason, Source(receipt_id), digest, kind,
                dict(extra or {}),
            )
            self.store.forget(fact_id, Forgotten(digest, kind, tx), event)
        return event

    def sweep(
        self,
        *,
        before: TimeLike,
        actor: str,
        reason: str,
        space: str | None = None,
        receipt_id: str | None = None,
        keep_digest: bool = True,
    ) -> SweepResult:
        """Forget every fact learned before ``before`` (transaction time), skipping held ones."""
        cutoff = time_arg(before, "before")
        assert cutoff is not None
        if space is not None:
            text_arg(space, "space")
        forgotten: list[ForgetEvent] = []
        held: list[str] = []
        for fact in self.learned_before(cutoff, space):
            try:
                forgotten.append(
                    self._forget(fact.fact_id, actor, reason, receipt_id, keep_digest)
                )
            except LedgerError as exc:
                text = str(exc)
                if text.endswith("is on legal hold; release it first"):
                    held.append(fact.fact_id)
                elif text.endswith("is already forgotten"):
                    continue  # another process swept it first
                else:
                    raise
        if forgotten:
            self.store.compact()
        self._appended(forgotten)
        return SweepResult(forgotten=forgotten, held=held)

    # -- reads ---------------------------------------------------------------------------------

    def as_of(
        self,
        *,
        valid_at: TimeLike | None = None,
        tx_at: TimeLike | None = None,
        space: str | None = None,
        subject: str | None = None,
        predicate: str | None = None,
        include: str = "all",
    ) -> list[Fact]:
        """What was believed valid at ``valid_at``, as the ledger knew it at ``tx_at`` (SPEC 2.2)."""
        if include not in ("all", "attested", "verified"):
            raise LedgerError('include must be "all", "attested" or "verified"', field="include")
        now = self.now()
        va = time_arg(valid_at, "valid_at") or now
        ta = time_arg(tx_at, "tx_at") or now
        min_rank = {"all": 0, "attested": 1, "verified": 2}[include]
        self.store.refresh()
        # The candidates, with every event citing them or their superseders: one question (one
        # indexed query on SQL); deeper chains are asked for only past a retracted link.
        candidates, around = self.store.asserts_around(
            space=space, subject=subject, predicate=predicate, tx_at=ta
        )
        if not candidates:
            return []
        states = states_from(around, tx_at=ta)
        alive = [c for c in candidates if not states[c.fact_id].retracted]
        supers = effective_superseders(
            self.store, [c.fact_id for c in alive], tx_at=ta, around=around
        )
        out: list[Fact] = []
        for event in alive:
            fact = event.fact
            successor = supers.get(fact.fact_id)
            valid_to = successor.fact.valid_from if successor else None
            if wire_time_key(fact.valid_from) > va:
                continue
            if valid_to is not None and va >= wire_time_key(valid_to):
                continue
            provenance = "attested" if states[fact.fact_id].confirmed else fact.provenance
            if PROVENANCE_RANK.get(provenance, 0) < min_rank:
                continue
            out.append(fact.with_(valid_to=valid_to, provenance=provenance))
        return out

    def get(self, fact_id: str) -> Fact | None:
        """A fact in any state (confirmed provenance shown, validTo from supersession), or None."""
        self.store.refresh()
        around = self.store.events_around([fact_id])
        state = states_from(around).get(fact_id)
        if state is None:
            return None
        return self._present(state, around)

    def _present(self, state: FactState, around: Sequence[Event] | None = None) -> Fact:
        fact = state.assert_event.fact
        successor = effective_superseders(self.store, [fact.fact_id], around=around).get(
            fact.fact_id
        )
        valid_to = successor.fact.valid_from if successor and not state.retracted else None
        provenance = "attested" if state.confirmed else fact.provenance
        return fact.with_(valid_to=valid_to, provenance=provenance)

    def is_retracted(self, fact_id: str) -> bool:
        state = fact_states(self.store, [fact_id]).get(fact_id)
        return bool(state and state.retracted)

    def current_external(self, fact_id: str) -> dict[str, str]:
        """Where the stores hold the fact now: store name -> external id.

        The assert's ``external``, updated by every later re-put recorded on an event (the store
        mirror puts a fact back when a retraction makes it current again). Empty if unknown.
        """
        self.store.refresh()
        return current_external(self.store, fact_id)

    def history(self, fact_id: str) -> list[Event]:
        """The fact's assert, the asserts superseding it and every event citing it, oldest first."""
        return self.store.history(fact_id)

    def facts(self) -> list[Fact]:
        """Every fact ever asserted, in append order, as stored (forgotten ones with value null)."""
        events = list(self.store.find_asserts())
        confirmed = {
            e.fact_id for e in self.store.events_for([e.fact_id for e in events])
            if isinstance(e, ConfirmEvent)
        }
        return [
            e.fact.with_(provenance="attested") if e.fact_id in confirmed else e.fact
            for e in events
        ]

    def spaces(self) -> list[str]:
        return self.store.spaces()

    def count(self) -> int:
        return self.store.count()

    def learned_before(self, before: TimeLike, space: str | None = None) -> list[Fact]:
        """Facts whose assert ``txTime < before``, not yet forgotten, in append order (SPEC 2.7)."""
        cutoff = time_arg(before, "before")
        assert cutoff is not None
        events = list(self.store.find_asserts(space=space, tx_before=cutoff))
        return [e.fact for e in events if e.fact.forgotten is None]

    def export(self) -> Iterator[Event]:
        """Every event in append order (the JSONL audit copy of any store)."""
        return self.store.iter_events()

    def compact(self) -> None:
        self.store.compact()
