"""A second review of the chain's batch loop (``plainseal.seal_events``, ``digests.batch_pads``):
generated batches sealed by ``chain.seal`` give, event by event, the bytes of the general path
(``chain._sealed_reference`` for every event) and of the exact encoder (``canonical._encode``,
no C encoder at all): each line, record, leaf, head, salt and commitment, with and without
orjson; the HMAC key blocks for every byte value; concurrent sealing; and ``verify`` on a
ledger the loop wrote, with a sample of edits it must find."""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import random
import threading
from contextlib import ExitStack
from itertools import count
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_custody_state import Ledger, fastjson
from agent_custody_state.canonical import _encode
from agent_custody_state.ledger import chain, plainseal
from agent_custody_state.ledger import model as m
from agent_custody_state.ledger.arguments import build_assert
from agent_custody_state.ledger.digests import batch_pads
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.ledger.verify import verify_lines

TX = "2026-01-01T00:00:00.000Z"
Spec = tuple[str, dict[str, Any]]  # what ``make`` builds an event from
_SALT = chain.SALT_BYTES


def pure(value: Any, *, sort: bool) -> bytes:
    """The exact encoder's bytes (``JSON.stringify``, keys sorted when ``sort``): no C encoder."""
    parts: list[str] = []
    _encode(value, parts, sort)
    return "".join(parts).encode("utf-8")


# -- generated events -------------------------------------------------------------------------

_EDGE_FLOATS = [1.0, -0.0, 0.1, 1e16, 1e-7, 1e21, 5e-324, 1e15, 1e-5, 9.99e-6, 123456789012345.6]
_EDGE_INTS = [0, -1, 2**53 - 1, -(2**53 - 1), 2**53, 2**64, 10**16]
safe_ints = st.integers(-(2**53 - 1), 2**53 - 1)
floats = st.floats(allow_nan=False, allow_infinity=False)
numbers = safe_ints | floats | st.sampled_from(_EDGE_FLOATS + _EDGE_INTS)
# Every kind of character that matters: controls, U+2028/9, BMP above the surrogates, astral,
# index-like keys, and (in values only) lone surrogates.
_CHARS = st.characters(exclude_categories=("Cs",)) | st.sampled_from(
    ["\u2028", "\u2029", "\x00", "\x1f", '"', "\\", "\ufffd", "\U0001f600", "\uff01", "7"]
)
clean_text = st.text(_CHARS, max_size=6)
_KEY_CHARS = st.characters(exclude_categories=("Cs",), exclude_characters="\x00") | _CHARS
key_text = st.text(_KEY_CHARS, min_size=1, max_size=6).filter(lambda t: "\x00" not in t)
any_text = clean_text | st.sampled_from(["\ud800", "a\udfffb", "\udc00\ud800"])
keys = any_text | st.sampled_from(["0", "7", "01", "4294967294", "4294967295", "\U0001f600"])


def deep(depth: int) -> Any:
    value: Any = "bottom"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


plain_keys = st.text("ab_é\u2028\uff01", max_size=4)  # no digit first, none astral
plain_values = st.recursive(
    st.none() | st.booleans() | safe_ints | clean_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(plain_keys, inner, max_size=3),
    max_leaves=8,
)
odd_values = st.recursive(
    st.none() | st.booleans() | numbers | any_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=8,
) | st.sampled_from([63, 64, 65, 66, 200, 255]).map(deep)
json_values = plain_values | odd_values | st.sampled_from(_EDGE_FLOATS + _EDGE_INTS)
times = st.sampled_from([None, TX, "2025-12-31T23:59:59.999Z", "2026-01-01T00:00:00Z"])
_CONFIDENCES = [0, 1, 0.5, 0.1, 0, 1, 0.5, 0.1, 1e-6, 1.0, 0.0, 5e-324]  # the odd ones rarer
confidences = st.none() | st.sampled_from(_CONFIDENCES) | st.floats(0, 1)
_RESTORED = {"restored": {"factId": "f", "external": {"m": "2"}, "externalWhere": {"m": "c"}}}
extras = st.sampled_from([{}, {"vendor": {"x": 1}}, _RESTORED, {"note": "\u2028", "n": 1.5}])


