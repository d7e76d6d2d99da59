"""JSON text at C speed, used only where it provably equals what JavaScript writes.

``canonical`` defines the bytes (SPEC 2.5: ``JSON.stringify`` of a copy with sorted keys, and
plain ``JSON.stringify`` for lines); this module offers the same bytes faster, or ``None`` when it
cannot vouch for them, and the caller then runs the reference encoder. Two C encoders are used:
``orjson`` when it is installed (the core's ``fast`` extra), else the standard library's.

Both write strings and key order as JavaScript does for the inputs they accept: only ``"``,
``\\`` and control characters escaped, the short escapes ``\\b \\f \\n \\r \\t`` and lowercase
``\\u00XX`` for the rest, everything else as UTF-8; keys in insertion order, or sorted by code
point. Where they may differ, the output shows it, and ``odd`` looks for exactly those marks:

* a float written as an integer (``1.0``, ``-0.0``; JavaScript ``1``, ``0``) or with an exponent
  (``1e+16``, ``1e16``, ``1e-6``; JavaScript ``10000000000000000``, ``0.000001``);
* NaN or Infinity (the standard library writes them bare; JavaScript ``null``);
* a number of 16 digits or more: an integer that may lie beyond 2**53, which JavaScript rounds;
* a key that is an array index (``"7":``), which JavaScript lists first;
* when keys are sorted, a character beyond the Basic Multilingual Plane: code-point order and
  JavaScript's UTF-16 order differ only there.

Lone surrogates cannot be encoded as UTF-8, and orjson refuses keys that are not strings, integers
beyond 64 bits, and types that are not JSON (dataclasses, dates and subclasses are passed through
to refuse them); every refusal falls back to the reference encoder, which escapes or raises as
JavaScript would. A mark inside a string (``"version 1.0, then"``) only costs the exact encoder.
``tests/core/test_fastjson.py`` checks the equivalence on generated JSON, edge numbers included.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

try:  # the core's optional ``fast`` extra
    import orjson
except ImportError:  # pragma: no cover - exercised by the test that hides orjson
    orjson = None  # type: ignore[assignment]

# Two views of an output, each one C pass: ``]`` and ``}`` read as ``,`` (one test then finds a
# value's end); and also every digit as ``0`` and ``+`` as ``-`` (one test finds every number of
# a shape). A trailing ``,`` is added, so a value at the very end ends like any other.
_ENDS = bytes.maketrans(b"]}", b",,")
_SHAPES = bytes.maketrans(b"123456789+", b"000000000-")
# An exponent: ``e``, a sign, 1 to 3 digits, the end of the number. A hash or UUID inside a
# string never has that shape (``…0e-4a1b-…``); a string that does only costs the exact encoder.
_EXPONENTS = (b"0e-0,", b"0e-00,", b"0e-000,")
# 16 digits or more starting a value (after ``:`` ``,`` ``[``, or at the start), not inside a hash.
_LONG_INT = re.compile(rb"[:,\[]-?0{16}")
_LONG_START = re.compile(rb"-?0{16}")
_INDEX_KEY = re.compile(rb'"[0-9]{1,10}":')
_ASTRAL = re.compile(rb"[\xf0-\xf4]")  # the lead byte of a 4-byte UTF-8 sequence


def odd(data: bytes, *, sort: bool) -> bool:
    """Whether a C encoder's output ``data`` may differ from JavaScript's (the list above).
    Plain substring tests on translated copies, since ``re`` scans cost several times more; a
    regular expression only confirms the rare candidates."""
    ends = data.translate(_ENDS) + b","
    if b".0," in ends or b"NaN" in data or b"Infinity" in data:
        return True
    shapes = ends.translate(_SHAPES)
    if _EXPONENTS[0] in shapes or _EXPONENTS[1] in shapes or _EXPONENTS[2] in shapes:
        return True
    if b"0000000000000000" in shapes and (
        _LONG_INT.search(shapes) is not None or _LONG_START.match(shapes) is not None
    ):
        return True
    if b'0":' in shapes and _INDEX_KEY.search(data) is not None:
        return True
    return sort and not data.isascii() and _ASTRAL.search(data) is not None


if orjson is not None:
    _PASS = (
        orjson.OPT_PASSTHROUGH_DATACLASS
        | orjson.OPT_PASSTHROUGH_DATETIME
        | orjson.OPT_PASSTHROUGH_SUBCLASS
    )
    _SORT = _PASS | orjson.OPT_SORT_KEYS
    _dumps: Callable[..., bytes] | None = orjson.dumps
    _loads: Callable[[str | bytes], Any] | None = orjson.loads
    _Refused: tuple[type[BaseException], ...] = (TypeError, ValueError, RecursionError)
    # ``odd`` knows the signed exponents of orjson 3.10 on (``1e+16``, ``1e-7``); an orjson
    # writing them another way is not used.
    if (
        orjson.dumps(1e16) != b"1e+16"
        or orjson.dumps(1e-7) != b"1e-7"
        or orjson.dumps(1.0) != b"1.0"
    ):
        _dumps = _loads = None
else:  # pragma: no cover - exercised by the test that hides orjson
    _PASS = _SORT = 0
    _dumps = _loads = None
    _Refused = ()
#: What orjson raises for a value it refuses (``encoder``'s callers catch it).
REFUSED = _Refused


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def sorted_bytes(value: Any) -> bytes | None:
    """``canonical_json(value)`` as UTF-8 through orjson, or ``None`` (no orjson, or it cannot
    vouch for the output: the caller runs the reference encoder)."""
    if _dumps is None:
        return None
    kind = type(value)
    if kind is str or (kind is int and -(2**53) < value < 2**53):
        # A lone string or safe integer (most fact values) holds no mark ``odd`` looks for but
        # the astral characters, which matter only to the order of keys: no scan.
        try:
            return _dumps(value)
        except _Refused:  # a lone surrogate
            return None
    try:
        data = _dumps(value, _refuse, _SORT)
    except _Refused:
        return None
    return data if exact(value, sort=True) or not odd(data, sort=True) else None


def sorted_unchecked(value: Any) -> bytes | None:
    """``sorted_bytes`` without ``odd``'s scan, for a caller that has checked the value's shape
    itself (no float, integer, key or character that ``odd`` looks for: ``chain.leaf_bytes``);
    ``None`` when orjson is missing or refuses the value."""
    if _dumps is None:
        return None
    try:
        return _dumps(value, _refuse, _SORT)
    except _Refused:
        return None


def ordered_unchecked(value: Any) -> bytes | None:
    """``ordered_bytes`` without the check, for a caller that has checked the value's shape
    itself (``Event.to_json``, ``plainseal``); ``None`` when orjson is missing or refuses it."""
    if _dumps is None:
        return None
    try:
        return _dumps(value, _refuse, _PASS)
    except _Refused:
        return None


def encoder() -> tuple[Callable[..., bytes], Callable[[Any], Any], int, int] | None:
    """orjson's ``dumps``, the ``default`` that refuses non-JSON types and the options of
    ``sorted_unchecked`` and ``ordered_unchecked``, for a hot loop over a batch that calls it
    directly (``plainseal``: no function layer and ``try`` per encoding); ``None`` when orjson
    is missing or unusable. A caller catches ``REFUSED`` as those functions do."""
    if _dumps is None:
        return None
    return _dumps, _refuse, _SORT, _PASS


def safe_number(number: Any) -> bool:
    """Whether orjson writes ``number`` as JavaScript does: an integer within 2**53, or a float
    that is not integral and lies where both write it positionally (1e-5 to 1e15)."""
    kind = type(number)
    if kind is int:
        return bool(-(2**53) < number < 2**53)
    return kind is float and 1e-5 <= abs(number) < 1e15 and not number.is_integer()


def ordered_bytes(value: Any) -> bytes | None:
    """``js_json(value)`` (``JSON.stringify``: insertion order) as UTF-8 through orjson, or
    ``None`` as for ``sorted_bytes``."""
    if _dumps is None:
        return None
    try:
        data = _dumps(value, _refuse, _PASS)
    except _Refused:
        return None
    return data if exact(value, sort=False) or not odd(data, sort=False) else None


#: Key names of the ledger's own wire dicts (events, facts, sources, chain records,
#: certificates): ASCII, none starting with a digit, so no key order question arises for them.
_KNOWN_KEYS = frozenset(
    {
        *("eventId", "kind", "txTime", "fact", "supersedes", "factId", "actor", "reason"),
        *("source", "valueDigest", "digestKind", "receiptId", "subject", "predicate"),
        *("value", "space", "provenance", "external", "validFrom", "validTo", "confidence"),
        *("forgotten", "at", "valueSalt", "valueCommitment", "chain", "seq", "leaf", "head"),
        *("genesis", "size", "restored"),
    }
)
_NONE = type(None)
_TEXTS = frozenset((str, _NONE, bool))
#: The known keys whose values may be numbers, lists or dicts in the ledger's own dicts.
_NESTED_KEYS = frozenset(
    ("fact", "value", "source", "external", "confidence", "forgotten", "chain", "seq")
) | frozenset(("genesis", "size", "restored"))
_DIGIT_KEY = re.compile("(?:^|\x00)[0-9]")
_MAX_DEPTH = 64
_SAFE_INT = 2**53


def exact(value: Any, *, sort: bool, depth: int = 0) -> bool:
    """Whether orjson writes ``value`` exactly as JavaScript does, told from the value itself
    (no scan of the output): text, booleans and null; integers within 2**53 and floats that
    ``safe_number`` accepts; lists of such; dicts of such whose keys are strings, none of them
    starting with a digit (which might be an array index), and, when ``sort``, no key with a
    character beyond the Basic Multilingual Plane. The ledger's own dicts (known key names,
    text values) cost a few C-level set operations. ``False`` only means "not shown": the
    caller scans the output (``odd``)."""
    kind = type(value)
    if kind is dict:
        if depth > _MAX_DEPTH:
            return False
        values = value.values()
        if value.keys() <= _KNOWN_KEYS:
            # Only the keys that hold nested values in the ledger's dicts are looked at; a
            # value of another type under any other key leaves ``others`` above zero.
            kinds = list(map(type, values))
            others = len(kinds) - kinds.count(str) - kinds.count(_NONE) - kinds.count(bool)
            if not others:
                return True
            for key in _NESTED_KEYS.intersection(value):
                item = value[key]
                if type(item) in _TEXTS:
                    continue
                others -= 1
                if not exact(item, sort=sort, depth=depth + 1):
                    return False
            return not others
        try:
            keys = "\x00".join(value)
        except TypeError:  # a key that is not a string
            return False
        if _DIGIT_KEY.search(keys) or (sort and not keys.isascii() and max(keys) > "\uffff"):
            return False
        if set(map(type, values)) <= _TEXTS:
            return True
        for item in values:  # a loop, not all(...): the generator costs more than the tests
            kind = type(item)
            if kind in _TEXTS:
                continue
            if kind is int:
                if not -_SAFE_INT < item < _SAFE_INT:
                    return False
            elif not exact(item, sort=sort, depth=depth + 1):
                return False
        return True
    if kind in _TEXTS:
        return True
    if kind is list:
        return depth <= _MAX_DEPTH and all(exact(v, sort=sort, depth=depth + 1) for v in value)
    return safe_number(value)


def loads(text: str | bytes) -> Any:
    """``json.loads`` at orjson's speed where both read the text alike, else ``json.loads`` (so
    errors, NaN, huge numbers and lone surrogates behave exactly as before). Both keep the last
    of duplicate keys and round floats correctly; an integer beyond 64 bits orjson reads as a
    float, which canonical JSON writes alike (JavaScript numbers are doubles)."""
    if _loads is not None:
        try:
            return _loads(text)
        except ValueError:
            pass
    return json.loads(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if number in (_INF, -_INF):
        raise ValueError(f"{text[:20]} is not a finite number")
    return number


def _finite_int(text: str) -> int:
    number = int(text)
    try:
        float(number)
    except OverflowError:
        raise ValueError(f"{text[:20]}... is not a finite number") from None
    return number


_INF = float("inf")


def loads_strict(text: str | bytes) -> Any:
    """``loads`` that refuses what only Python's reader takes: ``NaN``, ``Infinity`` and
    ``-Infinity`` (canonical JSON writes each as ``null``, so a ``null`` edited into one keeps
    every hash, while JavaScript's ``JSON.parse`` cannot read the text at all), and a number too
    large for a double (``1e400``, 400 digits): ``JSON.parse`` and Python read an infinity,
    which canonical JSON writes as ``null`` too (orjson refuses such numbers itself). Bytes
    must be UTF-8 without a byte order mark (``json.loads`` would also take a BOM, UTF-16 and
    UTF-32, which the original's ``JSON.parse`` of the line cannot read)."""
    if _loads is not None:
        try:
            return _loads(text)
        except ValueError:
            pass
    if isinstance(text, bytes):
        text = text.decode("utf-8")  # ``UnicodeDecodeError``; a BOM is then refused below
    return json.loads(
        text, parse_constant=_no_constant, parse_float=_finite_float, parse_int=_finite_int
    )


class _Twice(Exception):
    pass


def _pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
    made = dict(items)
    if len(made) != len(items):
        raise _Twice
    return made


def has_duplicate_keys(text: str | bytes) -> bool:
    """Whether some object of the JSON ``text`` holds a key twice (readers disagree on which
    value it has: Python, orjson and ``JSON.parse`` keep the last, SQLite's ``json_extract``
    the first). Slow (Python's own reader): for the few events where it matters."""
    try:
        json.loads(text, object_pairs_hook=_pairs)
    except _Twice:
        return True
    except ValueError:
        return False
    return False


def duplicate_keys(text: str | bytes, data: Any) -> bool:
    """``has_duplicate_keys(text)``, where ``data`` is ``text`` parsed (``loads``), with a first
    try in one C call: a text that is exactly orjson's compact writing of ``data`` (a line the
    ledger or the original wrote) holds no key twice, since ``data`` holds each key once."""
    dumped = ordered_unchecked(data)
    if dumped is not None:
        if isinstance(text, bytes):
            if dumped == text:
                return False
        elif len(dumped) >= len(text) and dumped == text.encode("utf-8", "surrogatepass"):
            return False
    return has_duplicate_keys(text)
