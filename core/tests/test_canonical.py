"""Canonical JSON and forget digests agree byte for byte with JavaScript.

The vectors in ``data/js_canonical_vectors.json`` were produced by Node.js (``data/js_canonical.js``,
regenerated with ``data/make_js_vectors.py``); when ``node`` is on PATH the same script is also run
live on freshly generated values, some of them with array-index keys (``"9"``, ``"10"``), which
JavaScript lists before all other keys.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_custody_state.canonical import (
    array_index,
    canonical_json,
    js_json,
    js_number,
    value_digest,
)

DATA = Path(__file__).parent / "data"
VECTORS = json.loads((DATA / "js_canonical_vectors.json").read_text())["cases"]
NO_NODE = "node is not installed on this machine, so the live comparison with JavaScript cannot run"


@pytest.mark.parametrize("case", VECTORS, ids=[str(i) for i in range(len(VECTORS))])
def test_js_vectors(case: dict) -> None:
    assert canonical_json(case["input"]) == case["canonical"]
    assert value_digest(case["input"], forget_key=None) == (case["sha256"], "sha256")
    assert value_digest(case["input"], forget_key="k3y") == (case["hmac"], "hmac-sha256")
    # What JSON.stringify writes for the value inside a JSONL line or a tool result.
    assert js_json(case["input"]) == case["stringify"]


def test_array_index_keys_come_first() -> None:
    """SPEC 2.5's example, and the same object in a plain JSON.stringify (insertion order kept)."""
    value = {"b": 1, "a": 4, "10": 2, "9": 3}
    assert canonical_json(value) == '{"9":3,"10":2,"a":4,"b":1}'
    assert js_json(value) == '{"9":3,"10":2,"b":1,"a":4}'
    assert [array_index(k) for k in ("0", "9", "10", "4294967294")] == [0, 9, 10, 2**32 - 2]
    not_indexes = ("4294967295", "01", "00", "-1", "1.5", "1e3", "+1", " 1", "\u0661", "")
    assert [array_index(k) for k in not_indexes] == [None] * len(not_indexes)


def test_digest_kinds() -> None:
    assert value_digest("x", forget_key="k", keep_digest=False) == (None, "none")
    want = hmac.new(b"k", b'"x"', hashlib.sha256).hexdigest()
    assert value_digest("x", forget_key="k") == (want, "hmac-sha256")


def test_number_forms() -> None:
    assert [js_number(x) for x in (1.0, 1e21, 1e-7, -0.0, 2.5e-6, float("inf"))] == [
        "1",
        "1e+21",
        "1e-7",
        "0",
        "0.0000025",
        "null",
    ]


def test_js_json_keeps_insertion_order_and_js_forms() -> None:
    assert js_json({"b": 1.0, "a": "\ud800"}) == '{"b":1,"a":"\\ud800"}'
    assert js_json({"b": 1, "a": "é"}) == '{"b":1,"a":"é"}'


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(-(2**60), 2**60)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


def _node(values: list) -> list[dict]:
    payload = json.dumps(values, ensure_ascii=True)  # \\u escapes carry lone surrogates safely
    out = subprocess.run(
        ["node", str(DATA / "js_canonical.js")],
        input=payload,
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(out.stdout))


def _draw(strategy: st.SearchStrategy[Any], count: int) -> list[Any]:
    """``count`` values from Hypothesis, to send to Node in one run.

    One ``@given`` example holding a list of 200 values does not work: Hypothesis's first
    example is the minimal one (200 nulls), and a random list that large exceeds its entropy
    budget. Collecting single examples gives varied values and costs one Node start.
    """
    drawn: list[Any] = []

    @settings(max_examples=count, deadline=None, database=None)
    @given(strategy)
    def collect(value: Any) -> None:
        drawn.append(value)

    collect()
    return drawn


def _compare_with_node(strategy: st.SearchStrategy[Any], *, stringify: bool) -> None:
    values = _draw(strategy, 200)
    for value, expected in zip(values, _node(values), strict=True):
        assert canonical_json(value).encode() == expected["canonical"].encode(), value
        if stringify:
            assert js_json(value).encode() == expected["stringify"].encode(), value


@pytest.mark.skipif(shutil.which("node") is None, reason=NO_NODE)
def test_live_against_node() -> None:
    """200 random values per run, canonicalised by Node.js and by us."""
    _compare_with_node(json_values, stringify=False)


# Keys around the array-index boundary: indexes, near misses, and ordinary keys to mix with.
index_keys = (
    st.integers(0, 120).map(str)
    | st.integers(2**32 - 3, 2**32 + 1).map(str)
    | st.sampled_from(["01", "00", "-1", "1.5", "1e3", "+1", " 1", "\u0661", "", "a", "B", "é"])
    | st.text(max_size=3)
)
index_key_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(index_keys, inner, max_size=6),
    max_leaves=16,
)


@pytest.mark.skipif(shutil.which("node") is None, reason=NO_NODE)
def test_live_index_keys_against_node() -> None:
    """200 random values with integer-like keys: canonical and JSON.stringify bytes match Node."""
    _compare_with_node(index_key_values, stringify=True)