@st.composite
def built_assert(draw: st.DrawFn) -> Spec:
    """The arguments of an assert as ``assert_fact``/``assert_many`` take them: most without
    external ids or extra fact keys (the loop's own case), some with them."""
    keyed = ("subject", "predicate", "space")
    args = {k: draw(key_text) for k in keyed} | {"value": draw(json_values)}
    args |= {"actor": draw(clean_text), "receipt_id": draw(st.none() | clean_text)}
    args["provenance"] = draw(st.sampled_from(["claimed", "attested", "verified"]))
    args |= {"valid_from": draw(times), "confidence": draw(confidences)}
    args |= {k: draw(st.none() | key_text) for k in ("supersedes", "fact_id")}
    twist = draw(st.sampled_from(["none", "none", "none", "external", "where", "extra"]))
    if twist == "external":
        args["external"] = {"mem0": "m-1", "zep": "\u2028"}
    elif twist == "where":  # what the write-through stores add (``stores/where.py``)
        args["fact_extra"] = {"externalWhere": {"mem0": "collection-a"}}
    elif twist == "extra":
        args["fact_extra"] = draw(st.dictionaries(key_text, json_values, max_size=2))
    return "built", args


_TWISTS: dict[str, dict[str, Any]] = {
    "none": {},
    "source": {"source_extra": {"via": "gateway", "n": [1.5]}},
    "external": {"external": {"mem0": "m"}},
    "empty external": {"external": {}},
    "forgotten": {"forgotten": True},
    "salt already": {"fact_extra": {"valueSalt": "c2FsdA=="}},
    "fact extra": {"fact_extra": {"externalWhere": {"mem0": "c"}}},
    "event extra": {},  # drawn from ``extras``
}


@st.composite
def hand_assert(draw: st.DrawFn) -> Spec:
    """An assert built directly (text fields typed, anything else goes), with none or one of
    the things that make it take the general path (so most are plain asserts)."""
    args = {"subject": draw(clean_text | any_text), "value": draw(json_values)}
    args["confidence"] = draw(st.none() | st.sampled_from([0.5, 1]) | numbers)
    args |= {"external": None, "source_extra": {}, "forgotten": False, "fact_extra": {}}
    args |= {"extra": {}, "supersedes": draw(st.none() | any_text)}
    twist = draw(st.sampled_from(["none"] * 3 + sorted(_TWISTS)))
    if twist == "event extra":
        args["extra"] = draw(extras)
    else:
        args.update(_TWISTS[twist])
    return "hand", args


@st.composite
def other_event(draw: st.DrawFn) -> Spec:
    kind = draw(st.sampled_from(["retract", "hold", "release", "confirm", "forget"]))
    return kind, {"reason": draw(any_text), "extra": draw(extras), "receipt": draw(clean_text)}


specs = st.lists(built_assert() | hand_assert() | other_event(), min_size=1, max_size=6)


def make(spec: Spec, i: int) -> m.Event | None:
    """A fresh event of ``spec`` (sealing changes a plain assert in place); None for arguments
    the ledger refuses."""
    kind, a = spec
    a = copy.deepcopy(a)
    if kind == "built":
        try:
            return build_assert(lambda: TX, AssertRequest(**a), (f"id{i}-{n}" for n in count()))
        except LedgerError:
            return None
    if kind == "hand":
        forgotten = m.Forgotten("d" * 64, "sha256", TX) if a["forgotten"] else None
        value, source = None if forgotten else a["value"], m.Source(f"r{i}", a["source_extra"])
        fact = m.Fact(
            *(f"f{i}", a["subject"], "p", value, "org", "bot", source, "claimed", a["external"]),
            *(TX, None, a["confidence"], forgotten, a["fact_extra"]),
        )
        return m.AssertEvent(f"e{i}", TX, fact, a["supersedes"], a["extra"])
    source = m.Source(a["receipt"])
    if kind == "confirm":
        return m.ConfirmEvent(f"e{i}", TX, "f0", "bot", source, a["extra"])
    if kind == "forget":
        return m.ForgetEvent(
            f"e{i}", TX, "f0", "bot", a["reason"], source, None, "none", a["extra"]
        )
    cls = {"retract": m.RetractEvent, "hold": m.HoldEvent, "release": m.ReleaseEvent}[kind]
    return cls(f"e{i}", TX, "f0", "bot", a["reason"], source, a["extra"])


