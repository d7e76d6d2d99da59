"""The fast sealing of ledger-built asserts (``ledger.plainseal``) gives the reference bytes:
the line the backend stores, the leaf and the commitment, with and without the chain."""

from __future__ import annotations

import base64
from itertools import count
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_custody_state.canonical import js_json
from agent_custody_state.ledger.arguments import build_assert
from agent_custody_state.ledger.chain import ZERO_HEAD, ChainHead, leaf_of, seal, value_commitment
from agent_custody_state.ledger.envelope import with_value
from agent_custody_state.ledger.plainseal import with_lines
from agent_custody_state.ledger.requests import AssertRequest

# Values on both sides of the lines ``fastjson`` draws: floats orjson writes unlike JavaScript,
# integers near 2**53, index-like and astral keys, lone surrogates (which orjson refuses).
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53 - 1), 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
texts = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=8
)  # keys: no lone surrogate, no NUL (SPEC 1.1, ledger/arguments.py)


def _built(value: Any, subject: str, confidence: float | None) -> Any:
    ids = (f"id-{n}" for n in count())
    request = AssertRequest(
        subject=subject, predicate="p", value=value, space="org", actor="a", confidence=confidence
    )
    return build_assert(lambda: "2026-01-01T00:00:00.000Z", request, ids)


@settings(max_examples=300, deadline=None)
@given(json_values, texts, st.none() | st.floats(0, 1))
def test_a_sealed_assert_has_the_reference_line_leaf_and_commitment(
    value: Any, subject: str, confidence: float | None
) -> None:
    [event] = seal(ChainHead(0, ZERO_HEAD, chained=False), [_built(value, subject, confidence)])
    data = event.to_dict()
    if event.line is not None:  # set only where orjson provably writes the reference bytes
        assert event.line == js_json(data)
    assert bytes.fromhex(data["chain"]["leaf"]) == leaf_of(data)
    salt = base64.b64decode(event.fact.extra["valueSalt"])
    assert event.fact.extra["valueCommitment"] == value_commitment(salt, value)


@settings(max_examples=200, deadline=None)
@given(json_values, texts)
def test_an_unchained_assert_has_the_reference_line(value: Any, subject: str) -> None:
    [event] = with_lines([_built(value, subject, None)])
    if event.line is not None:
        assert event.line == js_json(event.to_dict())


def test_the_common_assert_takes_the_fast_path_and_a_new_value_drops_its_line() -> None:
    [event] = seal(ChainHead(0, ZERO_HEAD), [_built({"plan": "pro", "seats": 3}, "s", 0.5)])
    assert event.line is not None
    changed = with_value(event, {"sealed": "box"})  # what crypto-shred does before the append
    assert changed.line is None
    assert '"sealed"' in changed.to_json() and '"pro"' not in changed.to_json()
