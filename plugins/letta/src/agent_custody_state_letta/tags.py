"""Custody as Letta tags: agent archival passages take tags but no free-form metadata.

Every passage carries ``agent-custody`` (the SPEC 6 ``source``) and one ``<key>:<value>`` tag per
custody field: ``fact:``, ``space:``, ``receipt:`` (only when the fact has a receipt),
``actor:``, ``provenance:`` and ``valid-from:``. Values may contain colons; a tag splits at its
first one. The ``fact:`` tag is what removal is verified by.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent_custody_state.plugin import Fact, custody_metadata

__all__ = ["CUSTODY_TAG", "RESERVED_PREFIXES", "custody_from_tags", "custody_tags", "fact_tag"]

CUSTODY_TAG = "agent-custody"
#: tag prefix -> custody metadata key (SPEC 6)
_FIELDS = {
    "fact:": "factId",
    "space:": "space",
    "receipt:": "receiptId",
    "actor:": "actor",
    "provenance:": "provenance",
    "valid-from:": "validFrom",
}
RESERVED_PREFIXES = tuple(_FIELDS)


def fact_tag(fact: Fact) -> str:
    return f"fact:{fact.fact_id}"


def custody_tags(fact: Fact, extra: Iterable[str] = ()) -> list[str]:
    """The tags written on every passage of ``fact``: custody first, then ``extra``, no repeats."""
    # The actor and receipt as the custody metadata gives them: one holding U+0000 or a lone
    # surrogate, which Letta's database cannot hold, as its JSON text.
    custody = custody_metadata(fact)
    values = {
        "fact:": fact.fact_id,
        "space:": fact.space,
        "receipt:": custody["receiptId"],
        "actor:": custody["actor"],
        "provenance:": fact.provenance,
        "valid-from:": fact.valid_from,
    }
    tags = [CUSTODY_TAG]
    tags += [f"{prefix}{value}" for prefix, value in values.items() if value]
    tags += extra
    return list(dict.fromkeys(tags))


def custody_from_tags(tags: Iterable[str]) -> dict[str, Any]:
    """Decode the custody metadata back from a passage's tags (absent fields are ``None``)."""
    found: dict[str, Any] = dict.fromkeys(_FIELDS.values())
    found["source"] = None
    for tag in tags:
        if tag == CUSTODY_TAG:
            found["source"] = CUSTODY_TAG
            continue
        for prefix, key in _FIELDS.items():
            if tag.startswith(prefix) and found[key] is None:
                found[key] = tag[len(prefix) :]
    return found
