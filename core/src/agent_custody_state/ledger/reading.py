"""The ledger's reads (SPEC 2.2, 2.6, 2.7, 2.9): as-of, get, history and the other queries.

A mixin of ``Ledger``, kept apart from the mutations so each file reads as one concern. Reads
ask the backend narrow questions (one indexed query on SQL) and derive the rest in ``queries``.
"""

from __future__ import annotations

from collections.abc import Iterator

from agent_custody_state.canonical import js_sorted
from agent_custody_state.ledger.arguments import required_time_arg, text_arg, time_arg
from agent_custody_state.ledger.backend import EventBackend, KeyName
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.lifecycle import writes
from agent_custody_state.ledger.model import (
    PROVENANCE_RANK,
    AssertEvent,
    ConfirmEvent,
    Event,
    Fact,
    handed,
    handed_fact,
)
from agent_custody_state.ledger.owned import key_values_args, read_key, read_keys
from agent_custody_state.ledger.queries import (
    FactState,
    SweepPlan,
    Timeline,
    current_external,
    effective_superseders,
    fact_states,
    state_name,
    states_from,
    walk_from,
)
from agent_custody_state.ledger.readonly import check_writable
from agent_custody_state.ledger.requests import TimeLike
from agent_custody_state.timeutil import wire_time_key


