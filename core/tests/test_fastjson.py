"""The C-speed JSON paths (``fastjson``: orjson, else the standard library) against the reference
encoder of ``canonical``: identical bytes wherever they answer, the reference wherever they
cannot vouch for theirs. Node.js agreement of the reference is in ``test_canonical``."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_custody_state import fastjson
from agent_custody_state.canonical import (
    _encode,
    canonical_json,
    canonical_utf8,
    js_json,
    js_number,
)
from agent_custody_state.ledger import chain
from agent_custody_state.ledger.model import (
    AssertEvent,
    ConfirmEvent,
    Fact,
    ForgetEvent,
    Forgotten,
    HoldEvent,
    RetractEvent,
    Source,
)

pytest.importorskip("orjson", reason="the fast path is orjson; the test group installs it")

EDGE_FLOATS = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.1,
    1.5,
    1e-5,
    1e-6,
    1e-7,
    1.5e-7,
    123e-20,
    1e15,
    1e16,
    1e20,
    1e21,
    1.2345678901234568e20,
    1e300,
    5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    float(2**53),
    float(2**53 + 2),
    9007199254740993.0,
    0.000001234,
    123456.789,
    -987654321.125,
]
EDGE_INTS = [0, -1, 2**53 - 1, -(2**53 - 1), 2**53, 2**53 + 1, 2**63 - 1, 2**64, -(2**64), 10**30]
EDGE_KEYS = ["0", "1", "10", "01", "-1", "1.5", "4294967294", "4294967295", "a", "é", "\uffff"]
EDGE_KEYS += ["\ue000", "\U0001f600", "\U00010000", "", "1e3", "\u0661", "x\ud800", "\x7f"]

numbers = (
    st.floats()  # NaN and the infinities too: JavaScript writes null
    | st.sampled_from(EDGE_FLOATS)
    | st.sampled_from(EDGE_INTS)
    | st.integers(-(2**70), 2**70)
)
# Every code point, lone surrogates and characters beyond the BMP included.
strings = st.text(st.characters(codec=None, categories=None), max_size=8) | st.sampled_from(
    EDGE_KEYS
)
keys = strings | st.sampled_from(EDGE_KEYS) | st.integers(0, 20).map(str)
json_values = st.recursive(
    st.none() | st.booleans() | numbers | strings,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=16,
)


def _reference(value: Any, *, sort: bool) -> str:
    parts: list[str] = []
    _encode(value, parts, sort)
    return "".join(parts)


def _agree(value: Any) -> None:
    exact = _reference(value, sort=True)
    exact_bytes = exact.encode("utf-8")  # lone surrogates are escaped: always encodable
    fast = fastjson.sorted_bytes(value)
    assert fast is None or fast == exact_bytes, (value, fast, exact)
    assert canonical_json(value) == exact
    assert canonical_utf8(value) == exact_bytes
    line = _reference(value, sort=False)
    fast_line = fastjson.ordered_bytes(value)
    assert fast_line is None or fast_line == line.encode("utf-8"), (value, fast_line, line)
    assert js_json(value) == line


@settings(max_examples=3000, deadline=None)
@given(json_values)
def test_fast_encoders_write_the_reference_bytes_or_decline(value: Any) -> None:
    _agree(value)


@pytest.mark.parametrize("number", EDGE_FLOATS + EDGE_INTS + [math.nan, math.inf, -math.inf])
def test_edge_numbers(number: float | int) -> None:
    for value in (number, [number], {"k": number}, {"k": [1, number, "x"]}, [number, 1.5]):
        _agree(value)


@pytest.mark.parametrize("key", EDGE_KEYS)
def test_edge_keys(key: str) -> None:
    for other in ("a", "\uffff", "\U0001f600", "0", "z"):
        _agree({key: 1, other: 2})
        _agree({other: {key: [key]}, key: other})


@pytest.mark.parametrize(
    "text",
    ["1.0 is a version, 2.0]", "ratio:1e5", "1234567890123456", '"7":', "NaN", "\U0001f600"],
)
def test_marks_inside_strings_cost_only_the_exact_encoder(text: str) -> None:
    _agree({"s": text, text: text})


def test_the_fast_path_answers_for_ordinary_events() -> None:
    """Not a speed test: the fast path must actually be taken for what the ledger writes,
    hashes and UUIDs included, or the benchmarks measure the fallback."""
    event = {
        "eventId": "0e3f1c2a-9b1e-4e7a-8c8e-1e5e0e9e2e1e",
        "kind": "assert",
        "txTime": "2026-01-01T00:00:00.000Z",
        "fact": {
            "factId": "5e1e0e2e-3e4e-4e5e-8e6e-7e8e9e0e1e2e",
            "value": {"tier": "pro", "seats": 12, "ratio": 0.25, "tags": ["é", None, True]},
            "valueCommitment": "3e5e" * 16,
            "confidence": 0.9,
        },
        "supersedes": None,
        "chain": {"seq": 1204, "leaf": "00" * 32, "head": "9e" * 32},
    }
    assert fastjson.sorted_bytes(event) == _reference(event, sort=True).encode()
    assert fastjson.ordered_bytes(event) == _reference(event, sort=False).encode()


def test_without_orjson_the_standard_library_paths_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fastjson, "_dumps", None)
    monkeypatch.setattr(fastjson, "_loads", None)
    assert fastjson.sorted_bytes({"a": 1}) is None
    for value in [*EDGE_FLOATS, *EDGE_INTS, {k: 1 for k in EDGE_KEYS}, ["é", {"b": [1.5]}]]:
        assert canonical_utf8(value) == _reference(value, sort=True).encode("utf-8")
        assert js_json(value) == _reference(value, sort=False)
    assert fastjson.loads('{"a": NaN}')["a"] != fastjson.loads('{"a": NaN}')["a"]


texts = st.one_of(
    json_values.map(lambda v: json.dumps(v, ensure_ascii=False)),
    json_values.map(lambda v: json.dumps(v, ensure_ascii=True)),
    st.sampled_from(
        [
            '"\\ud800"',
            "18446744073709551616",
            "123456789012345678901234567890",
            "1e400",
            "-0",
            "-0.0",
            "NaN",
            '{"a":1,"a":2}',
            "[1.0,1E5,1e-7]",
            "{",
            "\ufeff{}",
            '"\\u00e9\\uD83D\\uDE00"',
        ]
    ),
)


@settings(max_examples=1500, deadline=None)
@given(texts)
def test_loads_reads_as_json_loads_does(text: str) -> None:
    """What verify parses: the same canonical bytes, or the same refusal."""
    try:
        expected = json.loads(text)
    except ValueError:
        with pytest.raises(ValueError):
            fastjson.loads(text)
        return
    got = fastjson.loads(text)
    assert canonical_json(got) == canonical_json(expected)
    for raw in (text.encode("utf-8", "surrogatepass"),):
        try:
            again = fastjson.loads(raw)
        except ValueError:  # a lone surrogate written raw is not UTF-8: json.loads refuses too
            with pytest.raises(ValueError):
                json.loads(raw)
        else:
            assert canonical_json(again) == canonical_json(expected)


@settings(max_examples=2000, deadline=None)
@given(st.floats() | st.integers(-(2**60), 2**60) | st.sampled_from(EDGE_FLOATS + EDGE_INTS))
def test_safe_numbers_are_written_as_javascript_writes_them(number: float | int) -> None:
    if fastjson.safe_number(number):
        assert fastjson.sorted_unchecked(number) == js_number(number).encode()


event_keys = st.sampled_from(sorted(chain._EVENT_KEYS)) | keys
fact_keys = st.sampled_from(sorted(chain._FACT_KEYS)) | keys
leaves = st.none() | strings | numbers | st.booleans()
sources = st.dictionaries(st.just("receiptId") | keys, leaves, max_size=2)
facts = st.dictionaries(fact_keys, leaves | sources | json_values, max_size=12)
redacted_forms = st.dictionaries(event_keys, leaves | sources | facts | json_values, max_size=12)


@settings(max_examples=3000, deadline=None)
@given(redacted_forms)
def test_leaf_bytes_of_any_redacted_form_are_the_reference_bytes(red: dict[str, Any]) -> None:
    """The shape check that skips the scan must never let an odd form through."""
    assert chain.leaf_bytes(red) == _reference(red, sort=True).encode("utf-8")


def test_leaf_bytes_skip_the_scan_for_the_ledgers_own_events() -> None:
    event = {
        "eventId": "0e3f1c2a-9b1e-4e7a-8c8e-1e5e0e9e2e1e",
        "kind": "assert",
        "txTime": "2026-01-01T00:00:00.000Z",
        "fact": {
            "factId": "5e1e0e2e-3e4e-4e5e-8e6e-7e8e9e0e1e2e",
            "subject": "acct:42",
            "source": {"receiptId": None},
            "confidence": 0.9,
            "valueCommitment": "3e5e" * 16,
        },
        "supersedes": None,
    }
    assert chain._ledger_shaped(event)
    assert not chain._ledger_shaped({**event, "fact": {**event["fact"], "confidence": 1.0}})
    assert not chain._ledger_shaped({**event, "actor": {"1": 1}})


_EVENT_KEYS = frozenset({"chain", "eventId", "kind", "txTime", "fact"})


@settings(max_examples=500, deadline=None)
@given(
    st.none() | numbers,
    # Extra keys never shadow the event's wire keys: the ledger refuses those (``extra_arg``).
    st.dictionaries(keys.filter(lambda k: k not in _EVENT_KEYS), json_values, max_size=2),
    st.none() | st.dictionaries(keys, strings, max_size=2),
)
def test_sealed_leaves_are_the_reference_leaves(
    confidence: Any, extra: dict[str, Any], external: dict[str, str] | None
) -> None:
    """``seal`` skips the shape check for what the ledger builds; an event with a confidence,
    extra keys or external ids it cannot vouch for must still get the reference leaf."""
    fact = Fact("f1", "acct:1", "plan", {"n": 1.0}, "org", "a", confidence=confidence)
    fact = Fact(**{**{s: getattr(fact, s) for s in fact.__slots__}, "external": external or None})
    [sealed] = chain.seal(
        chain.ChainHead(0, chain.ZERO_HEAD, False), [AssertEvent("e1", "t", fact)]
    )
    [again] = chain.seal(
        chain.ChainHead(0, chain.ZERO_HEAD, False),
        [AssertEvent("e1", "t", fact, extra=extra)],
    )
    for event in (sealed, again):
        red = chain.redacted(event.to_dict())
        expected = hashlib.sha256(b"\x00" + _reference(red, sort=True).encode()).hexdigest()
        assert event.extra["chain"]["leaf"] == expected


@settings(max_examples=3000, deadline=None)
@given(json_values)
def test_what_exact_vouches_for_is_the_reference_without_a_scan(value: Any) -> None:
    """``exact`` lets the encoders skip ``odd``'s scan, so wherever it says yes the raw orjson
    output must already be the reference bytes (or orjson refuses, and the caller falls back)."""
    for sort, option in ((True, fastjson._SORT), (False, fastjson._PASS)):
        if not fastjson.exact(value, sort=sort):
            continue
        try:
            raw = fastjson._dumps(value, fastjson._refuse, option)  # type: ignore[misc]
        except fastjson._Refused:
            continue
        assert raw == _reference(value, sort=sort).encode("utf-8"), (value, sort, raw)


@pytest.mark.parametrize(
    "value",
    [1.0, -0.0, 1e16, 1e-7, 2**53, math.nan, {"7": 1}, {"0": {}}, [{"1x": 2}], {1: 2}, (1, 2)],
)
def test_exact_declines_what_javascript_writes_otherwise(value: Any) -> None:
    assert not fastjson.exact(value, sort=False)
    assert not fastjson.exact({"k": [value]}, sort=True)


def test_exact_vouches_for_the_ledgers_own_events() -> None:
    """The ledger's lines take the scan-free path (else ingest pays the scan per event)."""
    fact = Fact("f", "acct:1", "plan", {"v": 1, "note": "x", "r": 0.5}, "org", "a")
    event = AssertEvent("e", "2026-01-01T00:00:00.000Z", fact, None, {"chain": {"seq": 3}})
    assert fastjson.exact(event.to_dict(), sort=False)
    assert fastjson.exact(event.to_dict(), sort=True)
    assert event.to_json() == _reference(event.to_dict(), sort=False)


