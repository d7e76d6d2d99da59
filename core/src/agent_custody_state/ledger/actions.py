"""Retract, confirm, hold and release (SPEC 2.3, 2.4, 2.6): a mixin of ``Ledger``.

The four share one path (``_record``): the fact's state is checked, with the caller's own
``precondition``, inside the write section, then the event is stamped and appended in the
backend's ordered phase (``Ledger._append_ordered``) and announced (``Ledger._appended``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from agent_custody_state.ledger.arguments import ACTION_WIRE_KEYS, extra_arg, new_id, text_arg
from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.lifecycle import writes
from agent_custody_state.ledger.locking import fact_keys, section
from agent_custody_state.ledger.model import (
    ConfirmEvent,
    Event,
    HoldEvent,
    ReleaseEvent,
    RetractEvent,
    Source,
    handed,
)
from agent_custody_state.ledger.owned import texts
from agent_custody_state.ledger.queries import FactState, fact_states
from agent_custody_state.ledger.readonly import check_writable
from agent_custody_state.ledger.rules import Action, check_known, refuse

E = TypeVar("E", bound=Event)

#: A caller's own condition on the fact a mutation touches (the retracted or forgotten fact, or
#: the fact an assert supersedes), checked inside the write section right after the fact is
#: known to exist, so no other writer can change the fact between the check and the append. It
#: raises ``LedgerError`` to refuse, and then nothing is written. The memory server uses it for
#: direct callers, who may change only claimed facts (``server/policy.py``).
Precondition = Callable[[FactState], None]


class LedgerActions:
    """``retract``, ``confirm``, ``hold`` and ``release``; ``Ledger`` provides the rest."""

    backend: EventBackend

    def _append_ordered(
        self, stamp: Callable[[str], Sequence[E]], provisional: str | None = None
    ) -> list[E]:
        raise NotImplementedError

    def _appended(self, events: Sequence[Event]) -> None:
        raise NotImplementedError

    def _state(self, fact_id: str, action: Action) -> FactState:
        states = fact_states(self.backend, [text_arg(fact_id, "fact_id", key=False)])
        return check_known(states, text_arg(fact_id, "fact_id", key=fact_id not in states), action)

    @writes
    def _record(
        self,
        action: Action,
        fact_id: str,
        make: Callable[[str, str], E],
        precondition: Precondition | None = None,
    ) -> E:
        """The one path of retract, confirm, hold and release: check the fact's state (and the
        caller's ``precondition``) under the write lock, stamp the event
        (``make(event_id, tx_time)``), append, then announce it."""
        with section(self.backend, fact_keys(self.backend, fact_id)):
            state = self._state(fact_id, action)
            if precondition is not None:
                precondition(state)
            error = refuse(action, state)
            if error is not None:
                raise error
            [event] = self._append_ordered(lambda tx: [make(new_id(), tx)])
        self._appended([event])
        return handed(event, self.backend.keeps_objects)

    def retract(
        self,
        *,
        fact_id: str,
        actor: str,
        reason: str,
        receipt_id: str | None = None,
        extra: Mapping[str, Any] | None = None,
        precondition: Precondition | None = None,
    ) -> RetractEvent:
        """Retract a fact (SPEC 2.3): it leaves the present; what it superseded is believed again.

        ``extra``: additional keys recorded on the event after the wire keys (SPEC 1.2 keeps
        unknown keys); the store mirror records restored external ids there. ``precondition``:
        the caller's condition on the fact, checked under the write lock.
        """
        check_writable(self, "retract")
        receipt_id, fact_id, actor, reason = texts(receipt_id, fact_id, actor, reason)
        more = extra_arg(extra, ACTION_WIRE_KEYS)
        return self._record(
            "retract",
            fact_id,
            lambda eid, tx: RetractEvent(eid, tx, fact_id, actor, reason, Source(receipt_id), more),
            precondition,
        )

    def confirm(self, *, fact_id: str, actor: str, receipt_id: str | None = None) -> ConfirmEvent:
        """Lift a claimed fact out of quarantine (SPEC 2.4)."""
        check_writable(self, "confirm")
        receipt_id, fact_id, actor = texts(receipt_id, fact_id, actor)
        return self._record(
            "confirm",
            fact_id,
            lambda eid, tx: ConfirmEvent(eid, tx, fact_id, actor, Source(receipt_id)),
        )

    def hold(
        self, *, fact_id: str, actor: str, reason: str, receipt_id: str | None = None
    ) -> HoldEvent:
        """Place a legal hold (SPEC 2.6): forget and sweep are refused until released."""
        check_writable(self, "hold")
        receipt_id, fact_id, actor, reason = texts(receipt_id, fact_id, actor, reason)
        return self._record(
            "hold",
            fact_id,
            lambda eid, tx: HoldEvent(eid, tx, fact_id, actor, reason, Source(receipt_id)),
        )

    def release(
        self, *, fact_id: str, actor: str, reason: str, receipt_id: str | None = None
    ) -> ReleaseEvent:
        """Release a legal hold."""
        check_writable(self, "release")
        receipt_id, fact_id, actor, reason = texts(receipt_id, fact_id, actor, reason)
        return self._record(
            "release",
            fact_id,
            lambda eid, tx: ReleaseEvent(eid, tx, fact_id, actor, reason, Source(receipt_id)),
        )


__all__ = ["LedgerActions", "Precondition"]