class LedgerReads:
    """Read methods; the host class provides ``backend`` and ``now()``."""

    backend: EventBackend

    def now(self) -> str:
        raise NotImplementedError

    def present(self) -> str:
        raise NotImplementedError

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
        read_keys(space=space, subject=subject, predicate=predicate)
        va = time_arg(valid_at, "valid_at")
        ta = time_arg(tx_at, "tx_at")
        if va is None or ta is None:  # the clock is read only when a time is left out
            # Never before this object's last append, so the write just made is believed
            # "now" also when the clock stepped back (``Ledger.present``: no backend call).
            now = self.present()
            va, ta = va or now, ta or now
        min_rank = {"all": 0, "attested": 1, "verified": 2}[include]
        return self.backend.consistent(
            lambda: self._as_of(va, ta, min_rank, space=space, subject=subject, predicate=predicate)
        )

    def _as_of(
        self,
        va: str,
        ta: str,
        min_rank: int,
        *,
        space: str | None,
        subject: str | None,
        predicate: str | None,
    ) -> list[Fact]:
        self.backend.refresh()
        # The candidates, with every event citing them or their superseders: one question (one
        # indexed query on SQL); deeper chains are asked for only past a retracted link.
        candidates, around = self.backend.asserts_for_as_of(
            space=space, subject=subject, predicate=predicate, tx_at=ta
        )
        if not candidates:
            return []
        states = states_from(around, tx_at=ta)
        alive = [c.fact for c in candidates if not states[c.fact.fact_id].retracted]
        supers = effective_superseders(
            self.backend,
            [fact.fact_id for fact in alive],
            tx_at=ta,
            around=around,
            states=states,
            covered={c.fact.fact_id for c in candidates},
        )
        out: list[Fact] = []
        for fact in alive:
            if wire_time_key(fact.valid_from) > va:
                continue
            successor = supers.get(fact.fact_id)
            valid_to = None if successor is None else successor.fact.valid_from
            if valid_to is not None and va >= wire_time_key(valid_to):
                continue
            provenance = "attested" if states[fact.fact_id].confirmed else fact.provenance
            if min_rank and PROVENANCE_RANK.get(provenance, 0) < min_rank:
                continue
            out.append(fact.presented(valid_to, provenance))
        return [
            handed_fact(fact, self.backend.keeps_objects) for fact in self.backend.open_values(out)
        ]

    def get(self, fact_id: str) -> Fact | None:
        """A fact in any state (confirmed provenance shown, validTo from supersession), or None."""
        fact_id = read_key(fact_id, "fact_id")
        return self.backend.consistent(lambda: self._get(fact_id))

    def _get(self, fact_id: str) -> Fact | None:
        self.backend.refresh()
        around, states, covered = walk_from(self.backend, [fact_id])
        state = states.get(fact_id)
        if state is None:
            return None
        successor = effective_superseders(
            self.backend, [fact_id], around=around, states=states, covered=covered
        ).get(fact_id)
        return self._presented(state, successor)

    def _presented(self, state: FactState, successor: AssertEvent | None) -> Fact:
        fact = state.assert_event.fact
        valid_to = successor.fact.valid_from if successor and not state.retracted else None
        provenance = "attested" if state.confirmed else fact.provenance
        return handed_fact(fact.presented(valid_to, provenance), self.backend.keeps_objects)

    def held(self, fact_id: str) -> bool:
        """Whether the fact is on legal hold now (SPEC 2.6)."""
        state = fact_states(self.backend, [read_key(fact_id, "fact_id")]).get(fact_id)
        return bool(state and state.held)

    def is_retracted(self, fact_id: str) -> bool:
        state = fact_states(self.backend, [read_key(fact_id, "fact_id")]).get(fact_id)
        return bool(state and state.retracted)

    def current_external(self, fact_id: str) -> dict[str, str]:
        """Where the stores hold the fact now: store name -> external id.

        The assert's ``external``, updated by every later re-put recorded on an event (the store
        mirror puts a fact back when a retraction makes it current again). Empty if unknown.
        Read on one snapshot, as ``get``: the facts below it and their events are one state's.
        """
        fact_id = read_key(fact_id, "fact_id")
        return self.backend.consistent(lambda: self._current_external(fact_id))

    def _current_external(self, fact_id: str) -> dict[str, str]:
        self.backend.refresh()
        return current_external(self.backend, fact_id)

    def history(self, fact_id: str) -> list[Event]:
        """The fact's assert, the asserts superseding it and every event citing it, oldest first."""
        read_key(fact_id, "fact_id")
        return [
            handed(event, self.backend.keeps_objects) for event in self.backend.history(fact_id)
        ]

    def facts(self) -> list[Fact]:
        """Every fact ever asserted, in append order, as stored (forgotten ones with value null).
        Read on one snapshot, as ``as_of``: the confirms are those of the state listed."""
        return self.backend.consistent(self._facts)

    def _facts(self) -> list[Fact]:
        events = list(self.backend.find_asserts())
        confirmed = {
            e.fact_id
            for e in self.backend.events_for([e.fact_id for e in events])
            if isinstance(e, ConfirmEvent)
        }
        keeps = self.backend.keeps_objects
        return [
            handed_fact(
                e.fact.with_(provenance="attested") if e.fact_id in confirmed else e.fact, keeps
            )
            for e in events
        ]

    def spaces(self) -> list[str]:
        """The spaces holding facts, sorted as the original sorts them (``Array.sort``: UTF-16
        code units; a backend answers in code-point order, which differs past U+FFFF)."""
        return js_sorted(self.backend.spaces())

    def key_values(self, key: KeyName, prefix: str = "", limit: int = 100) -> list[str]:
        """Values of a fact key (``subject``, ``predicate``, ``space``, ``factId``) of facts not
        forgotten, starting with ``prefix``, sorted, at most ``limit`` (for completions)."""
        return self.backend.key_values(*key_values_args(key, prefix, limit))

    def count(self) -> int:
        return self.backend.count()

    def learned_before(self, before: TimeLike, space: str | None = None) -> list[Fact]:
        """Facts whose assert ``txTime < before``, not yet forgotten, in append order (SPEC 2.7);
        refuses a ``space`` as ``sweep`` does."""
        cutoff = required_time_arg(before, "before")
        if space is not None:
            text_arg(space, "space")
        events = list(self.backend.find_asserts(space=space, tx_before=cutoff))
        keeps = self.backend.keeps_objects
        return [handed_fact(e.fact, keeps) for e in events if e.fact.forgotten is None]

    def timeline(
        self,
        subject: str,
        *,
        predicate: str | None = None,
        space: str | None = None,
        tx_at: TimeLike | None = None,
    ) -> Timeline:
        """Every fact about ``subject`` and every event about them, as known at ``tx_at``
        (default: now): what was believed (valid time) and when it was learned (transaction
        time). One indexed question on SQL, and one snapshot, as the as-of read."""
        ta = time_arg(tx_at, "tx_at")
        read_keys(subject=read_key(subject, "subject"), predicate=predicate, space=space)
        return self.backend.consistent(
            lambda: self._timeline(subject, predicate=predicate, space=space, ta=ta)
        )

    def _timeline(
        self, subject: str, *, predicate: str | None, space: str | None, ta: str | None
    ) -> Timeline:
        self.backend.refresh()
        asserts, around = self.backend.asserts_around(
            space=space, subject=subject, predicate=predicate, tx_at=ta
        )
        if not asserts:
            return Timeline(subject)
        states = states_from(around, tx_at=ta)
        ids = [a.fact_id for a in asserts]
        supers = effective_superseders(
            self.backend, ids, tx_at=ta, around=around, states=states, covered=ids
        )
        facts: list[Fact] = []
        names: dict[str, str] = {}
        keeps = self.backend.keeps_objects
        for event in asserts:
            state = states[event.fact_id]
            successor = None if state.retracted else supers.get(event.fact_id)
            provenance = "attested" if state.confirmed else event.fact.provenance
            valid_to = successor.fact.valid_from if successor else None
            facts.append(handed_fact(event.fact.presented(valid_to, provenance), keeps))
            names[event.fact_id] = state_name(state, successor is not None)
        events = [handed(e, keeps) for e in around if ta is None or wire_time_key(e.tx_time) <= ta]
        held = [i for i in ids if states[i].held]
        return Timeline(subject, facts, names, held, events)

    def status(self, fact_id: str) -> tuple[str, bool] | None:
        """``(state, held)`` of a fact now (``state`` as in ``timeline``), or None if unknown;
        read on one snapshot, as ``get``."""
        fact_id = read_key(fact_id, "fact_id")
        return self.backend.consistent(lambda: self._status(fact_id))

    def _status(self, fact_id: str) -> tuple[str, bool] | None:
        self.backend.refresh()
        around, states, covered = walk_from(self.backend, [fact_id])
        state = states.get(fact_id)
        if state is None:
            return None
        successor = effective_superseders(
            self.backend, [fact_id], around=around, states=states, covered=covered
        ).get(fact_id)
        return state_name(state, successor is not None and not state.retracted), state.held

    def plan_sweep(self, before: TimeLike, space: str | None = None) -> SweepPlan:
        """What ``sweep(before=..., space=...)`` would forget and which held facts it would
        keep, changing nothing (``sweep --dry-run``); refuses a ``space`` as ``sweep`` does.
        Read on one snapshot, as ``as_of``: the holds are those of the facts listed."""
        cutoff = required_time_arg(before, "before")
        if space is not None:
            text_arg(space, "space")
        return self.backend.consistent(lambda: self._plan_sweep(cutoff, space))

    def _plan_sweep(self, cutoff: str, space: str | None) -> SweepPlan:
        self.backend.refresh()
        asserts = [
            e
            for e in self.backend.find_asserts(space=space, tx_before=cutoff)
            if e.fact.forgotten is None
        ]
        states = fact_states(self.backend, [e.fact_id for e in asserts])
        held = {i for i, s in states.items() if s.held}
        return SweepPlan(
            forget=[
                handed(e, self.backend.keeps_objects) for e in asserts if e.fact_id not in held
            ],
            held=[e.fact_id for e in asserts if e.fact_id in held],
        )

    def export(self) -> Iterator[Event]:
        """Every event in append order (the JSONL audit copy of any store)."""
        return (handed(event, self.backend.keeps_objects) for event in self.backend.iter_events())

    @writes
    def compact(self) -> None:
        check_writable(self, "compact")
        self.backend.compact()
