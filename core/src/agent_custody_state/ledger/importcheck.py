"""What ``import_events`` checks before it appends anything: that the export reads as a ledger.

An export is appended unchanged (its ids, times and chain records kept), so what the ledger's
calls check one at a time is checked here over the whole export, in order, before the first
event is written; the first problem is a ``LedgerError`` naming the event's position (from 1)
and the ledger is left as it was:

* every event id is text and appears once; every assert's fact id appears once;
* every time (``txTime``, a fact's ``validFrom`` and ``validTo``) is an RFC 3339 time with an
  offset, as the readers compare them as instants (SPEC 1.3);
* subject, predicate, space and the ids are text a SQL column can hold (no lone surrogate);
* a supersede, retract, confirm, hold, release or forget names a fact asserted before it;
* a fact marked forgotten holds no value, and a forget event records it.

What the ledger's rules refuse between valid events (a second retract, a confirm of a fact that
was not quarantined) is not checked: the original and this implementation never wrote such an
export, and an import is the place to move a ledger, not to judge its history.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_custody_state.ledger.arguments import text_arg, time_arg
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.model import AssertEvent, Event, ForgetEvent


def check_export(events: Sequence[Event]) -> None:
    """Raise ``LedgerError("event <n>: ...")`` at the first event that cannot be imported.

    One loop with its state in locals and the common case tested inline (ASCII text, a time
    already seen: a batch shares its transaction time, and a fact's ``validFrom`` is mostly
    its ``txTime``), so an import pays well under a microsecond an event."""
    event_ids: dict[str, int] = {}
    asserted: dict[str, int] = {}
    forgotten: dict[str, int] = {}  # fact id -> its assert's position, until its forget
    times: set[str] = set()
    position = 0
    try:
        for position, event in enumerate(events, 1):
            event_id = event.event_id
            if type(event_id) is not str or not event_id or not event_id.isascii():
                text_arg(event_id, "eventId")
            if event_ids.setdefault(event_id, position) != position:
                raise LedgerError(f"eventId {event_id} is also event {event_ids[event_id]}'s")
            if event.tx_time not in times:
                _time(event.tx_time, "txTime", times)
            if type(event) is not AssertEvent:
                fact_id = getattr(event, "fact_id", None)
                _known(fact_id, asserted, f"a {event.kind}")
                if isinstance(event, ForgetEvent):
                    forgotten.pop(event.fact_id, None)
                continue
            fact = event.fact  # type: ignore[attr-defined]
            fact_id = fact.fact_id
            subject, predicate, space = fact.subject, fact.predicate, fact.space
            if not (
                type(fact_id) is type(subject) is type(predicate) is type(space) is str
                and fact_id
                and subject
                and predicate
                and space
                and (fact_id + subject + predicate + space).isascii()
            ):
                for value, name in (
                    (fact_id, "factId"),
                    (subject, "subject"),
                    (predicate, "predicate"),
                    (space, "space"),
                ):
                    text_arg(value, name)
            if fact.valid_from not in times:
                _time(fact.valid_from, "validFrom", times)
            if fact.valid_to is not None and fact.valid_to not in times:
                _time(fact.valid_to, "validTo", times)
            if event.supersedes is not None:  # type: ignore[attr-defined]
                _known(event.supersedes, asserted, "supersedes")  # type: ignore[attr-defined]
            if asserted.setdefault(fact_id, position) != position:
                raise LedgerError(f"fact {fact_id} is also asserted by event {asserted[fact_id]}")
            if fact.forgotten is not None:
                if fact.value is not None:
                    raise LedgerError(f"fact {fact_id} is marked forgotten but holds a value")
                forgotten[fact_id] = position
    except LedgerError as exc:
        raise LedgerError(f"event {position}: {exc}", field=exc.field, code="bad_export") from None
    if forgotten:
        fact_id, position = next(iter(forgotten.items()))
        raise LedgerError(
            f"event {position}: fact {fact_id} is marked forgotten, but no forget event records it",
            code="bad_export",
        )


#: Distinct times kept as checked before the set starts again.
_TIMES_KEPT = 4096


def _time(value: object, name: str, times: set[str]) -> None:
    if not isinstance(value, str):
        raise LedgerError(f"{name} must be a string", field=name)
    time_arg(value, name)
    if len(times) >= _TIMES_KEPT:
        times.clear()
    times.add(value)


def _known(fact_id: object, asserted: dict[str, int], what: str) -> None:
    if type(fact_id) is not str or not fact_id or not fact_id.isascii():
        text_arg(fact_id, "factId")
    if fact_id not in asserted:
        raise LedgerError(f"{what} of fact {fact_id}, which no earlier event asserts")
