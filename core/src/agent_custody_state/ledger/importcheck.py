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
* a fact marked forgotten holds no value, and a forget event records it; a fact a forget event
  names is marked forgotten (``verify`` refuses a value held after its forget);
* the chain records say what ``verify`` says of them (``verify.Verifier`` over the events as
  they will be stored): an export whose events were reordered, edited, dropped or inserted is
  refused, not imported into a ledger that ``verify`` would then fail. An export without chain
  records, value salts or commitments (the original's) has nothing to check there, and skips it.

What the ledger's rules refuse between valid events (a second retract, a confirm of a fact that
was not quarantined) is not checked: the original and this implementation never wrote such an
export, and an import is the place to move a ledger, not to judge its history.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_custody_state.ledger.arguments import MAX_KEY_BYTES, text_arg, time_arg, topic_arg
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.model import (
    CHAIN_KEY,
    VALUE_COMMITMENT_KEY,
    VALUE_SALT_KEY,
    AssertEvent,
    Event,
    ForgetEvent,
)
from agent_custody_state.timeutil import NORMAL_TIME


def check_export(events: Sequence[Event], *, chain: bool = True) -> None:
    """Raise ``LedgerError("event <n>: ...")`` at the first event that cannot be imported.

    One loop with its state in locals and the common case tested inline: ASCII text, and a time
    in the normal form (``timeutil.NORMAL_TIME`` checks its fields' ranges) on the day of the time checked
    before it (a ledger's times come in order), so an import pays about a microsecond an
    event."""
    event_ids: dict[str, int] = {}
    asserted: dict[str, int] = {}
    forgotten: dict[str, int] = {}  # fact id -> its assert's position, until its forget
    holding: dict[str, int] = {}  # fact id -> the position of its assert holding a value
    day = "-"  # the date of the last normal-form time found real (times come in order)
    normal = NORMAL_TIME.fullmatch
    position = 0
    try:
        for position, event in enumerate(events, 1):
            event_id = event.event_id
            if (
                type(event_id) is not str
                or not event_id
                or not event_id.isascii()
                or "\x00" in event_id
                or len(event_id) > MAX_KEY_BYTES
            ):
                text_arg(event_id, "eventId")
            if event_ids.setdefault(event_id, position) != position:
                raise LedgerError(f"eventId {event_id} is also event {event_ids[event_id]}'s")
            tx = event.tx_time
            if not (type(tx) is str and tx.startswith(day) and normal(tx)):
                day = _time(tx, "txTime", day)
            if type(event) is not AssertEvent:
                fact_id = getattr(event, "fact_id", None)
                if type(fact_id) is not str or fact_id not in asserted:  # text when asserted
                    _unknown(fact_id, f"a {event.kind}")
                if type(event) is ForgetEvent:
                    forgotten.pop(fact_id, None)  # type: ignore[arg-type]
                    if fact_id in holding:
                        raise LedgerError(
                            f"fact {fact_id} is forgotten here, but its assert (event "
                            f"{holding[fact_id]}) still holds its value"
                        )
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
                and (keys := fact_id + subject + predicate + space).isascii()
                and "\x00" not in keys  # the key rules of ``text_arg``, for ASCII keys
                and max(len(fact_id), len(space)) <= MAX_KEY_BYTES
                and len(subject) + len(predicate) <= MAX_KEY_BYTES
            ):
                for value, name in (
                    (fact_id, "factId"),
                    (subject, "subject"),
                    (predicate, "predicate"),
                    (space, "space"),
                ):
                    text_arg(value, name)
                topic_arg(subject, predicate)
            valid = fact.valid_from
            if valid != tx and not (type(valid) is str and valid.startswith(day) and normal(valid)):
                day = _time(valid, "validFrom", day)
            until = fact.valid_to
            if until is not None and not (
                type(until) is str and until.startswith(day) and normal(until)
            ):
                day = _time(until, "validTo", day)
            replaced = event.supersedes  # type: ignore[attr-defined]
            if replaced is not None and (type(replaced) is not str or replaced not in asserted):
                _unknown(replaced, "supersedes")
            if asserted.setdefault(fact_id, position) != position:
                raise LedgerError(f"fact {fact_id} is also asserted by event {asserted[fact_id]}")
            if fact.forgotten is not None:
                if fact.value is not None:
                    raise LedgerError(f"fact {fact_id} is marked forgotten but holds a value")
                forgotten[fact_id] = position
            else:
                holding[fact_id] = position
    except LedgerError as exc:
        raise LedgerError(f"event {position}: {exc}", field=exc.field, code="bad_export") from None
    if forgotten:
        fact_id, position = next(iter(forgotten.items()))
        raise LedgerError(
            f"event {position}: fact {fact_id} is marked forgotten, but no forget event records it",
            code="bad_export",
        )
    if chain and any(map(_chained, events)):  # what verify says of the chain records
        _check_chain(events)


def _chained(event: Event) -> bool:
    """Whether ``event`` carries anything of the chain: a chain record, or a fact's value salt
    or commitment. ``verify`` finds no problem in events that carry none of these (their leaves
    only feed a running head that no record, genesis or checkpoint states: there are none), so
    the original's exports (no chain at all) skip the chain check's hashing."""
    if CHAIN_KEY in event.extra:
        return True
    if type(event) is AssertEvent:
        extra = event.fact.extra
        return VALUE_SALT_KEY in extra or VALUE_COMMITMENT_KEY in extra
    return False


def _check_chain(events: Sequence[Event]) -> None:
    """Refuse, at its first problem, an export whose chain ``verify`` would refuse. Envelopes
    (crypto-shred values) are not opened: their leaves and links are checked, as by ``verify``
    without the key store. About 9 us an event (a serialisation and ``verify``'s own pass)."""
    from agent_custody_state.ledger.verify import Verifier

    verifier = Verifier(())
    for position, event in enumerate(events, 1):
        verifier.event(position, event.to_json())
    first = verifier.finish(len(events)).first
    if first is not None:
        raise LedgerError(
            f"event {first.seq}: {first.reason} (verify would refuse the imported ledger)",
            code="bad_export",
        )


def _time(value: object, name: str, day: str) -> str:
    """Check ``value`` in full; the date the fast path compares with next (``day``, kept when
    ``value`` is not in the normal form)."""
    if not isinstance(value, str):
        raise LedgerError(f"{name} must be a string", field=name)
    time_arg(value, name)
    return value[:10] if NORMAL_TIME.fullmatch(value) else day


def _unknown(fact_id: object, what: str) -> None:
    text_arg(fact_id, "factId")
    raise LedgerError(f"{what} of fact {fact_id}, which no earlier event asserts")
