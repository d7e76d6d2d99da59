"""Argument checking against the tools' JSON schemas, with field paths a caller can act on.

Only the schema subset ``tools.py`` uses is interpreted: ``type``, ``required``, ``properties``,
``minLength``, ``maxLength``, ``minimum``/``maximum`` and ``format: date-time``. A string argument
without its own ``maxLength`` may hold at most ``MAX_TEXT`` (4,096) characters: subjects,
predicates, spaces, actors and ids are keys, and nothing larger belongs in them (a ``reason`` may
hold 65,536: ``tools.py``); the ledger then holds the keys among them (subject, predicate,
space, fact ids) to 2,048 bytes of UTF-8, and subject and predicate to 2,600 together, what a
PostgreSQL index row holds on every backend (``ledger/arguments.py``), refusing with its own
message. The value is bounded by the value limits (``limits.py``). Extra arguments are ignored
(the gateway's fact lookups put their own keys there). Times are parsed with their offset and
normalised to the wire form here, so handlers only ever see ``2026-09-01T00:00:00.000Z``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from agent_custody_state.timeutil import TimeFormatError, normalize_time

_ARTICLE = {"object": "an object", "array": "an array"}
#: The longest string argument, in characters, unless its schema says otherwise.
MAX_TEXT = 4096


def json_type(value: Any) -> str:
    """The JSON type name of a decoded JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _matches(value: Any, expected: str) -> bool:
    actual = json_type(value)
    return actual == expected or (
        expected == "integer" and actual == "number" and float(value).is_integer()
    )


class ArgumentErrors(ValueError):
    """Every problem found, rendered as ``invalid arguments: a: ...; b: ...``."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid arguments: " + "; ".join(problems))
        self.problems = problems


def validate_arguments(schema: Mapping[str, Any], arguments: Any) -> dict[str, Any]:
    """Check ``arguments`` against ``schema``; return them with times normalised.

    Raises ``ArgumentErrors`` listing every problem (not only the first), each as
    ``<field path>: <message>``.
    """
    problems: list[str] = []
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise ArgumentErrors([f"arguments: expected an object, got {json_type(arguments)}"])
    cleaned = _check_object(schema, arguments, "", problems)
    if problems:
        raise ArgumentErrors(problems)
    return cleaned


def _check_object(
    schema: Mapping[str, Any], value: Mapping[str, Any], prefix: str, problems: list[str]
) -> dict[str, Any]:
    out = dict(value)
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = schema.get("required", ())
    # Problems are reported in the schema's field order, the order the tool documents them.
    for name in [*properties, *(r for r in required if r not in properties)]:
        if name in value:
            out[name] = _check_value(properties.get(name, {}), value[name], prefix + name, problems)
        elif name in required:
            problems.append(f"{prefix}{name}: required")
    return out


def _check_value(schema: Mapping[str, Any], value: Any, path: str, problems: list[str]) -> Any:
    expected = schema.get("type")
    if expected is not None and not _matches(value, expected):
        article = _ARTICLE.get(expected, f"a {expected}")
        problems.append(f"{path}: expected {article}, got {json_type(value)}")
        return value
    if expected == "object":
        return _check_object(schema, value, path + ".", problems)
    if expected == "string":
        if len(value) < schema.get("minLength", 0):
            problems.append(f"{path}: must not be empty")
            return value
        longest = schema.get("maxLength", MAX_TEXT)
        if len(value) > longest:
            problems.append(f"{path}: too long: {len(value)} characters; the limit is {longest}")
            return value
        if schema.get("format") == "date-time":
            try:
                return normalize_time(value)
            except TimeFormatError as exc:
                problems.append(f"{path}: {exc}")
                return value
    if expected == "number":
        low, high = schema.get("minimum"), schema.get("maximum")
        if isinstance(value, float) and not math.isfinite(value):
            # NaN compares false with everything: it would pass any range check below.
            problems.append(f"{path}: must be a finite number, got {value}")
        elif (low is not None and value < low) or (high is not None and value > high):
            problems.append(f"{path}: must be between {low} and {high}")
    return value
