"""Sealing the asserts the ledger builds itself, with each encoding done once.

Sealing an assert (``chain.seal``) needs the canonical bytes of its value (for the commitment),
those of its redacted form (the leaf) and its stored line. For an assert as the ledger builds it
(validated text fields, no unknown keys, no external ids, not forgotten, a confidence and a
value ``fastjson`` vouches for), all three come straight from orjson: one exactness walk of the
value serves them, the redacted and stored dicts are built directly rather than derived from
``to_dict``, and the line is kept on the event (``Event.line``), so the backend does not encode
and check it again. Any other event takes ``chain``'s reference path, which gives the same bytes.
"""

from __future__ import annotations

import binascii
import hashlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from agent_custody_state import fastjson
from agent_custody_state.ledger.digests import batch_pads
from agent_custody_state.ledger.model import (
    CHAIN_KEY,
    VALUE_COMMITMENT_KEY,
    VALUE_SALT_KEY,
    AssertEvent,
    Event,
    Fact,
)

E = TypeVar("E", bound=Event)
#: The bytes of a salt: 32 from the system's random source (docs/proofs.md).
SALT_BYTES = 32

_sha256 = hashlib.sha256


def _plain(event: AssertEvent) -> bool:
    """Whether ``event`` is an assert as the ledger builds it: no extra keys (the event's, the
    fact's or the source's: ``_stored`` writes none), no external ids, not forgotten, a
    confidence and a value whose orjson output (sorted or not) is JavaScript's; its text fields
    are the validated arguments (orjson refuses a lone surrogate or a subclass, and the caller
    then takes the reference path)."""
    fact = event.fact
    return not (
        event.extra
        or fact.extra
        or fact.source.extra
        or fact.external is not None
        or fact.forgotten is not None
        or not (fact.confidence is None or fastjson.safe_number(fact.confidence))
        or not fastjson.exact(fact.value, sort=True)  # sort=True is the stricter
    )


def _stored(event: AssertEvent) -> dict[str, Any]:
    """The wire dict of a plain assert (``to_dict``'s keys and order, no extra keys)."""
    fact = event.fact
    return {
        "eventId": event.event_id,
        "kind": "assert",
        "txTime": event.tx_time,
        "fact": {
            "factId": fact.fact_id,
            "subject": fact.subject,
            "predicate": fact.predicate,
            "value": fact.value,
            "space": fact.space,
            "actor": fact.actor,
            "source": {"receiptId": fact.source.receipt_id},
            "provenance": fact.provenance,
            "validFrom": fact.valid_from,
            "validTo": fact.valid_to,
            "confidence": fact.confidence,
        },
        "supersedes": event.supersedes,
    }


def _no_encoder(*_: Any) -> Any:
    raise TypeError("orjson is not installed")


#: ``chain``'s general path for one event: ``(event, salt, previous head, seq, genesis)`` to
#: the sealed event and the head after it.
Reference = Callable[[Any, bytes, bytes, int, "dict[str, Any] | None"], tuple[Any, bytes]]


def seal_events(
    events: Sequence[E],
    salts: bytes,
    previous: bytes,
    seq: int,
    genesis: dict[str, Any] | None,
    reference: Reference,
) -> list[E]:
    """``events`` sealed after the head ``previous`` at ``seq`` (``chain.seal``), the i-th with
    the i-th ``SALT_BYTES`` of ``salts``, the first with ``genesis`` in its record if given.

    A plain assert (``_plain``) is sealed here, in one loop over the batch: its salted fact,
    its chain record and its line, with orjson called directly (one walk of the value, the
    stored dict built directly and the redacted form copied from it, the HMAC key blocks of
    the whole batch made at once); its empty extra dicts take the salt, the commitment and the
    record in place, as ``with_lines`` keeps a line on it, rather than a Fact and an event built
    again. Any other event, or one orjson refuses (a lone surrogate, a str subclass), takes
    ``reference`` (``chain``'s general path: the same bytes, checked in full). This runs on
    every chained append, mostly with cold caches between two fsyncs, where each step it
    leaves out counts."""
    out: list[Any] = []
    codec = fastjson.encoder()
    fast = codec is not None  # else every event takes ``reference``, as without orjson before
    dumps, refuse, sort, keep = codec if codec is not None else (_no_encoder, _no_encoder, 0, 0)
    inner, outer, inner_fill, outer_fill = batch_pads(salts, SALT_BYTES)
    sha256, b64, refused, plain = _sha256, binascii.b2a_base64, fastjson.REFUSED, _plain
    start = 0
    for event in events:
        end = start + SALT_BYTES
        seq += 1
        message = None
        if fast and isinstance(event, AssertEvent) and plain(event):
            fact = event.fact
            try:
                value = dumps(fact.value, refuse, sort)
                commitment = sha256(
                    outer[start:end]
                    + outer_fill
                    + sha256(inner[start:end] + inner_fill + value).digest()
                ).hexdigest()
                stored = _stored(event)
                stored_fact = stored["fact"]
                red_fact = stored_fact.copy()  # redacted: no value (nor salt), the commitment
                del red_fact["value"]
                red_fact[VALUE_COMMITMENT_KEY] = commitment
                stored["fact"] = red_fact  # the stored dict is the redacted form for a moment
                message = dumps(stored, refuse, sort)  # its keys are the ledger's own
                stored["fact"] = stored_fact
            except refused:
                message = None
        if message is None:
            event, previous = reference(event, salts[start:end], previous, seq, genesis)
            genesis = None
            out.append(event)
            start = end
            continue
        leaf = sha256(b"\x00" + message).digest()
        previous = sha256(b"\x01" + previous + leaf).digest()
        if genesis is None:
            record = {"seq": seq, "leaf": leaf.hex(), "head": previous.hex()}
        else:
            record = {"seq": seq, "genesis": genesis, "leaf": leaf.hex(), "head": previous.hex()}
            genesis = None
        salt_text = b64(salts[start:end], newline=False).decode("ascii")
        stored_fact[VALUE_SALT_KEY] = salt_text
        stored_fact[VALUE_COMMITMENT_KEY] = commitment
        stored[CHAIN_KEY] = record
        fact.extra[VALUE_SALT_KEY] = salt_text
        fact.extra[VALUE_COMMITMENT_KEY] = commitment
        event.extra[CHAIN_KEY] = record
        try:  # noqa: SIM105 - a context manager per event costs more than the try
            object.__setattr__(event, "line", dumps(stored, refuse, keep).decode("utf-8"))
        except refused:  # no line: the backend encodes it (``Event.to_json``)
            pass
        out.append(event)
        start = end
    return out


def with_lines(events: Sequence[E]) -> list[E]:
    """``events`` with the line of each plain assert encoded now (``Event.line``), as sealing
    does: what the ledger appends without the chain, so the two differ only by the chain."""
    for event in events:
        if isinstance(event, AssertEvent) and event.line is None and _plain(event):
            line = fastjson.ordered_unchecked(_stored(event))
            if line is not None:
                object.__setattr__(event, "line", line.decode("utf-8"))
    return list(events)


def with_extra(fact: Fact, extra: dict[str, Any]) -> Fact:
    """``fact`` with ``extra`` as its unknown keys (the constructor, not ``replace``: faster)."""
    f = fact
    return Fact(
        f.fact_id,
        f.subject,
        f.predicate,
        f.value,
        f.space,
        f.actor,
        f.source,
        f.provenance,
        f.external,
        f.valid_from,
        f.valid_to,
        f.confidence,
        f.forgotten,
        extra,
    )
