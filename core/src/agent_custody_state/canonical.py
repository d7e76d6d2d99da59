"""JavaScript-compatible canonical JSON and the forget digests.

The TypeScript implementation digests a forgotten value as the canonical JSON of it:
``JSON.stringify`` of a copy whose objects were rebuilt with keys sorted by UTF-16 code units.
JavaScript lists an object's array-index keys (``"0"`` .. ``"4294967294"`` in canonical decimal
form) first, in numeric order, whatever the insertion order, so the output has those keys first
and the sorted rest after them; a plain ``JSON.stringify`` (JSONL lines, tool results) likewise
moves index keys first and keeps the rest in insertion order. A Python ledger must produce the
same bytes, or a digest or line written by one side cannot be checked by the other.
``json.dumps`` differs in four places (float formatting, key order for astral characters and for
index keys, lone surrogates), so the encoder is written out here.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, Literal

from agent_custody_state.fastjson import odd, ordered_bytes, sorted_bytes

DigestKind = Literal["sha256", "hmac-sha256", "none"]

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
# Control characters and lone surrogates are the only characters JSON.stringify escapes
# besides the quote and backslash (ES2019 "well-formed JSON.stringify").
_NEEDS_ESCAPE = re.compile('["\\\\\x00-\x1f\ud800-\udfff]')


def _escape_char(match: re.Match[str]) -> str:
    ch = match.group(0)
    return _ESCAPES.get(ch) or f"\\u{ord(ch):04x}"


def js_string(value: str) -> str:
    """Quote a string as ``JSON.stringify`` does."""
    return '"' + _NEEDS_ESCAPE.sub(_escape_char, value) + '"'


def js_number(value: float | int) -> str:
    """Format a number as JavaScript's ``Number.prototype.toString`` (ECMA-262 7.1.12.1)."""
    if isinstance(value, bool):  # pragma: no cover - callers route bools elsewhere
        raise TypeError("bool is not a number")
    try:
        number = float(value)
    except OverflowError:
        return "null"  # a JS double cannot hold it either; JSON.stringify(Infinity) is null
    if not math.isfinite(number):
        return "null"
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    # repr() is the shortest round-tripping form, as JS's algorithm requires.
    digits_tuple = Decimal(repr(abs(number))).normalize().as_tuple()
    digits = "".join(str(d) for d in digits_tuple.digits)
    exponent = int(digits_tuple.exponent)
    k = len(digits)
    n = k + exponent  # position of the decimal point relative to the digit string
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        exp = f"e{'+' if e >= 0 else '-'}{abs(e)}"
        text = (digits if k == 1 else digits[0] + "." + digits[1:]) + exp
    return sign + text


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def js_sorted(strings: Iterable[str]) -> list[str]:
    """``strings`` in JavaScript's default sort order (UTF-16 code units): code-point order
    but for characters past U+FFFF, which JavaScript puts before U+E000..U+FFFF."""
    return sorted(strings, key=_utf16_key)


_MAX_INDEX = 2**32 - 2  # ECMA-262 array index: a canonical numeric string below 2**32 - 1
_DIGITS = frozenset("0123456789")


def array_index(key: str) -> int | None:
    """The number a key stands for if JavaScript treats it as an array index, else ``None``.

    Only the canonical decimal form counts: ``"01"``, ``"-1"``, ``"1.5"``, ``"1e3"`` and
    ``"4294967295"`` are ordinary string keys.
    """
    if not 0 < len(key) <= 10 or key[0] not in _DIGITS or (key[0] == "0" and len(key) > 1):
        return None
    # isascii() first: str.isdigit() also accepts digits of other scripts, which JS does not.
    if not (key.isascii() and key.isdigit()):
        return None
    number = int(key)
    return number if number <= _MAX_INDEX else None


def js_key_order(obj: dict[str, Any], *, sort: bool) -> list[str]:
    """The order in which JavaScript would list the keys of ``obj`` (after a sorted rebuild if ``sort``).

    Array-index keys first in ascending numeric order, then the others in insertion order, or in
    UTF-16 order when ``sort`` (which models the canonical rebuild).
    """
    keys = list(obj)
    for key in keys:
        if not isinstance(key, str):
            raise TypeError(f"object keys must be strings, got {type(key).__name__}")
    if sort:
        keys.sort(key=_utf16_key)
    indexed = [(number, key) for key in keys if (number := array_index(key)) is not None]
    if not indexed:
        return keys
    indexed.sort()
    return [key for _, key in indexed] + [key for key in keys if array_index(key) is None]


