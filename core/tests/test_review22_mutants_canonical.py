"""Canonical JSON of an integer no JavaScript number can hold (twenty-second review).

JavaScript reads an integer past ``Number.MAX_VALUE`` (about 1.8e308) as ``Infinity``, which
``JSON.stringify`` writes as ``null``. Python reads the same JSON text as an exact ``int``, so
``js_number`` writes ``null`` for it (its ``float()`` overflows: "a JS double cannot hold it
either"), and a digest over such a value is the one JavaScript computes. No test reached that
branch: mutation testing of ``canonical.py`` dropped its ``return "null"`` unnoticed (the fast
encoders decline such integers, so only the exact encoder writes them, and the tests' integers
stop at 2**70)."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

import pytest

from agent_custody_state.canonical import canonical_json, js_json, js_number, value_digest

HUGE = 10**400  # JSON text an original's line may hold; a double overflows to Infinity


def test_an_integer_past_the_largest_double_is_written_as_null() -> None:
    assert js_number(HUGE) == "null"
    assert js_number(-HUGE) == "null"
    assert canonical_json({"b": HUGE, "a": [HUGE, 1]}) == '{"a":[null,1],"b":null}'
    assert js_json({"b": -HUGE, "a": 2}) == '{"b":null,"a":2}'


def test_its_forget_digest_is_the_digest_of_null_as_javascript_computes_it() -> None:
    assert value_digest([HUGE], forget_key=None) == (
        hashlib.sha256(b"[null]").hexdigest(),
        "sha256",
    )


@pytest.mark.parametrize("value", [{1: "x"}, {"a": [{None: 1}]}, {"b": 1, 2.5: 0}])
def test_a_key_that_is_not_text_is_refused_by_name_not_turned_into_one(value: Any) -> None:
    """``json.dumps`` would quietly write ``{"1": "x"}`` (``canonical._plain``: "the encoder
    refuses it"): a digest over a key the value never had. Both encoders refuse it with a
    ``TypeError`` naming the key's type; mutation testing dropped that check unnoticed (the
    sorted encoder then failed with an ``AttributeError`` from inside its sort key)."""
    for encode in (canonical_json, js_json):
        with pytest.raises(
            TypeError, match=r"^object keys must be strings, got (int|NoneType|float)$"
        ):
            encode(value)


def test_a_dict_subclass_with_array_index_keys_lists_them_first_as_javascript_does() -> None:
    """A ``dict`` subclass (an ``OrderedDict`` from a caller) takes ``_plain``'s isinstance path,
    not the exact-type one; there too an array-index key sends it to the exact encoder, which
    lists ``"9"`` before ``"10"`` (SPEC 2.5). Mutation testing turned that path's index check
    around unnoticed: ``json.dumps`` then wrote ``{"10":1,"9":2}``, a digest JavaScript never
    computes."""
    value = OrderedDict([("b", 0), ("10", 1), ("9", 2)])
    assert canonical_json(value) == '{"9":2,"10":1,"b":0}'
    assert canonical_json({"k": [value]}) == '{"k":[{"9":2,"10":1,"b":0}]}'
    assert js_json(value) == '{"9":2,"10":1,"b":0}'
    indexes_only = OrderedDict([("10", 1), ("9", 2)])
    assert canonical_json(indexes_only) == js_json(indexes_only) == '{"9":2,"10":1}'
