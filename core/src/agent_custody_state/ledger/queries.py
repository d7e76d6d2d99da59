"""Derived state the rules and reads need: per-fact status and the effective superseder.

Both are computed from a few store queries over the facts in question, never from a full scan.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.model import (
    AssertEvent,
    ConfirmEvent,
    Event,
    Fact,
    ForgetEvent,
    HoldEvent,
    ReleaseEvent,
    RetractEvent,
)
from agent_custody_state.timeutil import wire_time_key


@dataclass(slots=True)
class FactState:
    """What the events citing one fact say about it (as of some transaction time)."""

    assert_event: AssertEvent
    retracted: bool = False
    forgotten: bool = False
    confirmed: bool = False
    held: bool = False


@dataclass(frozen=True, slots=True)
class SweepResult:
    """What a sweep did: the forget events written and the held facts it skipped; with
    ``certificates=``, each forgotten fact's ``CertifiedForget`` by fact id."""

    forgotten: list[ForgetEvent] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    certificates: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Timeline:
    """Everything the ledger holds about one subject, on both time axes (``Ledger.timeline``).

    ``facts``: every fact asserted about the subject, in append order, as the ledger presents
    them (``validTo`` from the effective superseder, confirmed facts attested); ``states``: fact
    id -> ``current``, ``superseded``, ``retracted`` or ``forgotten``; ``held``: the facts on
    legal hold; ``events``: every event about these facts and what superseded them, in append
    order (the transaction-time axis: when each thing was learned).
    """

    subject: str
    facts: list[Fact] = field(default_factory=list)
    states: dict[str, str] = field(default_factory=dict)
    held: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SweepPlan:
    """What a sweep at one cutoff would do (``Ledger.plan_sweep``), changing nothing: the
    asserts of the facts it would forget and the ids of the held facts it would keep."""

    forget: list[AssertEvent] = field(default_factory=list)
    held: list[str] = field(default_factory=list)


def state_name(state: FactState, superseded: bool) -> str:
    """The one word ``timeline`` and ``show`` use for a fact's status now."""
    if state.forgotten:
        return "forgotten"
    if state.retracted:
        return "retracted"
    return "superseded" if superseded else "current"


def states_from(events: Iterable[Event], *, tx_at: str | None = None) -> dict[str, FactState]:
    """Status of every fact whose assert is among ``events`` (which are in append order)."""
    states: dict[str, FactState] = {}
    for event in events:
        if tx_at is not None and wire_time_key(event.tx_time) > tx_at:
            continue
        if isinstance(event, AssertEvent):
            fact_id = event.fact.fact_id
            if fact_id not in states:
                states[fact_id] = FactState(event)
            continue
        state = states.get(event.fact_id)
        if state is None:
            continue  # an event citing a fact asserted later than tx_at, or never
        if isinstance(event, RetractEvent):
            state.retracted = True
        elif isinstance(event, ForgetEvent):
            state.retracted = True
            state.forgotten = True
        elif isinstance(event, ConfirmEvent):
            state.confirmed = True
        elif isinstance(event, HoldEvent):
            state.held = True
        elif isinstance(event, ReleaseEvent):
            state.held = False
    return states


def fact_states(
    store: EventBackend, fact_ids: Collection[str], *, tx_at: str | None = None
) -> dict[str, FactState]:
    """Status of each known fact id (unknown ids are absent from the result)."""
    if not fact_ids:
        return {}
    return states_from(store.events_for(fact_ids), tx_at=tx_at)


def walk_from(
    store: EventBackend, fact_ids: Collection[str]
) -> tuple[list[Event], dict[str, FactState], set[str]]:
    """What reading facts by id needs, in one question where the backend can: the events along
    their supersession chains (``EventBackend.events_along``), the states of the facts in them
    (now), and the facts whose superseders the events hold (``effective_superseders``'s
    ``covered``): the facts asked for and, when the backend walked the chain, every retracted
    one in it."""
    events, walked = store.events_along(fact_ids)
    states = states_from(events)
    covered = set(fact_ids)
    if walked:
        covered.update(fact_id for fact_id, state in states.items() if state.retracted)
    return events, states, covered