def fresh(batch: list[Spec]) -> list[m.Event]:
    return [e for i, s in enumerate(batch) if (e := make(s, i)) is not None]


# -- the comparison ---------------------------------------------------------------------------


def reference(head: chain.ChainHead, events: list[m.Event], salts: bytes) -> list[m.Event]:
    """The general path for every event, in order."""
    out: list[m.Event] = []
    previous = bytes.fromhex(head.hash)
    genesis = None if head.chained else {"size": head.seq, "head": head.hash}
    for i, event in enumerate(events):
        salt = salts[i * _SALT : (i + 1) * _SALT]
        sealed, previous = chain._sealed_reference(event, salt, previous, head.seq + i + 1, genesis)
        genesis = None
        out.append(sealed)
    return out


def sealed_by_the_loop(head: chain.ChainHead, events: list[m.Event], salts: bytes) -> list[m.Event]:
    with mock.patch.object(chain.os, "urandom", lambda n: salts[:n]):
        return chain.seal(head, events)


def check_batch(head: chain.ChainHead, batch: list[Spec], seed: int) -> int:
    """Seal ``batch`` both ways and check every byte; returns how many took the loop's path."""
    expected = reference(head, fresh(batch), salts := random.Random(seed).randbytes(_SALT * 6))
    got = sealed_by_the_loop(head, fresh(batch), salts)
    assert len(got) == len(expected)
    previous = bytes.fromhex(head.hash)
    for i, (g, want) in enumerate(zip(got, expected, strict=True)):
        line = g.to_json()  # the line the backend writes (``Event.line`` when the loop set it)
        assert line == want.to_json()
        data = g.to_dict()
        assert line.encode("utf-8", "surrogatepass") == pure(data, sort=False)
        record = data["chain"]
        assert json.dumps(record) == json.dumps(want.extra["chain"])
        leaf = hashlib.sha256(b"\x00" + pure(chain.redacted(data), sort=True)).digest()
        previous = hashlib.sha256(b"\x01" + previous + leaf).digest()
        expected_record: dict[str, Any] = {"seq": head.seq + i + 1}
        if i == 0 and not head.chained:
            expected_record["genesis"] = {"size": head.seq, "head": head.hash}
        expected_record |= {"leaf": leaf.hex(), "head": previous.hex()}
        assert json.dumps(record) == json.dumps(expected_record)
        if isinstance(g, m.AssertEvent):
            salt = salts[i * _SALT : (i + 1) * _SALT]
            assert data["fact"]["valueSalt"] == base64.b64encode(salt).decode("ascii")
            mac = hmac.new(salt, pure(g.fact.value, sort=True), hashlib.sha256).hexdigest()
            assert data["fact"]["valueCommitment"] == mac
    if got:
        assert got[-1].extra["chain"]["head"] == previous.hex()
    return sum(1 for g in got if g.line is not None)


heads = st.builds(
    chain.ChainHead,
    st.integers(0, 2**40) | st.sampled_from([0, 1, 2**53 - 10]),
    st.binary(min_size=32, max_size=32).map(bytes.hex) | st.just(chain.ZERO_HEAD),
    st.booleans(),
)


