"""Reading decoded JSON the way the JavaScript original does, and writing it the way it writes.

Bundles and packs are untrusted input: a field may be missing or of another type. ``at`` walks a
path and yields ``None`` where JavaScript's optional chaining would yield ``undefined``; ``text``
interpolates a value as a template literal would. ``pretty`` is ``JSON.stringify(x, null, 2)``
(every file the extras write and every ``--json`` output), ``compact`` is ``JSON.stringify(x)``.
``parse`` reads what the extras read (receipt files, payloads, signed files, scenario files)
and refuses JSON nested deeper than ``MAX_DEPTH``: Python could not digest or print it.
"""

from __future__ import annotations

from typing import Any

from agent_custody_state.canonical import js_json, js_key_order, js_number, js_string
from agent_custody_state.controltext import shown as shown
from agent_custody_state.signing import TooDeep, js_parse

MISSING: Any = object()
#: The deepest JSON the extras read: a ledger value may be 256 levels deep, and a receipt holds
#: it a few levels down. Far deeper input would exhaust Python's recursion when digested.
MAX_DEPTH = 300


class TooDeepError(ValueError):
    """JSON nested deeper than ``MAX_DEPTH`` (or than Python parses at all)."""


TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep"


def parse(data: bytes | str) -> Any:
    """``JSON.parse``; ``ValueError`` for what is not JSON, ``TooDeepError`` for what nests
    deeper than ``MAX_DEPTH``."""
    try:
        value = js_parse(data)
    except TooDeep:
        raise TooDeepError(TOO_DEEP) from None
    check_depth(value)
    return value


def check_depth(value: Any) -> None:
    """``TooDeepError`` if ``value`` nests deeper than ``MAX_DEPTH``; walked without recursion,
    so a value that would exhaust it (a signed payload, a pack about to be signed) is refused
    before anything recursive (digest, print) sees it."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                raise TooDeepError(TOO_DEEP)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


def items(value: Any) -> list[Any]:
    """``value`` when it is an array, else ``[]`` (a signed file may hold anything)."""
    return value if isinstance(value, list) else []


def at(value: Any, *path: str | int) -> Any:
    """``value?.a?.b``: ``None`` as soon as a step is missing or not a container."""
    for step in path:
        if isinstance(step, int):
            if not isinstance(value, list) or not -len(value) <= step < len(value):
                return None
            value = value[step]
        else:
            if not isinstance(value, dict):
                return None
            value = value.get(step)
    return value


def has(value: Any, key: str) -> bool:
    """``key in value`` for an object (JavaScript's ``!== undefined`` for a present key)."""
    return isinstance(value, dict) and key in value


def truthy(value: Any) -> bool:
    """JavaScript truthiness: every object and array is true, even an empty one."""
    if isinstance(value, dict | list):
        return True
    if isinstance(value, float) and value != value:  # NaN
        return False
    return bool(value) and value is not MISSING


def text(value: Any) -> str:
    """``${value}`` of a JSON value (``null``, ``undefined``, numbers the JavaScript way);
    strings are ``shown``."""
    if value is None:
        return "null"
    if value is MISSING:
        return "undefined"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, int | float):
        return js_number(value)
    if isinstance(value, list):
        return ",".join("" if item is None else text(item) for item in value)
    return "[object Object]"


def pad(value: str, width: int) -> str:
    """``value.padEnd(width)``: JavaScript counts UTF-16 code units, so a character outside the
    Basic Multilingual Plane (an emoji in a scenario or tool name) takes two of the width."""
    units = len(value) + sum(1 for ch in value if ord(ch) > 0xFFFF)
    return value + " " * max(0, width - units)


def compact(value: Any) -> str:
    """``JSON.stringify(value)``; a missing value prints as ``undefined``, as it would there."""
    return "undefined" if value is MISSING else js_json(value)


def pretty(value: Any) -> str:
    """``JSON.stringify(value, null, 2)``: two-space indent, ``"k": v``, ``[]``/``{}`` when empty."""
    parts: list[str] = []
    _pretty(value, parts, "")
    return "".join(parts)


def _pretty(value: Any, out: list[str], indent: str) -> None:
    inner = indent + "  "
    if isinstance(value, dict):
        keys = js_key_order(value, sort=False)
        if not keys:
            out.append("{}")
            return
        out.append("{\n")
        for i, key in enumerate(keys):
            out.append(f"{inner}{js_string(key)}: ")
            _pretty(value[key], out, inner)
            out.append(",\n" if i < len(keys) - 1 else "\n")
        out.append(indent + "}")
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        out.append("[\n")
        for i, item in enumerate(value):
            out.append(inner)
            _pretty(item, out, inner)
            out.append(",\n" if i < len(value) - 1 else "\n")
        out.append(indent + "]")
    else:
        out.append(js_json(value))
