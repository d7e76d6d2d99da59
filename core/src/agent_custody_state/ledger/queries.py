"""Derived state the rules and reads need: per-fact status and the effective superseder.

Both are computed from a few store queries over the facts in question, never from a full scan.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from ..eventstore import EventStore
from ..timeutil import wire_time_key
from .model import AssertEvent, ConfirmEvent, ForgetEvent, HoldEvent, ReleaseEvent, RetractEvent


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
    """What a sweep did: the forget events written and the held facts it skipped."""

    forgotten: list[ForgetEvent] = field(default_factory=list)
    held: list[str] = field(default_factory=list)


def fact_states(
    store: EventStore, fact_ids: Collection[str], *, tx_at: str | None = None
) -> dict[str, FactState]:
    """Status of each known fact id (unknown ids are absent from the result)."""
    states: dict[str, FactState] = {}
    if not fact_ids:
        return states
    for event in store.events_for(fact_ids):
        if tx_at is not None and wire_time_key(event.tx_time) > tx_at:
            continue
        if isinstance(event, AssertEvent):
            states.setdefault(event.fact_id, FactState(event))
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


def effective_superseders(
    store: EventStore, fact_ids: Collection[str], *, tx_at: str | None = None
) -> dict[str, AssertEvent]:
    """For each fact, the assert that currently supersedes it, skipping retracted links.

    If B superseded A and B is retracted, B's own effective superseder stands in for it, so in
    A <- B <- C retracting B leaves C superseding A, and retracting C makes B (or A) current again.
    """
    children: dict[str, list[AssertEvent]] = {}
    retracted: set[str] = set()
    frontier = set(fact_ids)
    seen: set[str] = set()
    while frontier:
        seen |= frontier
        found = [
            e for e in store.superseders(frontier)
            if tx_at is None or wire_time_key(e.tx_time) <= tx_at
        ]
        if not found:
            break
        for e in found:
            children.setdefault(e.supersedes or "", []).append(e)
        ids = [e.fact_id for e in found]
        for state_id, state in fact_states(store, ids, tx_at=tx_at).items():
            if state.retracted:
                retracted.add(state_id)
        # Only retracted links need their own superseders looked at.
        frontier = {e.fact_id for e in found if e.fact_id in retracted} - seen

    def resolve(fact_id: str, depth: int = 0) -> AssertEvent | None:
        if depth > 10_000:
            return None
        for child in children.get(fact_id, ()):
            if child.fact_id not in retracted:
                return child
            deeper = resolve(child.fact_id, depth + 1)
            if deeper is not None:
                return deeper
        return None

    result: dict[str, AssertEvent] = {}
    for fact_id in fact_ids:
        successor = resolve(fact_id)
        if successor is not None:
            result[fact_id] = successor
    return result


#: The event key under which the store mirror records a fact put back into the stores:
#: ``{"factId": <the fact made current again>, "external": {store: id}}`` (SPEC 1.2 keeps it).
RESTORED_KEY = "restored"


def current_external(store: EventStore, fact_id: str) -> dict[str, str]:
    """The fact's external ids now: its assert's, updated by later ``restored`` records.

    A fact is put back only by the retraction or forget of a fact that (transitively)
    superseded it, so only events of the facts below it in the supersession tree are read.
    """
    event = store.get_assert(fact_id)
    if event is None:
        return {}
    external = dict(event.fact.external or {})
    below: set[str] = set()
    frontier = {fact_id}
    while frontier:
        children = {e.fact_id for e in store.superseders(frontier)} - below - {fact_id}
        below |= children
        frontier = children
    if not below:
        return external
    for cited in store.events_for(below):
        restored = getattr(cited, "extra", {}).get(RESTORED_KEY)
        if isinstance(restored, dict) and restored.get("factId") == fact_id:
            ids = restored.get("external")
            if isinstance(ids, dict):
                external.update({k: v for k, v in ids.items() if isinstance(v, str)})
    return external