extras = st.dictionaries(
    keys | st.sampled_from(["eventId", "fact", "chain", "value"]), json_values, max_size=3
)


@settings(max_examples=1500, deadline=None)
@given(
    st.sampled_from(["assert", "retract", "confirm", "forget", "hold"]),
    st.lists(st.none() | strings, min_size=8, max_size=8),
    st.none() | st.tuples(st.integers(0, 7), json_values),
    json_values,
    st.none() | numbers,
    st.none() | st.dictionaries(keys, json_values, max_size=2),
    st.none() | st.lists(st.none() | strings | json_values, min_size=3, max_size=3),
    extras,
    extras,
)
def test_an_event_line_is_the_reference_line_whatever_its_fields_hold(
    kind: str,
    texts: list[Any],
    odd: tuple[int, Any] | None,
    value: Any,
    confidence: Any,
    external: Any,
    forgotten: list[Any] | None,
    extra: dict[str, Any],
    fact_extra: dict[str, Any],
) -> None:
    """``Event.to_json`` skips the output scan when an event's fields show orjson writes what
    JavaScript writes (``plain_json``); with any value in any field (floats, big integers,
    digit keys, lone surrogates, unknown keys over known ones) the line must be the reference.
    Text fields hold text, or one of them (``odd``) any JSON value (a hand-built event)."""
    if odd is not None:
        texts[odd[0]] = odd[1]
    a, b, c, d, e, f, g, h = texts
    event: Any
    if kind == "assert":
        gone = None if forgotten is None else Forgotten(*forgotten)
        fact = Fact(
            *(a, b, c, value, d, e, Source(f), g, external or None, h),
            *(a, confidence, gone, fact_extra),
        )
        event = AssertEvent(b, c, fact, d, extra)
    elif kind == "confirm":
        event = ConfirmEvent(a, b, c, d, Source(e), extra)
    elif kind == "forget":
        event = ForgetEvent(a, b, c, d, e, Source(f), g, h, extra)
    else:
        event = (RetractEvent if kind == "retract" else HoldEvent)(a, b, c, d, e, Source(f), extra)
    assert event.to_json() == _reference(event.to_dict(), sort=False)


def test_ordinary_events_are_shown_plain_by_their_fields() -> None:
    """The ledger's own events take the unchecked path; an odd field sends them to the check."""
    fact = Fact("f", "acct:1", "plan", {"v": 1, "note": "x"}, "org", "a", valid_from="t")
    event = AssertEvent("e", "t", fact, None, {"chain": {"seq": 3, "head": "ab"}})
    assert event.plain_json()
    assert RetractEvent("e", "t", "f", "a", "wrong", Source("r")).plain_json()
    assert ForgetEvent("e", "t", "f", "a", "gdpr", Source(), "d" * 64, "sha256").plain_json()
    assert not AssertEvent("e", "t", Fact("f", "s", "p", 1.0, "o", "a")).plain_json()
    assert not AssertEvent("e", "t", Fact("f", 1.0, "p", 1, "o", "a")).plain_json()  # type: ignore[arg-type]
    assert not AssertEvent("e", "t", fact, None, {"7": 1}).plain_json()
    assert not ConfirmEvent("e", "t", "f", "a", Source(2**60)).plain_json()  # type: ignore[arg-type]