@pytest.mark.parametrize("orjson", [True, False])
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(heads, specs, st.integers(0, 2**32))
def test_the_loop_gives_the_reference_bytes_for_any_batch(
    orjson: bool, head: chain.ChainHead, batch: list[Spec], seed: int
) -> None:
    with ExitStack() as stack:
        if not orjson:  # as the core without its ``fast`` extra (``test_fastjson`` does so)
            stack.enter_context(mock.patch.object(fastjson, "_dumps", None))
            stack.enter_context(mock.patch.object(fastjson, "_loads", None))
        taken = check_batch(head, batch, seed)
        assert orjson or taken == 0  # without orjson no event has a line: the backend's


def _built(values: list[Any]) -> list[Spec]:
    return [("built", {**_ARGS, "subject": f"s{i}", "value": v}) for i, v in enumerate(values)]


_ARGS = {"subject": "s", "predicate": "p", "value": 1, "space": "org", "actor": "a"}


def test_the_ledgers_own_asserts_take_the_loop() -> None:
    """The premise of the differential test: common ledger-built asserts do take the loop (a
    loop never taken would compare the reference path with itself)."""
    batch = _built(["x", 7, {"plan": "pro", "seats": 3}, ["é", None, True], 0.5])
    assert check_batch(chain.ChainHead(9, "ab" * 32, False), batch, 1) == 5


def test_a_hand_built_source_with_extra_keys_keeps_them() -> None:
    """A source's unknown keys (SPEC 1.2, ``Source.extra``) are in the line and the leaf, as on
    the general path: the loop's own wire dict has ``receiptId`` only."""
    args = {"subject": "s", "value": {"a": 1}, "confidence": None, "external": None}
    args |= {"source_extra": {"via": "gateway"}, "forgotten": False, "fact_extra": {}}
    spec = ("hand", {**args, "extra": {}, "supersedes": None})
    check_batch(chain.ChainHead(0, chain.ZERO_HEAD, False), [spec], 2)
    [event] = sealed_by_the_loop(chain.ChainHead(0, chain.ZERO_HEAD), fresh([spec]), bytes(32))
    assert '"via":"gateway"' in event.to_json()


# -- the HMAC key blocks ----------------------------------------------------------------------


