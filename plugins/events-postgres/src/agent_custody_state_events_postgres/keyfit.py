"""Keys PostgreSQL cannot index, refused before any row is sent.

SPEC 3's key columns (event and fact ids, space, subject, predicate, supersedes) are text in
btree indexes. PostgreSQL's text refuses U+0000, and a btree refuses an index row over 2,704
bytes; both surfaced as raw driver errors at ``INSERT`` or ``COPY`` (``invalid byte sequence
for encoding "UTF8": 0x00``, ``index row size 3024 exceeds btree version 4 maximum 2704``).
The ledger refuses such keys in every write on every backend (``key_problem`` and
``topic_problem``, from ``agent_custody_state.plugin``); a caller appending events itself
reaches the table without those checks, so the backend holds each appended event's keys to the
same rules, with the same texts, and names the event and the key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from agent_custody_state.plugin import (
    MAX_KEY_BYTES,
    MAX_TOPIC_BYTES,
    AssertEvent,
    Event,
    key_problem,
    topic_problem,
)

#: An escape of U+0000 or of a surrogate in an event's JSON text (not itself escaped: preceded
#: by an even number of backslashes). The writer escapes surrogates only when lone (a pair is
#: written as its character), and a ``jsonb`` column refuses both escapes.
_NOT_JSONB = re.compile(r"(?<!\\)(?:\\\\)*\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")

#: Text this many characters long or shorter is within every byte limit (4 bytes a character).
_SHORT = MAX_KEY_BYTES // 4


def unfit_key(events: Sequence[Event]) -> str | None:
    """Why the first event whose keys PostgreSQL cannot hold cannot be appended, or None.

    A fraction of a microsecond a key: the common one (short, without U+0000) is passed by two
    C-level tests; only a suspect one is measured."""
    for position, event in enumerate(events, 1):
        if type(event) is AssertEvent:
            fact = event.fact
            keys: tuple[tuple[str, object], ...] = (
                ("eventId", event.event_id),
                ("factId", fact.fact_id),
                ("space", fact.space),
                ("subject", fact.subject),
                ("predicate", fact.predicate),
                ("supersedes", event.supersedes),
            )
        else:
            keys = (("eventId", event.event_id), ("factId", getattr(event, "fact_id", None)))
        problem = None
        for name, value in keys:
            if type(value) is str and ("\x00" in value or len(value) > _SHORT):
                problem = problem or key_problem(name, value)
        if type(event) is AssertEvent and problem is None:
            subject, predicate = event.fact.subject, event.fact.predicate
            if len(subject) + len(predicate) > MAX_TOPIC_BYTES // 4:
                problem = topic_problem(subject, predicate)
        if problem is not None:
            return f"event {position} ({event.event_id}): {problem}"
    return None


def unfit_jsonb(events: Sequence[Event]) -> str | None:
    """Why the first event a ``jsonb`` ``json`` column (an older writer's table) cannot hold
    cannot be appended, or None: ``jsonb`` refuses U+0000 and lone surrogates in any text,
    which JSON escapes and a ``text`` column (this backend's own layout) holds. Before, the
    driver's ``unsupported Unicode escape sequence`` named neither the event nor the remedy."""
    for position, event in enumerate(events, 1):
        if _NOT_JSONB.search(event.to_json()):
            return (
                f"event {position} ({event.event_id}): it holds U+0000 or a lone surrogate, "
                "which this table's jsonb json column (an older writer's layout) cannot hold; "
                "ALTER its json column to TYPE text (what this backend creates) to keep it"
            )
    return None


def matchable(params: dict[str, Any]) -> dict[str, Any]:
    """A read's parameters with each text holding U+0000 made NULL (dropped from a list of ids).

    No row holds such a text (PostgreSQL's text cannot), and every text parameter of a read is
    compared with a column, so the answer is the one a NULL gives: no match. Sent as it was,
    the driver refused it (``PostgreSQL text fields cannot contain NUL (0x00) bytes``) where
    every other backend answers "no such fact", so ``get``, ``history``, an as-of read by such
    a subject and a mutation naming such an id (the ledger's own refusal comes after the read
    of the fact's topic) failed on this backend alone."""
    if not any(map(_has_nul, params.values())):
        return params  # the common case: nothing copied
    return {
        k: None
        if type(v) is str and "\x00" in v
        else [i for i in v if not (type(i) is str and "\x00" in i)]
        if isinstance(v, list | tuple)
        else v
        for k, v in params.items()
    }


def _has_nul(value: object) -> bool:
    if type(value) is str:
        return "\x00" in value
    if isinstance(value, list | tuple):
        return any(type(i) is str and "\x00" in i for i in value)
    return False
