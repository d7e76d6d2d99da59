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
from collections.abc import Sequence
from typing import Any, TypeVar

from agent_custody_state import fastjson
from agent_custody_state.ledger.digests import hmac_sha256
from agent_custody_state.ledger.model import (
    CHAIN_KEY,
    VALUE_COMMITMENT_KEY,
    VALUE_SALT_KEY,
    AssertEvent,
    Event,
    Fact,
)

E = TypeVar("E", bound=Event)

_sha256 = hashlib.sha256


def _plain(event: AssertEvent) -> bool:
    """Whether ``event`` is an assert as the ledger builds it: no extra keys, no external ids,
    not forgotten, a confidence and a value whose orjson output (sorted or not) is JavaScript's;
    its text fields are the validated arguments (orjson refuses a lone surrogate or a subclass,
    and the caller then takes the reference path)."""
    fact = event.fact
    return not (
        event.extra
        or fact.extra
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


def sealed_plain(
    event: AssertEvent, salt: bytes, previous: bytes, record: dict[str, Any]
) -> tuple[AssertEvent, bytes] | None:
    """A plain assert (``_plain``) sealed after the head ``previous``: the event, given its
    salted fact, its chain record (``record``, holding ``seq`` and any genesis, gets ``leaf`` and
    ``head``) and its line, and the new head; None for any other event, which takes ``chain``'s
    reference path (the same bytes, checked in full). One walk of the value, the stored dict
    built directly and the redacted form copied from it: this runs on every chained append, mostly with cold caches
    between two fsyncs, where each step it leaves out counts."""
    if not _plain(event):
        return None
    fact = event.fact
    value = fastjson.sorted_unchecked(fact.value)
    if value is None:
        return None
    commitment = hmac_sha256(salt, value).hex()
    stored = _stored(event)
    stored_fact = stored["fact"]
    red_fact = stored_fact.copy()  # the redacted form: no value (nor salt), the commitment
    del red_fact["value"]
    red_fact[VALUE_COMMITMENT_KEY] = commitment
    red = stored.copy()
    red["fact"] = red_fact
    message = fastjson.sorted_unchecked(red)  # the redacted form's keys are the ledger's own
    if message is None:  # a text field orjson refuses (a lone surrogate, a str subclass)
        return None
    leaf = _sha256(b"\x00" + message).digest()
    head = _sha256(b"\x01" + previous + leaf).digest()
    record["leaf"] = leaf.hex()
    record["head"] = head.hex()
    salt_text = binascii.b2a_base64(salt, newline=False).decode("ascii")
    stored_fact[VALUE_SALT_KEY] = salt_text
    stored_fact[VALUE_COMMITMENT_KEY] = commitment
    stored[CHAIN_KEY] = record
    line = fastjson.ordered_unchecked(stored)
    # The event is the one the ledger built for this append (see ``chain.seal``): its empty
    # extra dicts take the salt, the commitment and the record in place, as ``with_lines``
    # keeps a line on it, rather than a Fact and an event built again (2.4 us of 9).
    fact.extra[VALUE_SALT_KEY] = salt_text
    fact.extra[VALUE_COMMITMENT_KEY] = commitment
    event.extra[CHAIN_KEY] = record
    if line is not None:
        object.__setattr__(event, "line", line.decode("utf-8"))
    return event, head


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