@pytest.mark.parametrize("size", range(1, 65))
def test_batch_pads_give_hmac_for_every_key_length_and_byte_value(size: int) -> None:
    """Every key length up to a block (the loop's is 32), keys of every byte value (each byte
    repeated, and all 256 in a row), random keys; a 65-byte key is refused."""
    rng = random.Random(size)
    keys = b"".join(bytes([b]) * size for b in range(256)) + bytes(range(256)) * size
    keys += rng.randbytes(size * 8)
    inner, outer, inner_fill, outer_fill = batch_pads(keys, size)
    for i in range(len(keys) // size):
        a, b = i * size, (i + 1) * size
        message = rng.randbytes(rng.choice([0, 1, 55, 64, 200]))
        inner_hash = hashlib.sha256(inner[a:b] + inner_fill + message).digest()
        got = hashlib.sha256(outer[a:b] + outer_fill + inner_hash).digest()
        assert got == hmac.new(keys[a:b], message, hashlib.sha256).digest()
    with pytest.raises(ValueError, match="longer than a block"):
        batch_pads(keys, 65)


# -- concurrency ------------------------------------------------------------------------------


def test_batches_sealed_in_threads_at_once_are_each_right() -> None:
    """The loop keeps no state between calls (no module global is written): batches sealed
    by eight threads at once each get the bytes they get alone."""
    heads_ = [
        chain.ChainHead(n, hashlib.sha256(bytes([n])).hexdigest(), n % 2 == 0) for n in range(8)
    ]
    batch = _built([{"i": i, "t": "é" * i} for i in range(40)])
    salts = [random.Random(n).randbytes(_SALT * 40) for n in range(8)]
    want = [
        [e.to_json() for e in reference(h, fresh(batch), s)]
        for h, s in zip(heads_, salts, strict=True)
    ]
    got: list[list[str] | None] = [None] * 8
    start = threading.Barrier(8)

    def run(n: int) -> None:
        head = heads_[n]
        genesis = None if head.chained else {"size": head.seq, "head": head.hash}
        start.wait()
        for _ in range(5):
            events, previous = fresh(batch), bytes.fromhex(head.hash)
            sealed = plainseal.seal_events(
                events, salts[n], previous, head.seq, genesis, chain._sealed_reference
            )
        got[n] = [e.to_json() for e in sealed]

    threads = [threading.Thread(target=run, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == want


# -- verify on a ledger the loop wrote ----------------------------------------------------------


def _ledger(path: Path) -> list[str]:
    facts: list[dict[str, Any]] = [
        {"subject": "acct:1", "predicate": "plan", "value": {"tier": "pro", "seats": 3}},
        {"subject": "acct:\u2028", "predicate": "note", "value": "line\u2028sep \U0001f600"},
        {"subject": "acct:2", "predicate": "n", "value": 1.0},  # orjson writes it unlike JS
        {"subject": "acct:3", "predicate": "n", "value": {"7": 1, "a": [0.1, 2**53 - 1]}},
        {"subject": "acct:4", "predicate": "s", "value": "\ud800", "confidence": 0.25},
        {"subject": "acct:5", "predicate": "d", "value": deep(100)},
    ]
    with Ledger(path) as ledger:
        ledger.assert_fact(space="org", actor="a", **facts[0])
        made = ledger.assert_many([{"space": "org", "actor": "a", **f} for f in facts[1:]])
        ledger.retract(fact_id=made[0].fact_id, actor="a", reason="wrong")
        ledger.confirm(fact_id=made[1].fact_id, actor="a")
        ledger.forget(fact_id=made[2].fact_id, actor="a", reason="erase")
        ledger.assert_many([{**_ARGS, "subject": f"b{i}", "value": i} for i in range(5)])
    text = path.read_bytes().decode("utf-8")
    assert text.endswith("\n")
    return text[:-1].split("\n")  # not ``splitlines``: a value holds U+2028


def _fact_edited(lines: list[str], index: int, key: str, value: Any) -> list[str]:
    data = json.loads(lines[index])
    data["fact"][key] = value
    line = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return [*lines[:index], line, *lines[index + 1 :]]


FACT_EDITS = [  # line, key, new value
    (0, "value", {"tier": "free", "seats": 3}),
    (1, "subject", "acct:x"),
    (2, "valueSalt", base64.b64encode(bytes(32)).decode()),
    (4, "confidence", 0.5),
    (5, "valueCommitment", "0" * 64),
    (13, "value", 5),
]


def test_verify_passes_the_loops_ledger_and_finds_each_edit(tmp_path: Path) -> None:
    lines = _ledger(tmp_path / "l.jsonl")
    assert len(lines) == 14
    report = verify_lines(lines)
    assert report.ok, report.problems
    assert sum('"valueSalt"' in line for line in lines) == 10  # the forgotten one lost its salt
    edits = [_fact_edited(lines, *edit) for edit in FACT_EDITS]
    edits += [lines[:3] + lines[4:], [lines[0], lines[2], lines[1], *lines[3:]]]
    for changed in edits:
        assert changed != lines
        assert not verify_lines(changed).ok, changed


def test_an_unchained_assert_with_source_extra_keys_keeps_them() -> None:
    """``with_lines`` (the append without the chain) encodes the same wire dict: a source's
    unknown keys stay in the line."""
    fact = m.Fact("f", "s", "p", 1, "org", "a", m.Source("r", {"via": "gateway"}), valid_from=TX)
    [event] = plainseal.with_lines([m.AssertEvent("e", TX, fact)])
    assert event.to_json() == pure(event.to_dict(), sort=False).decode("utf-8")
    assert '"via":"gateway"' in event.to_json()