def effective_superseders(
    store: EventBackend,
    fact_ids: Collection[str],
    *,
    tx_at: str | None = None,
    around: Sequence[Event] | None = None,
    states: dict[str, FactState] | None = None,
    covered: Collection[str] = (),
) -> dict[str, AssertEvent]:
    """For each fact, the assert that currently supersedes it, skipping retracted links.

    If B superseded A and B is retracted, B's own effective superseder stands in for it, so in
    A <- B <- C retracting B leaves C superseding A, and retracting C makes B (or A) current again.

    ``around``: ``store.events_around(ids)`` for a superset of ``fact_ids``, when the caller
    already has it (it answers the first level without another query); ``states``:
    ``states_from(around, tx_at=tx_at)``, when the caller has computed it too; ``covered``:
    facts whose superseders ``around`` holds too (the ids it was asked for). A retracted link
    among them is followed in ``around`` without a question: an as-of by subject finds every
    link of a chain (a replacement keeps the subject and predicate), so it asks only when the
    ledger breaks that rule (an imported or hand-made file) or a filter left a link out.
    """
    if around is not None and states is not None:
        direct = _direct_superseders(around, fact_ids, states, tx_at)
        if direct is not None:
            return direct
    base, base_states = around, states
    covered = frozenset(covered) if base is not None else frozenset()
    children: dict[str, list[AssertEvent]] = {}
    retracted: set[str] = set()
    frontier = set(fact_ids)
    seen: set[str] = set()
    placed: set[str] = set()  # superseders already filed under their parent
    first = True
    while frontier:
        seen |= frontier
        # One question per level: the superseders of the frontier and every event citing them
        # (none when ``around`` holds them).
        parts: list[tuple[Sequence[Event], bool]] = []
        ask = frontier if first and base is None else (set() if first else frontier - covered)
        if ask:
            parts.append((store.events_around(ask), False))
        if base is not None and (first or ask != frontier):
            parts.append((base, True))
        first = False
        found_here: list[AssertEvent] = []
        for events, is_base in parts:
            found = [
                e
                for e in events
                if isinstance(e, AssertEvent)
                and e.supersedes in frontier
                and e.fact_id not in placed
                and (tx_at is None or wire_time_key(e.tx_time) <= tx_at)
            ]
            if not found:
                continue
            if is_base:
                if base_states is None:
                    base_states = states_from(events, tx_at=tx_at)
                part_states = base_states
            else:
                part_states = states_from(events, tx_at=tx_at)
            for e in found:
                placed.add(e.fact_id)
                children.setdefault(e.supersedes or "", []).append(e)
                if part_states[e.fact_id].retracted:
                    retracted.add(e.fact_id)
            found_here += found
        if not found_here:
            break
        # Only retracted links need their own superseders looked at.
        frontier = {e.fact_id for e in found_here if e.fact_id in retracted} - seen

    result: dict[str, AssertEvent] = {}
    for fact_id in fact_ids:
        successor = _first_live(children, retracted, fact_id)
        if successor is not None:
            result[fact_id] = successor
    return result


def _direct_superseders(
    around: Sequence[Event],
    fact_ids: Collection[str],
    states: dict[str, FactState],
    tx_at: str | None,
) -> dict[str, AssertEvent] | None:
    """``effective_superseders``'s answer in one pass over ``around`` when no fact's first
    superseder in it is retracted (every read of current facts, nearly always): each fact's
    first superseder in append order (seen by ``tx_at``), or None when some fact's first one is
    retracted and the chain must be walked. The walk's first level reads only ``around`` too,
    and a fact whose first superseder there is live has it as its effective one whatever
    follows."""
    wanted = set(fact_ids)
    first: dict[str, AssertEvent] = {}
    for e in around:
        if e.__class__ is not AssertEvent and not isinstance(e, AssertEvent):
            continue
        parent = e.supersedes
        if parent not in wanted or parent in first:
            continue
        if tx_at is not None and wire_time_key(e.tx_time) > tx_at:
            continue
        if states[e.fact.fact_id].retracted:
            return None
        first[parent] = e
    return {f: first[f] for f in fact_ids if f in first}


#: How many retracted links down a chain ``_first_live`` follows.
MAX_CHAIN_DEPTH = 10_000


def _first_live(
    children: dict[str, list[AssertEvent]], retracted: set[str], fact_id: str
) -> AssertEvent | None:
    """The first superseder of ``fact_id`` (in append order) that is not retracted, looking
    through retracted ones depth first. A loop with a stack, not a nested recursive function:
    that one formed a reference cycle with its closure, so every read left its events for the
    garbage collector (and a chain of a thousand retracted links hit the recursion limit).
    Each fact's superseders are looked through once: a hand-made file may link facts in a
    cycle, or name one fact twice, and without ``seen`` the walk went round such a loop until
    ``MAX_CHAIN_DEPTH``, down every branch (a read that never ended). A fact looked through
    already held no live superseder, so skipping it changes no answer."""
    seen = {fact_id}
    stack = [iter(children.get(fact_id, ()))]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
        elif child.fact_id not in retracted:
            return child
        elif child.fact_id not in seen and len(stack) <= MAX_CHAIN_DEPTH:
            seen.add(child.fact_id)
            stack.append(iter(children.get(child.fact_id, ())))
    return None


#: The event key under which the store mirror records a fact put back into the stores:
#: ``{"factId": <the fact made current again>, "external": {store: id}}`` (SPEC 1.2 keeps it).
RESTORED_KEY = "restored"


def put_backs(store: EventBackend, fact_id: str) -> tuple[AssertEvent | None, list[dict[str, Any]]]:
    """The fact's assert and the ``restored`` records that put it back since, in append order.

    A fact is put back only by the retraction or forget of a fact that (transitively)
    superseded it, so only events of the facts below it in the supersession tree are read.
    """
    event = store.get_assert(fact_id)
    if event is None:
        return None, []
    below: set[str] = set()
    frontier = {fact_id}
    while frontier:
        children = {e.fact_id for e in store.superseders(frontier)} - below - {fact_id}
        below |= children
        frontier = children
    records = []
    for cited in store.events_for(below) if below else []:
        restored = getattr(cited, "extra", {}).get(RESTORED_KEY)
        if isinstance(restored, dict) and restored.get("factId") == fact_id:
            records.append(restored)
    return event, records


def current_external(store: EventBackend, fact_id: str) -> dict[str, str]:
    """The fact's external ids now: its assert's, updated by later ``restored`` records."""
    event, records = put_backs(store, fact_id)
    external = dict(event.fact.external or {}) if event is not None else {}
    for restored in records:
        ids = restored.get("external")
        if isinstance(ids, dict):
            external.update({k: v for k, v in ids.items() if isinstance(v, str)})
    return external