def canonical_json(value: Any) -> str:
    """Return the canonical JSON text of a JSON value, byte-compatible with the TypeScript side.

    A C encoder is used when it provably agrees: orjson where ``fastjson`` vouches for its output;
    else ``json.dumps(sort_keys=True)`` under the conditions of ``js_json``'s fast path, and no
    character outside the Basic Multilingual Plane (Python sorts keys by code point, JavaScript
    by UTF-16 code unit; the two orders differ only there).
    """
    fast = sorted_bytes(value)
    if fast is not None:
        return fast.decode("utf-8")
    if _plain(value):
        text = _SORTED(value)
        if not _SURROGATE.search(text) and (text.isascii() or max(text) <= "\uffff"):
            return text
    parts: list[str] = []
    _encode(value, parts, True)
    return "".join(parts)


def js_json(value: Any) -> str:
    """``JSON.stringify(value)``: compact, JS key order, JS number and string forms.

    Keys come in JavaScript's property order: array-index keys first, ascending, then the rest
    in insertion order. Used for JSONL lines and tool results, so a line written here is
    byte-identical to one written by the TypeScript implementation. orjson is used where
    ``fastjson`` vouches for its output, else ``json.dumps`` (C speed) when it provably agrees:
    no floats, no integers past 2**53, no array-index keys, no lone surrogates.
    """
    fast = ordered_bytes(value)
    if fast is not None:
        return fast.decode("utf-8")
    if _plain(value):
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        # Lone surrogates are looked for once in the output, not in every string of the input.
        if not _SURROGATE.search(text):
            return text
    parts: list[str] = []
    _encode(value, parts, False)
    return "".join(parts)


_SURROGATE = re.compile("[\ud800-\udfff]")
_SORTED = json.JSONEncoder(
    sort_keys=True, ensure_ascii=False, separators=(",", ":"), check_circular=False
).encode
_SAFE_INT = 2**53


def _plain(value: Any) -> bool:
    """Whether ``json.dumps`` writes ``value`` as JavaScript would (lone surrogates aside).

    Called on every event written, so the exact built-in types take a fast path; subclasses go
    through the isinstance checks.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_SAFE_INT < value < _SAFE_INT)
    if kind is dict:
        for key, item in value.items():
            # json.dumps would quietly turn a non-string key into one (the encoder refuses it),
            # and a key starting with a digit may be an array index, which JS moves to the front.
            if type(key) is not str or (key[:1] in _DIGITS and array_index(key) is not None):
                return False
            if not _plain(item):
                return False
        return True
    if kind is list:
        return all(_plain(item) for item in value)
    if isinstance(value, str):
        return True
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return -_SAFE_INT < value < _SAFE_INT
    if isinstance(value, dict):
        return all(
            isinstance(k, str) and array_index(k) is None and _plain(v) for k, v in value.items()
        )
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return False


def _encode(value: Any, out: list[str], sort: bool) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(js_string(value))
    elif isinstance(value, int | float):
        out.append(js_number(value))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key in js_key_order(value, sort=sort):
            if not first:
                out.append(",")
            first = False
            out.append(js_string(key))
            out.append(":")
            _encode(value[key], out, sort)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, out, sort)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not a JSON value")


def canonical_bytes(value: Any) -> bytes:
    """The UTF-8 bytes that are digested; lone surrogates are already escaped, so this cannot fail."""
    return canonical_json(value).encode("utf-8")


def canonical_utf8(value: Any) -> bytes:
    """``canonical_bytes(value)``, fastest, for values whose object keys are strings (parsed
    JSON, the ledger's own dicts: the chain's leaves and commitments). orjson where ``fastjson``
    vouches for it; else ``json.dumps(sort_keys=True)`` when its output shows none of the forms
    it writes unlike JavaScript (``fastjson.odd``) and no lone surrogate; else the exact encoder.
    Unlike ``canonical_json`` it does not walk the value first (the key types are trusted)."""
    fast = sorted_bytes(value)
    if fast is not None:
        return fast
    try:
        text = _SORTED(value)
    except (TypeError, ValueError, RecursionError):
        return canonical_bytes(value)
    try:
        data = text.encode("utf-8")  # a lone surrogate cannot be encoded: the exact encoder
    except UnicodeEncodeError:
        return canonical_bytes(value)
    return canonical_bytes(value) if odd(data, sort=True) else data


def value_digest(
    value: Any, *, forget_key: str | None, keep_digest: bool = True
) -> tuple[str | None, DigestKind]:
    """Digest a value being forgotten: ``(valueDigest, digestKind)`` per SPEC 2.5."""
    if not keep_digest:
        return None, "none"
    data = canonical_bytes(value)
    if forget_key:
        return hmac.new(forget_key.encode("utf-8"), data, hashlib.sha256).hexdigest(), "hmac-sha256"
    return hashlib.sha256(data).hexdigest(), "sha256"


def canonical_equal(a: Any, b: Any) -> bool:
    """Type-exact equality of two JSON values, ignoring key order (used for gateway evidence)."""
    return canonical_json(a) == canonical_json(b)
