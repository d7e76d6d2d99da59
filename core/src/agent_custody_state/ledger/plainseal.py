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

import base64
import hmac
from typing import Any

from agent_custody_state import fastjson
from agent_custody_state.ledger.model import VALUE_COMMITMENT_KEY, VALUE_SALT_KEY, AssertEvent, Fact


def plain_parts(event: AssertEvent, salt: bytes) -> tuple[bytes, dict[str, Any], Fact] | None:
    """For an assert as the ledger builds it (no extra keys, no external ids, not forgotten, a
    confidence and a value ``fastjson`` vouches for), its leaf message, its stored wire dict
    (the chain record still to add) and its salted fact, all from one walk of the value; None
    for any other event, which takes the reference path (the same bytes, checked in full)."""
    fact = event.fact
    if (
        event.extra
        or fact.extra
        or fact.external is not None
        or fact.forgotten is not None
        or not (fact.confidence is None or fastjson.safe_number(fact.confidence))
        or not fastjson.exact(fact.value, sort=True)  # sorted or not, orjson writes it as JS
    ):
        return None
    value = fastjson.sorted_unchecked(fact.value)
    if value is None:
        return None
    salt_text = base64.b64encode(salt).decode("ascii")
    commitment = hmac.digest(salt, value, "sha256").hex()
    source = {"receiptId": fact.source.receipt_id}
    red = {
        "eventId": event.event_id,
        "kind": "assert",
        "txTime": event.tx_time,
        "fact": {
            "factId": fact.fact_id,
            "subject": fact.subject,
            "predicate": fact.predicate,
            "space": fact.space,
            "actor": fact.actor,
            "source": source,
            "provenance": fact.provenance,
            "validFrom": fact.valid_from,
            "validTo": fact.valid_to,
            "confidence": fact.confidence,
            VALUE_COMMITMENT_KEY: commitment,
        },
        "supersedes": event.supersedes,
    }
    message = fastjson.sorted_unchecked(red)  # the redacted form's keys are the ledger's own
    if message is None:  # a text field orjson refuses (a lone surrogate, a str subclass)
        return None
    stored = {
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
            "source": source,
            "provenance": fact.provenance,
            "validFrom": fact.valid_from,
            "validTo": fact.valid_to,
            "confidence": fact.confidence,
            VALUE_SALT_KEY: salt_text,
            VALUE_COMMITMENT_KEY: commitment,
        },
        "supersedes": event.supersedes,
    }
    return (
        message,
        stored,
        with_extra(fact, {VALUE_SALT_KEY: salt_text, VALUE_COMMITMENT_KEY: commitment}),
    )


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
