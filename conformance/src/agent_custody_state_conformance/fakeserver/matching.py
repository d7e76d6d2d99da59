"""Deterministic stand-ins for what vendors compute: relevance scores, filter comparisons, ids.

``similarity`` replaces semantic search with a word-overlap cosine, ``compare`` evaluates one
filter operator the way the vendors' filter languages do, ``is_uuid`` and ``iso_now`` cover the
identifiers and timestamps vendors put on the wire.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

__all__ = ["compare", "is_uuid", "iso_now", "similarity"]


def is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def iso_now() -> str:
    """Current UTC time as ISO 8601 with an explicit offset, as the vendors emit it."""
    return datetime.now(UTC).isoformat()


_WORD = re.compile(r"[a-z0-9]+")


def similarity(query: str, text: str) -> float:
    """A deterministic stand-in for semantic relevance, in ``[0, 1]``.

    Identical text scores 1.0; otherwise it is the cosine of the two word sets, so an
    unrelated query scores 0 and vendor thresholds (mem0's default 0.1) bite as they would.
    """
    if query.strip().lower() == text.strip().lower():
        return 1.0
    left, right = set(_WORD.findall(query.lower())), set(_WORD.findall(text.lower()))
    if not left or not right:
        return 0.0
    return round(len(left & right) / math.sqrt(len(left) * len(right)), 6)


def _ordered(actual: Any, expected: Any, test: Callable[[Any, Any], bool]) -> bool:
    try:
        return bool(test(actual, expected))
    except TypeError:
        return False


def compare(op: str, actual: Any, expected: Any) -> bool:
    """Evaluate one filter comparison; ``actual`` is ``None`` when the field is missing.

    Raises ``KeyError`` for an operator it does not know, so a vendor can turn that into its
    own 400.
    """
    match op:
        case "eq":
            return bool(actual == expected)
        case "ne":
            return bool(actual != expected)
        case "in":
            return isinstance(expected, list) and actual in expected
        case "nin":
            return isinstance(expected, list) and actual not in expected
        case "gt":
            return _ordered(actual, expected, lambda a, b: a > b)
        case "gte":
            return _ordered(actual, expected, lambda a, b: a >= b)
        case "lt":
            return _ordered(actual, expected, lambda a, b: a < b)
        case "lte":
            return _ordered(actual, expected, lambda a, b: a <= b)
        case "contains":
            if isinstance(actual, str) and isinstance(expected, str):
                return expected in actual
            return isinstance(actual, list) and expected in actual
        case "icontains":
            return isinstance(actual, str) and str(expected).lower() in actual.lower()
        case "is_null":
            return actual is None
        case "is_not_null":
            return actual is not None
    raise KeyError(op)
