"""Rows back into events: the stored wire JSON parsed, a bad row named by its ``seq``.

No cache of decoded events: a read by subject asks one query that returns each event once, and
thousands of cached, long-lived events made every GC pass (and so the p99 of reads) several
times slower than the decoding they saved.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_custody_state.plugin import Event, EventBackendError, event_from_json, shape_problem


def decode(rows: Sequence[Any], location: str) -> list[Any]:
    """The events of ``rows`` (``seq`` and JSON text first), in order."""
    try:
        events = [event_from_json(row[1]) for row in rows]
    except (ValueError, TypeError, AttributeError):  # the last two: a field of a wrong type
        for row in rows:  # name the bad row
            decode_one(row[0], row[1], location)
        raise
    for row, event in zip(rows, events, strict=True):
        problem = shape_problem(event)
        if problem is not None:  # a hand-edited row: named here, not as a TypeError elsewhere
            raise EventBackendError(
                f"{location}: the event with seq {row[0]} is not a valid event: {problem}"
            )
    return events


def decode_one(seq: int, text: str, location: str) -> Event:
    """One stored event; ``EventBackendError`` naming the row if it is not a valid event."""
    try:
        event = event_from_json(text)
        problem = shape_problem(event)
    except (ValueError, TypeError, AttributeError) as exc:
        problem = str(exc)
    if problem is not None:
        raise EventBackendError(
            f"{location}: the event with seq {seq} is not a valid event: {problem}"
        ) from None
    return event
