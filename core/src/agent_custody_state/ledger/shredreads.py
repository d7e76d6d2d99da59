"""The reads of crypto-shred mode: each question passed to the inner backend, the envelopes in
its answer opened on the way out (their keys fetched in one ``get`` per answer; a value whose
key is gone reads as null). ``ShreddingBackend`` (``shred``) adds the writes and the keys.
Also what finds the keys a restored key store brought back (``restored_keys``, ``ValueOpener``
for ``verify``): a forget doomed them, the erasure log says so (``keystore``), and the ledger
records their facts forgotten."""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any, TypeVar, cast

from agent_custody_state.ledger.backend import EventBackend, KeyName
from agent_custody_state.ledger.envelope import fact_with_value, kid_of, unseal, with_value
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.keystore import KeyStore
from agent_custody_state.ledger.model import AssertEvent, Event, Fact

E = TypeVar("E", bound=Event)
log = logging.getLogger(__name__)

#: Events whose keys are fetched in one ``get`` when a read streams.
STREAM_CHUNK = 500


class ShreddedReads:
    """The read methods of ``ShreddingBackend``, over ``inner`` with keys from ``keys``."""

    inner: EventBackend
    keys: KeyStore

    def _keys_for(self, events: Iterable[Event]) -> dict[str, bytes]:
        kids = {
            kid
            for e in events
            if isinstance(e, AssertEvent) and (kid := kid_of(e.fact.value)) is not None
        }
        return self.keys.get(kids) if kids else {}

    def _open(self, events: Sequence[E], keys: dict[str, bytes] | None = None) -> list[E]:
        """The events with every envelope opened (their keys fetched in one ``get``)."""
        if keys is None:
            keys = self._keys_for(events)
        return [self._open_one(e, keys) for e in events]

    @staticmethod
    def _open_one(event: E, keys: dict[str, bytes]) -> E:
        if not isinstance(event, AssertEvent):
            return event
        kid = kid_of(event.fact.value)
        if kid is None:
            return event
        return cast(E, with_value(event, _opened_value(event.fact, kid, keys)))

    def _stream(self, events: Iterable[E]) -> Iterator[E]:
        chunk: list[E] = []
        for event in events:
            chunk.append(event)
            if len(chunk) >= STREAM_CHUNK:
                yield from self._open(chunk)
                chunk = []
        yield from self._open(chunk)

    def get_assert(self, fact_id: str) -> AssertEvent | None:
        event = self.inner.get_assert(fact_id)
        return None if event is None else self._open([event])[0]

    def events_for(self, fact_ids: Collection[str]) -> list[Event]:
        return self._open(self.inner.events_for(fact_ids))

    def superseders(self, fact_ids: Collection[str]) -> list[AssertEvent]:
        return self._open(self.inner.superseders(fact_ids))

    def events_around(self, fact_ids: Collection[str]) -> list[Event]:
        return self._open(self.inner.events_around(fact_ids))

    def events_along(self, fact_ids: Collection[str]) -> tuple[list[Event], bool]:
        events, walked = self.inner.events_along(fact_ids)
        return self._open(events), walked

    # The filtered reads take the inner backend's filters as they are (``EventBackend`` names
    # them), and open what it returns.

    def asserts_around(self, **filters: str | None) -> tuple[list[AssertEvent], list[Event]]:
        return self._opened_around(*self.inner.asserts_around(**filters))

    def asserts_for_as_of(self, **filters: str | None) -> tuple[list[AssertEvent], list[Event]]:
        # Sealed: an as-of needs no value to decide which facts it returns (most of a subject's
        # asserts are superseded), and opens the values of those it does (``open_values``).
        return self.inner.asserts_for_as_of(**filters)

    def open_values(self, facts: list[Fact]) -> list[Fact]:
        kids = [kid_of(f.value) for f in facts]
        keys = self.keys.get({k for k in kids if k is not None}) if any(kids) else {}
        return [
            f if kid is None else fact_with_value(f, _opened_value(f, kid, keys))
            for f, kid in zip(facts, kids, strict=True)
        ]

    def _opened_around(
        self, found: list[AssertEvent], around: list[Event]
    ) -> tuple[list[AssertEvent], list[Event]]:
        # ``around`` repeats the asserts of ``found`` (decoded twice on SQL): open each once.
        keys = self._keys_for(found)
        opened = {e.event_id: e for e in self._open(found, keys)}
        rest = self._open([e for e in around if e.event_id not in opened])
        by_id = {**opened, **{e.event_id: e for e in rest}}
        return list(opened.values()), [by_id[e.event_id] for e in around]

    def history(self, fact_id: str) -> list[Event]:
        return self._open(self.inner.history(fact_id))

    def find_asserts(self, **filters: str | None) -> Iterator[AssertEvent]:
        return self._stream(self.inner.find_asserts(**filters))

    def spaces(self) -> list[str]:
        return self.inner.spaces()

    def key_values(self, key: KeyName, prefix: str = "", limit: int = 100) -> list[str]:
        return self.inner.key_values(key, prefix, limit)

    def count(self) -> int:
        return self.inner.count()

    def iter_events(self) -> Iterator[Event]:
        return self._stream(self.inner.iter_events())

    def first_event(self) -> Event | None:
        event = self.inner.first_event()
        return None if event is None else self._open([event])[0]

    def events_newest_first(self) -> Iterator[Event] | None:
        events = self.inner.events_newest_first()
        return None if events is None else self._stream(events)

    def last_event(self) -> Event | None:
        # The inner backend's indexed read: the default would open every envelope per append.
        event = self.inner.last_event()
        return None if event is None else self._open([event])[0]

    def last_tx_time(self) -> str | None:
        return self.inner.last_tx_time()  # a time needs no envelope opened (no key fetched)


