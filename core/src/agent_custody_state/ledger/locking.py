"""Write keys: which parts of the ledger a write section touches, named before it validates.

A backend that can lock finer than "the whole ledger" (``EventBackend.locks_keys``) is told, when
a section opens, the keys of everything the ledger will read a rule from or change in it; two
sections whose keys are disjoint cannot break a rule for each other, so they need not wait for
each other. The keys are:

* ``fact_key(id)`` for the fact a mutation acts on, the fact an assert supersedes, and an
  assert's own caller-chosen id: every rule (a fact exists once, is superseded at most once, is
  retracted, held, forgotten at most once) is about one fact id, so two writers of one fact id
  always share a key and queue;
* ``topic_key(space, subject, predicate)`` for the assert's, or acted-on fact's, topic: writers
  of one topic queue too, so the current value of a topic changes in the order its events are
  stamped (an as-of read of a topic is repeatable once the instant is past).

``None`` means "unknown": the backend then takes its exclusive section, as before keys existed.
Keys are plain strings; a backend hashes them into whatever its lock manager takes.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Collection, Iterable, Mapping
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.timeutil import NORMAL_TIME, parse_time, wire_time_key

log = logging.getLogger(__name__)

_SEP = "\x1f"  # unit separator: cannot make two different tuples join to one key by accident


def fact_key(fact_id: str) -> str:
    return f"fact{_SEP}{fact_id}"


def topic_key(space: str, subject: str, predicate: str) -> str:
    return f"topic{_SEP}{space}{_SEP}{subject}{_SEP}{predicate}"


def assert_keys(request: AssertRequest) -> set[str]:
    """The keys of one assert. Fields of the wrong type add no key: the assert is refused by
    validation inside the section before it writes anything."""
    keys: set[str] = set()
    r = request
    if isinstance(r.fact_id, str):
        keys.add(fact_key(r.fact_id))
    if isinstance(r.supersedes, str):
        keys.add(fact_key(r.supersedes))
    if isinstance(r.space, str) and isinstance(r.subject, str) and isinstance(r.predicate, str):
        keys.add(topic_key(r.space, r.subject, r.predicate))
    return keys


def batch_keys(items: Iterable[AssertRequest | Mapping[str, Any]]) -> set[str] | None:
    """The keys of a batch of asserts, or None when an item is not even a request (the batch
    is refused inside the section; an exclusive section keeps that refusal ordered)."""
    keys: set[str] = set()
    for item in items:
        try:
            keys |= assert_keys(AssertRequest.of(item))
        except Exception:
            return None
    return keys


def section(backend: EventBackend, keys: Collection[str] | None) -> AbstractContextManager[None]:
    """The write section: keyed when the backend locks keys, else its exclusive one."""
    if backend.locks_keys:
        return backend.transaction(keys=keys)  # type: ignore[call-arg]
    return backend.transaction()


def fact_keys(backend: EventBackend, fact_id: str) -> list[str]:
    """A mutation's keys: the fact and its topic (read first, outside the section: a fact's
    topic never changes); the read is only made for a backend that locks keys."""
    if not backend.locks_keys or not isinstance(fact_id, str):
        return []
    found = backend.get_assert(fact_id)
    f = found.fact if found is not None else None
    return [fact_key(fact_id)] + ([topic_key(f.space, f.subject, f.predicate)] if f else [])


def in_order(backend: EventBackend, tx: str) -> str:
    """The transaction time of events appended now, in the backend's ordered phase, from ``tx``
    (this host's clock): ``tx``, raised to the last event's time if that is later, so
    transaction time never goes backwards along the append order, for every kind of event (an
    as-of read at an instant must see exactly the events appended before it). Two causes, on
    every backend: writers running alongside (it locks keys; several servers on one
    PostgreSQL), where another may have appended first with a clock ahead of this one; and a
    clock stepped back (an NTP correction, a process on another host appending to the same
    JSONL file, a ledger copied from a host whose clock ran ahead). The last time is read as
    its instant (a hand-written file may spell it otherwise), and one that is not a time is
    passed over rather than copied onto a new event."""
    last = backend.last_tx_time()
    if last is None:
        return tx
    key = wire_time_key(last)
    if key <= tx or not NORMAL_TIME.fullmatch(key):
        return tx
    _warn_if_far_ahead(backend, key, tx)
    return key


#: How far the last event may be ahead of this clock before a write says so: more than the
#: skew of two hosts' clocks, or a step back NTP makes.
FAR_AHEAD = timedelta(minutes=5)
#: The time each open backend last warned of. Weak: a set of ``(id(backend), time)`` grew by
#: one entry per ledger opened for the process's life, and a new backend given a collected
#: one's ``id`` was never warned.
_warned: weakref.WeakKeyDictionary[EventBackend, str] = weakref.WeakKeyDictionary()


def _warn_if_far_ahead(backend: EventBackend, last: str, tx: str) -> None:
    """A warning (once per backend and time) when the stamp is held far ahead of the clock: an
    event stamped in the future (an import from a host whose clock ran ahead, a hand edit) holds
    every later write at its time until this clock passes it."""
    ahead = parse_time(last) - parse_time(tx)
    if ahead <= FAR_AHEAD or _warned.get(backend) == last:
        return
    _warned[backend] = last
    log.warning(  # no location: a PostgreSQL URL may hold a password
        "the %s ledger's new events are stamped %s, the last event's time, %s ahead of this "
        "host's clock (%s): transaction time never runs backwards, so it stays there until "
        "the clock passes it; check this host's clock, or the time of the last event",
        backend.kind,
        last,
        str(ahead).split(".")[0],
        tx,
    )
