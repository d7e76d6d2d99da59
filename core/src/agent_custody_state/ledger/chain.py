"""The tamper-evident chain: a leaf hash per event over its redacted form, linked into one head.

``docs/proofs.md`` is the specification; in short:

* an assert written with the chain carries ``valueSalt`` (32 random bytes, base64) and
  ``valueCommitment`` (``HMAC-SHA256(salt, canonical_json(value))``, hex) inside its fact; a
  forget erases the salt with the value (``model.forget_assert``) and keeps the commitment;
* the **redacted form** of an event is its wire dict without the top-level ``chain`` key, and
  for an assert a fact without ``value``, ``valueSalt`` and ``forgotten``: exactly the parts a
  forget changes, so a forget changes no leaf;
* ``leaf = SHA-256(0x00 || canonical_json(redacted))`` and
  ``head_n = SHA-256(0x01 || head_(n-1) || leaf_n)`` with ``head_0`` 32 zero bytes, over every
  event in append order (events written before the chain started, or by the original, included);
* each chained event records ``"chain": {"seq": n, "leaf": hex, "head": hex}``; the first
  chained event after events that carry none (a ledger written by the TypeScript original) adds
  ``"genesis": {"size": n - 1, "head": hex}``, which commits to every earlier event.

The ledger calls ``ChainWriter.seal`` inside its write transaction, so the head it extends is
the one every other process sees under the same lock. Verification is in ``verify``.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from agent_custody_state import fastjson
from agent_custody_state.canonical import canonical_utf8
from agent_custody_state.ledger.digests import hmac_sha256
from agent_custody_state.ledger.model import CHAIN_KEY as CHAIN_KEY
from agent_custody_state.ledger.model import (
    VALUE_COMMITMENT_KEY,
    VALUE_SALT_KEY,
    AssertEvent,
    Event,
    Fact,
)
from agent_custody_state.ledger.plainseal import SALT_BYTES, seal_events, with_extra, with_lines

if TYPE_CHECKING:
    from agent_custody_state.ledger.backend import EventBackend

log = logging.getLogger(__name__)

SALT_KEY = VALUE_SALT_KEY
COMMITMENT_KEY = VALUE_COMMITMENT_KEY
#: The fact keys a forget changes: outside the leaf (the value is in it through its commitment).
REDACTED_FACT_KEYS = ("value", SALT_KEY, "forgotten")
ZERO_HEAD = "0" * 64

E = TypeVar("E", bound=Event)


@dataclass(frozen=True, slots=True)
class ChainHead:
    """Where the chain stands: ``seq`` events (the last one's position, 0 when empty) and the
    head hash after them (hex). ``chained`` says whether the last event carries a chain record;
    when it does not (an empty ledger, or events written without the chain), the next chained
    event records a genesis."""

    seq: int
    hash: str
    chained: bool = True

    @classmethod
    def recorded(cls, event: Event) -> ChainHead | None:
        """The head after ``event``, from its chain record; None when it carries none."""
        record = chain_record(event)
        return None if record is None else cls(record["seq"], record["head"])


def value_commitment(salt: bytes, value: Any) -> str:
    """``HMAC-SHA256(salt, canonical_json(value))`` as lowercase hex."""
    return hmac_sha256(salt, canonical_utf8(value)).hex()


# The keys of the redacted form of an event the ledger writes (every kind), and of its fact.
_EVENT_KEYS = frozenset(
    {
        *("eventId", "kind", "txTime", "fact", "supersedes", "factId", "actor", "reason"),
        *("source", "valueDigest", "digestKind"),
    }
)
_FACT_KEYS = frozenset(
    {
        *("factId", "subject", "predicate", "space", "actor", "source", "provenance"),
        *("validFrom", "validTo", "confidence", COMMITMENT_KEY),
    }
)
_CHAIN_ONLY = frozenset((CHAIN_KEY,))
_OURS = frozenset((SALT_KEY, COMMITMENT_KEY))
_TEXT = frozenset((str, type(None)))
_TEXT_OR_DICT = frozenset((str, type(None), dict))
_FACT_TYPES = frozenset((str, type(None), dict, int, float))


def _plain_source(source: Any) -> bool:
    return source.keys() <= {"receiptId"} and type(source.get("receiptId")) in _TEXT


def _ledger_shaped(red: dict[str, Any]) -> bool:
    """Whether a redacted form has the ledger's own shape: known keys only, text or null
    everywhere but the sources, the fact and a ``confidence`` that ``fastjson.safe_number``
    accepts. Such a form holds nothing ``fastjson.odd`` looks for, so its scan is skipped (a few
    C-level set and count operations instead of a pass over the text). Anything else (unknown
    keys, external ids, other numbers, a dict where text belongs) takes the checked path."""
    kinds = list(map(type, red.values()))
    if not red.keys() <= _EVENT_KEYS or not set(kinds) <= _TEXT_OR_DICT:
        return False
    fact, source = red.get("fact"), red.get("source")
    if kinds.count(dict) != (type(fact) is dict) + (type(source) is dict):
        return False
    if type(source) is dict and not _plain_source(source):
        return False
    if fact is None:
        return True
    if type(fact) is not dict or not fact.keys() <= _FACT_KEYS:
        return False
    kinds = list(map(type, fact.values()))
    source = fact.get("source")
    confidence = fact.get("confidence")
    special = kinds.count(dict) + kinds.count(float) + kinds.count(int)
    expected = (type(source) is dict) + fastjson.safe_number(confidence)
    if not set(kinds) <= _FACT_TYPES or special != expected:
        return False
    return type(source) is not dict or _plain_source(source)


def leaf_bytes(red: dict[str, Any]) -> bytes:
    """``canonical(red)`` for a redacted form (the message of its leaf hash)."""
    if _ledger_shaped(red):
        fast = fastjson.sorted_unchecked(red)
        if fast is not None:
            return fast
    return canonical_utf8(red)


def redacted(data: dict[str, Any]) -> dict[str, Any]:
    """The redacted form of an event's wire dict (a new dict; ``data`` is not changed)."""
    out = {k: v for k, v in data.items() if k != CHAIN_KEY}
    fact = out.get("fact")
    if data.get("kind") == "assert" and isinstance(fact, dict):
        out["fact"] = {k: v for k, v in fact.items() if k not in REDACTED_FACT_KEYS}
    return out


def leaf_of(data: dict[str, Any]) -> bytes:
    """The leaf hash of an event given as its wire dict."""
    return hashlib.sha256(b"\x00" + leaf_bytes(redacted(data))).digest()


def link(previous: bytes, leaf: bytes) -> bytes:
    """The head after ``leaf``, from the head before it."""
    return hashlib.sha256(b"\x01" + previous + leaf).digest()


def chain_record(event: Event) -> dict[str, Any] | None:
    """The event's chain record, if it carries a well-formed one."""
    return _record(event.extra.get(CHAIN_KEY))


def _record(record: Any) -> dict[str, Any] | None:
    """``record`` if it is a well-formed chain record (its ``seq`` and ``head`` usable)."""
    if (
        isinstance(record, dict)
        and isinstance(record.get("seq"), int)
        and isinstance(record.get("head"), str)
        and len(record["head"]) == 64
    ):
        return record
    return None


#: How many events without a chain record ``head_after`` keeps while reading back from the
#: end; past it the head is computed by the forward pass (which keeps none in memory).
TAIL_LIMIT = 10_000


def head_after(
    last: Event | None,
    stored: Callable[[], Iterable[str | bytes]],
    newest_first: Callable[[], Iterable[Event] | None] | None = None,
    known: tuple[str, ChainHead] | None = None,
) -> ChainHead:
    """The chain head after the last event: read from its record or, when it carries none,
    the head of the last record before it with every later event's leaf linked on. Those
    events are read back from the end (``newest_first``: events in reverse order, or None
    when the backend cannot read backwards), or else found in one pass over ``stored()``
    (every event's stored JSON text, in append order, as ``verify`` reads them) from the
    start. ``known``: an event id and the head after it, computed before (an append-only
    ledger never changes it), where reading back may stop as at a record. The head is the one
    after ``last`` exactly, even when other writers append after it while this reads (their
    events are passed over): it is remembered with ``last``'s id. Used by writers, which
    trust the records they find; ``verify`` is what checks them."""
    if last is None:
        return ChainHead(0, ZERO_HEAD, chained=False)
    record = chain_record(last)
    if record is not None:
        return ChainHead(record["seq"], record["head"], chained=True)
    if known is not None and known[0] == last.event_id:
        return known[1]
    backwards = newest_first() if newest_first is not None else None
    if backwards is not None:
        tail: list[Event] = []
        reached = False  # ``last`` met: events appended after it since are not this head's
        for event in backwards:
            if not reached:
                reached = event.event_id == last.event_id
                if not reached:
                    continue
            found = chain_record(event)
            if found is not None:
                return _linked(found["seq"], bytes.fromhex(found["head"]), reversed(tail))
            if known is not None and known[0] == event.event_id:
                return _linked(known[1].seq, bytes.fromhex(known[1].hash), reversed(tail))
            tail.append(event)
            if len(tail) > TAIL_LIMIT:
                break
        else:  # no record at all: the genesis over every event, all read already
            return _linked(0, bytes(32), reversed(tail))
    head = bytes(32)
    seq = 0
    for text in stored():  # the stored text: no event objects built (half the cost)
        seq += 1
        data = fastjson.loads(text)
        found = _record(data.get(CHAIN_KEY))
        if found is not None and found["seq"] == seq:
            head = bytes.fromhex(found["head"])
        else:
            head = link(head, leaf_of(data))
        if data.get("eventId") == last.event_id:
            break  # what other writers appended since is not this head's
    return ChainHead(seq, head.hex(), chained=False)


def _linked(seq: int, head: bytes, events: Iterable[Event]) -> ChainHead:
    """The head after linking ``events``' leaves onto ``head`` at ``seq``."""
    for event in events:
        seq += 1
        head = link(head, leaf_of(event.to_dict()))
    return ChainHead(seq, head.hex(), chained=False)


def public_fact(data: dict[str, Any]) -> dict[str, Any]:
    """A fact's wire dict without the chain's fields (``valueSalt``, ``valueCommitment``): the
    shape the original's tool results have. The chain is for auditors (the ledger, exports,
    ``verify``), and a salt is never handed out."""
    if SALT_KEY in data or COMMITMENT_KEY in data:
        return {k: v for k, v in data.items() if k not in (SALT_KEY, COMMITMENT_KEY)}
    return data


def public_event(event: Event) -> dict[str, Any]:
    """An event's wire dict without its chain record and its fact's chain fields."""
    data = event.to_dict()
    data.pop(CHAIN_KEY, None)
    if isinstance(data.get("fact"), dict):
        data["fact"] = public_fact(data["fact"])
    return data


def seal(head: ChainHead, events: Sequence[E]) -> list[E]:
    """``events`` as they are appended after ``head``: asserts salted and committed, each with
    its chain record (the first with a genesis when ``head`` is not chained).

    ``events`` are the ones the ledger built for this append, not yet seen by anyone: a plain
    assert is sealed in place (its empty extra dicts take the salt, commitment and record, and
    it keeps its line), every other event is returned as a new one.

    Written for speed (it runs on every append). An assert the ledger built itself is sealed
    by ``plainseal.seal_events``' loop over the batch: its line is encoded there too, from the
    dict already built, and kept on the event (``Event.line``) for the backend. Any other event
    takes ``_sealed_reference``: one ``to_dict``, made the redacted form, and its line left to
    the backend. The ledger built these events from validated arguments (text where text
    belongs), so their redacted form has the ledger's shape unless they carry extra keys,
    external ids or a confidence ``fastjson.safe_number`` refuses: only then is the shape
    checked in full (``leaf_bytes``).
    """
    genesis = None if head.chained else {"size": head.seq, "head": head.hash}
    # One read of the system's random source for the whole batch (a read per event costs more
    # than the rest of the salting).
    salts = os.urandom(SALT_BYTES * len(events))
    return seal_events(
        events, salts, bytes.fromhex(head.hash), head.seq, genesis, _sealed_reference
    )


def _sealed_reference(
    event: E, salt: bytes, previous: bytes, seq: int, genesis: dict[str, Any] | None
) -> tuple[E, bytes]:
    """``event`` sealed after the head ``previous`` as the ``seq``-th (the general path) and
    the head after it."""
    record: dict[str, Any] = {"seq": seq}
    if genesis is not None:
        record["genesis"] = genesis
    message, fact = _reference_parts(event, salt)
    leaf = hashlib.sha256(b"\x00" + message).digest()
    previous = hashlib.sha256(b"\x01" + previous + leaf).digest()
    record["leaf"] = leaf.hex()
    record["head"] = previous.hex()
    extra = {k: v for k, v in event.extra.items() if k != CHAIN_KEY}
    extra[CHAIN_KEY] = record
    if fact is not None:
        e: Any = event
        return AssertEvent(e.event_id, e.tx_time, fact, e.supersedes, extra), previous  # type: ignore[return-value]
    return replace(event, extra=extra), previous


def _reference_parts(event: Event, salt: bytes) -> tuple[bytes, Fact | None]:
    """The leaf message of any event and, for an assert, its salted fact (the general path)."""
    data = event.to_dict()  # a fresh dict, turned into the redacted form in place
    data.pop(CHAIN_KEY, None)
    fact = None
    shaped = not event.extra or event.extra.keys() <= _CHAIN_ONLY
    if isinstance(event, AssertEvent):
        fact = event.fact
        shaped = (
            shaped
            and fact.external is None
            and fact.extra.keys() <= _OURS
            and (fact.confidence is None or fastjson.safe_number(fact.confidence))
        )
        more = dict(fact.extra)
        more.pop(SALT_KEY, None)
        more[SALT_KEY] = base64.b64encode(salt).decode("ascii")
        more[COMMITMENT_KEY] = commitment = value_commitment(salt, fact.value)
        fact = with_extra(fact, more)
        red = data["fact"]
        for key in REDACTED_FACT_KEYS:
            red.pop(key, None)
        red[COMMITMENT_KEY] = commitment
    message = fastjson.sorted_unchecked(data) if shaped else None
    return message or leaf_bytes(data), fact


def last_head(events: Sequence[Event]) -> ChainHead | None:
    """The head recorded on the last of ``events``, if it carries a record."""
    record = chain_record(events[-1]) if events else None
    return ChainHead(record["seq"], record["head"]) if record is not None else None


class ChainWriter:
    """What the ledger's append paths call: ``seal`` inside the write transaction, ``sealed``
    after it committed, which tells ``checkpointer`` the sizes before and after (it signs a
    checkpoint when the chain crossed a multiple of its interval). ``enabled=False`` appends
    events as they are (the baseline of the benchmarks)."""

    def __init__(self, *, enabled: bool = True, checkpointer: Any = None) -> None:
        self.enabled = enabled
        self.checkpointer = checkpointer

    def seal(self, backend: EventBackend, events: Sequence[E]) -> list[E]:
        if not self.enabled or not events:
            return with_lines(events)
        return seal(backend.chain_head(), events)

    def sealed(self, events: Sequence[Event]) -> None:
        """After the commit of ``events`` (in append order): report the chain's progress."""
        if not events or self.checkpointer is None:
            return
        first = chain_record(events[0])
        head = last_head(events)
        if first is None or head is None:
            return
        try:
            self.checkpointer.progressed(first["seq"] - 1, head)
        except Exception:  # a checkpoint must never undo a durable write; the next one follows
            log.exception("could not write the checkpoint at %d events", head.seq)