def _opened_value(fact: Fact, kid: str, keys: dict[str, bytes]) -> object:
    """The value in ``fact``'s envelope (key ``kid``), or None when the key is gone."""
    key = keys.get(kid)
    return None if key is None else unseal(fact.value, fact_id=fact.fact_id, key=key)


def restored_keys(keys: KeyStore, forgotten: Collection[str]) -> dict[str, list[str]]:
    """Fact id -> the data keys ``keys`` holds of the facts in ``forgotten`` (facts the ledger
    records forgotten) whose forget the erasure log (``KeyStore.buried``) says doomed them: a
    key store restored from a backup taken before the forget. One ``get`` per 500 facts."""
    buried = keys.buried()
    named = [(f, buried[f]) for f in forgotten if f in buried]
    found: dict[str, list[str]] = {}
    for i in range(0, len(named), STREAM_CHUNK):
        part = named[i : i + STREAM_CHUNK]
        present = keys.get({k for _, kids in part for k in kids})
        found.update({f: alive for f, kids in part if (alive := [k for k in kids if k in present])})
    return found


def sealing_live(inner: EventBackend, kids: Collection[str]) -> set[str]:
    """Of ``kids``, those a value the ledger holds live is sealed with. The erasure log is not
    signed: a line naming a forgotten fact with a live fact's key id (forged, or damaged) must
    not have that key destroyed, its value lost. One pass over the asserts, made only when
    keys are about to be destroyed again (``destroy_restored_keys``)."""
    wanted, live = set(kids), set[str]()
    if not wanted:
        return live
    for event in inner.find_asserts():
        if event.fact.forgotten is None and (kid := kid_of(event.fact.value)) in wanted:
            live.add(kid)
    return live


def forgotten_among(inner: EventBackend, fact_ids: Collection[str]) -> list[str]:
    """The facts of ``fact_ids`` that ``inner`` holds and records forgotten (every assert)."""
    ids, out = list(fact_ids), []
    for i in range(0, len(ids), STREAM_CHUNK):
        asserts = [e for e in inner.events_for(ids[i : i + STREAM_CHUNK]) if e.kind == "assert"]
        live = {e.fact_id for e in asserts if cast(AssertEvent, e).fact.forgotten is None}
        out += sorted({e.fact_id for e in asserts} - live)
    return out


class ValueOpener:
    """What ``verify_lines(open_value=...)`` needs to check sealed values' commitments: opens an
    envelope with its key from ``keys`` (``LookupError`` when the key is gone, ``ValueError``
    when the envelope does not authenticate). ``restored``: the keys ``keys`` holds again of
    facts the ledger records forgotten (``restored_keys``)."""

    def __init__(self, keys: KeyStore) -> None:
        self.keys = keys
        self.live: set[str] = set()  # the keys of the live values opened so far

    def __call__(self, fact_id: str, envelope: Any) -> Any:
        kid = kid_of(envelope)
        key = self.keys.get({kid}).get(kid) if kid is not None else None
        if key is None:
            raise LookupError(f"no key {kid}")
        self.live.add(cast(str, kid))
        try:
            return unseal(envelope, fact_id=fact_id, key=key)
        except LedgerError as exc:
            raise ValueError(str(exc)) from None

    def restored(self, forgotten: Collection[str]) -> dict[str, list[str]]:
        """As ``restored_keys``, less the keys of live values opened (``verify`` opens every
        one before it asks): a log line naming one (forged, or damaged) is no restored key, and
        ``repair`` keeps it (``sealing_live``), so ``verify`` would fail for good on it."""
        return without_live(restored_keys(self.keys, forgotten), self.live)


def without_live(found: dict[str, list[str]], live: Collection[str]) -> dict[str, list[str]]:
    """``found`` (fact id -> key ids) less the keys in ``live``, logged as an ERROR: the erasure
    log is not signed, and a line naming a live value's key must never cost that value."""
    named = sorted({k for kids in found.values() for k in kids if k in live})
    if not named:
        return found
    log.error("the erasure log names data keys live values use, kept: %s", named)
    return {f: kept for f, kids in found.items() if (kept := [k for k in kids if k not in live])}
