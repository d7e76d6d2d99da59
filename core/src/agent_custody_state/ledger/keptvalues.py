"""The ledger's own copy of a value it is given: as every backend reads the value back.

A value is kept as JSON text; what a backend answers is that text parsed. The copy the ledger
keeps in memory (``memory:``, a JSONL ledger in the writing process), hands to the stores and
digests must be the same value, or one fact reads differently by backend and by process
(``kept_value``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agent_custody_state.canonical import js_number
from agent_custody_state.fastjson import loads

#: The integers a double holds exactly (``arguments.MAX_EXACT_INT``).
MAX_EXACT_INT = 2**53 - 1

#: Types a kept value shares with the caller's: immutable, and read back as they are.
_SHARED = frozenset((int, bool, type(None)))
_SURROGATE = re.compile("[\ud800-\udfff]")


def _paired(text: str) -> str:
    """``text`` with each high and low surrogate that follow each other joined into the one
    character they encode, as JSON text reads back (``"\\ud83d\\ude00"`` is one character);
    a lone surrogate stays."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _number(value: float) -> float | int:
    """A float as it reads back from its JSON text: JavaScript writes an integral one below
    1e21 (and -0) without a fraction or exponent (``1.0`` -> ``1``, ``-0.0`` -> ``0``,
    ``1e16`` -> ``10000000000000000``), and that text reads back as an integer; past 2^53 it is
    read by this installation's reader (``fastjson.loads``: past 64 bits orjson reads a float),
    from JavaScript's digits, not the double's binary value."""
    if not value.is_integer() or not -1e21 < value < 1e21:
        return value
    if -MAX_EXACT_INT <= value <= MAX_EXACT_INT:
        return int(value)
    read: float | int = loads(js_number(value))
    return read


def kept_value(value: Any) -> Any:
    """The ledger's own copy of a checked value (``value_arg``), as every backend reads it back
    from its JSON text: new dicts and lists all the way down (a tuple or other mapping becoming
    the list or dict it reads back as), floats as ``_number`` reads them, strings with their
    surrogate pairs joined (``_paired``). Before, ``memory:`` and a JSONL ledger in the writing
    process kept ``-0.0``, ``1.0`` or two surrogates where SQLite, PostgreSQL and a reopened
    file read ``0``, ``1`` or one character, so the same fact read differently by backend and
    by process, stores were sent the former, and a forget in the writing process digested the
    unjoined surrogates as escapes where the original digests the character. The text written
    and digested is unchanged: it is the same JSON."""
    kind = type(value)
    if kind is dict:  # members tested inline: no call for an integer, ASCII text or null
        return {
            (k if type(k) is str and k.isascii() else _text(k)): v
            if type(v) in _SHARED or (type(v) is str and v.isascii())
            else kept_value(v)
            for k, v in value.items()
        }
    if kind is list or kind is tuple:
        return [
            v if type(v) in _SHARED or (type(v) is str and v.isascii()) else kept_value(v)
            for v in value
        ]
    if kind is float:
        return _number(value)
    if kind is str:
        return value if value.isascii() else _paired(value)
    if isinstance(value, Mapping):
        return {_text(k): kept_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [kept_value(v) for v in value]
    return _plain(value)


def _text(text: str) -> str:
    """A key as it reads back: plain text (not the caller's ``str`` subclass), pairs joined."""
    return _paired(str.__str__(text))


def _plain(value: Any) -> Any:
    """A scalar of a subclass of ``str``, ``int`` or ``float`` (an ``enum`` member such as
    ``class Color(str, Enum)``, an ``IntEnum``) as the plain value its JSON text
    reads back as. Kept as given, it read back as the caller's object in the writing process
    (``f"{value}"`` gave ``Color.RED``, its own ``__eq__`` ran in comparisons) and as ``"red"``
    everywhere else (docs/decisions.md, "Arguments a user gets wrong")."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bool):  # bool cannot be subclassed: True or False as they are
        return value
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return _number(float.__float__(value))
    return value
