"""The ledger's rules (SPEC section 2), checked against what the backend holds right now.

One function per kind of check, shared by every path that needs it: ``check_assert`` serves a
lone ``assert_fact`` and each item of an ``assert_many`` batch alike (a batch only adds the facts
asserted earlier in it); ``refuse`` answers, for the state-changing events (retract, confirm,
hold, release, forget), whether the fact's current state allows them.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from typing import Literal

from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.model import AssertEvent
from agent_custody_state.ledger.queries import (
    FactState,
    effective_superseders,
    walk_from,
)
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.timeutil import wire_time_key

Action = Literal["retract", "confirm", "hold", "release", "forget"]


@dataclass
class Batch:
    """The asserts accepted so far in one transaction, and which facts they supersede."""

    asserts: dict[str, AssertEvent] = field(default_factory=dict)
    superseded: set[str] = field(default_factory=set)

    def add(self, event: AssertEvent) -> None:
        self.asserts[event.fact_id] = event
        if event.supersedes is not None:
            self.superseded.add(event.supersedes)


def check_assert(
    backend: EventBackend,
    event: AssertEvent,
    batch: Batch | None = None,
    known: Container[str] | None = None,
    *,
    fresh: bool = False,
    defer: bool = False,
) -> FactState | None:
    """Rules 2.1 for one assert; raises ``LedgerError``. Returns the state now of the fact it
    supersedes (None when it supersedes none): its assert serves ``check_replacement`` after a
    restamp, its state a caller's precondition.

    ``batch``: asserts accepted earlier in the same transaction (they may be superseded too).
    ``known``: which of a batch's fact ids the backend already holds, asked once for the whole
    batch (None: ask the backend now). ``fresh``: the ledger drew the fact id itself (a random
    version-4 UUID, as it draws every event id), so no stored fact holds it and it is not
    looked up: a plain assert reads nothing (docs/decisions.md). ``defer``: the replacement's
    ``validFrom`` is left to the check at the final stamp (``deferred_time``).

    A replacement of a stored fact is checked from one question (``walk_from``, one indexed
    query on SQL): the superseded fact's chain, which also holds the new fact id's assert if
    that id is taken, the superseded fact's assert and every event that decides its state.
    """
    batch = batch or Batch()
    fact = event.fact
    sup = event.supersedes
    walk = None
    if known is not None:
        exists = fact.fact_id in known
    elif sup is not None and sup not in batch.asserts and sup not in batch.superseded:
        walk = walk_from(backend, [sup] if fresh else [sup, fact.fact_id])
        exists = fact.fact_id in walk[1]
    else:
        exists = not fresh and backend.get_assert(fact.fact_id) is not None
    if fact.fact_id in batch.asserts or exists:
        raise LedgerError(
            f"fact {fact.fact_id} already exists", field="fact_id", code="fact_exists"
        )
    if sup is None:
        return None
    if sup in batch.superseded:
        raise LedgerError(f"fact {sup} is already superseded", code="already_superseded")
    in_batch = batch.asserts.get(sup)
    if in_batch is not None:  # a fact of this batch has no other superseder and is live
        check_replacement(event, in_batch, defer=defer)
        return FactState(in_batch)
    around, states, covered = walk or walk_from(backend, [sup])
    state = states.get(sup)
    if state is None:
        raise unknown_fact("supersede", sup)
    supers = effective_superseders(backend, [sup], around=around, states=states, covered=covered)
    if supers.get(sup) is not None:
        raise LedgerError(f"fact {sup} is already superseded", code="already_superseded")
    if state.retracted:
        raise LedgerError(f"fact {sup} is retracted", code="retracted")
    check_replacement(event, state.assert_event, defer=defer)
    return state


def deferred_time(backend: EventBackend, request: AssertRequest) -> bool:
    """Whether a replacement's ``validFrom`` must wait for the final stamp: it defaults to the
    transaction time, and the stamp may still be raised to the last event's
    (``locking.in_order``: another host's writer with a clock ahead, or this host's clock
    stepped back). Compared at the provisional stamp, such a writer was refused ("cannot start
    before the fact it supersedes") although its final stamp follows that fact. ``backend`` is
    kept for callers (every backend defers alike)."""
    del backend
    return request.valid_from is None


def check_replacement(event: AssertEvent, old: AssertEvent, *, defer: bool = False) -> None:
    """The rules 2.1 between a replacement and the assert it supersedes that read nothing from
    the backend: the only ones that depend on the transaction time (through a ``validFrom``
    defaulted to it), so the ledger runs them again once the event has its final stamp
    (``defer``: a ``validFrom`` earlier at this stamp may not be at the final one, which is never
    earlier; both rules are then left to the check at the final stamp, so they keep the order
    of SPEC 2.1 there)."""
    fact = event.fact
    if wire_time_key(fact.valid_from) < wire_time_key(old.fact.valid_from):
        if defer:
            return
        raise LedgerError(
            "replacement cannot start before the fact it supersedes", code="bad_replacement"
        )
    if fact.subject != old.fact.subject or fact.predicate != old.fact.predicate:
        raise LedgerError(
            "a replacement must keep the subject and predicate of the fact it supersedes",
            code="bad_replacement",
        )


def refuse(action: Action, state: FactState) -> LedgerError | None:
    """Why ``action`` may not happen to a fact in ``state`` (SPEC 2.3-2.6), or None."""
    fact_id = state.assert_event.fact_id
    if action == "retract" and state.retracted:
        return LedgerError(f"fact {fact_id} is already retracted", code="already_retracted")
    if action == "confirm":
        if state.retracted:
            return LedgerError(f"fact {fact_id} is retracted", code="retracted")
        if state.assert_event.fact.provenance != "claimed" or state.confirmed:
            return LedgerError(f"fact {fact_id} is already attested", code="already_attested")
    if action in ("hold", "forget") and state.forgotten:
        return LedgerError(f"fact {fact_id} is already forgotten", code="already_forgotten")
    if action == "hold" and state.held:
        return LedgerError(f"fact {fact_id} is already on hold", code="already_on_hold")
    if action == "forget" and state.held:
        return LedgerError(f"fact {fact_id} is on legal hold; release it first", code="on_hold")
    if action == "release" and not state.held:
        return LedgerError(f"fact {fact_id} is not on hold", code="not_on_hold")
    return None


def check_known(states: Mapping[str, FactState], fact_id: str, action: Action) -> FactState:
    """The fact's state, or the SPEC's ``cannot <action> unknown fact <id>`` refusal."""
    state = states.get(fact_id)
    if state is None:
        raise unknown_fact(action, fact_id)
    return state


def unknown_fact(action: str, fact_id: str) -> LedgerError:
    """The refusal for a fact id the ledger does not know; also what a caller gets for a fact
    it may not see (a space-scoped token), so the two cannot be told apart."""
    return LedgerError(f"cannot {action} unknown fact {fact_id}", code="unknown_fact")
