"""Canonical JSON and forget digests agree byte for byte with JavaScript.

The vectors in ``data/js_canonical_vectors.json`` were produced by Node.js (``data/js_canonical.js``);
when ``node`` is on PATH the same script is also run live on freshly generated values.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from agent_custody_state.canonical import canonical_json, js_json, js_number, value_digest
from hypothesis import given, settings
from hypothesis import strategies as st

DATA = Path(__file__).parent / "data"
VECTORS = json.loads((DATA / "js_canonical_vectors.json").read_text())["cases"]


@pytest.mark.parametrize("case", VECTORS, ids=[str(i) for i in range(len(VECTORS))])
def test_js_vectors(case: dict) -> None:
    assert canonical_json(case["input"]) == case["canonical"]
    assert value_digest(case["input"], forget_key=None) == (case["sha256"], "sha256")
    assert value_digest(case["input"], forget_key="k3y") == (case["hmac"], "hmac-sha256")


def test_digest_kinds() -> None:
    assert value_digest("x", forget_key="k", keep_digest=False) == (None, "none")
    want = hmac.new(b"k", b'"x"', hashlib.sha256).hexdigest()
    assert value_digest("x", forget_key="k") == (want, "hmac-sha256")


def test_number_forms() -> None:
    assert [js_number(x) for x in (1.0, 1e21, 1e-7, -0.0, 2.5e-6, float("inf"))] == [
        "1", "1e+21", "1e-7", "0", "0.0000025", "null"]


def test_js_json_keeps_insertion_order_and_js_forms() -> None:
    assert js_json({"b": 1.0, "a": "\ud800"}) == '{"b":1,"a":"\\ud800"}'
    assert js_json({"b": 1, "a": "é"}) == '{"b":1,"a":"é"}'


json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(-(2**60), 2**60) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                  max_size=4),
    max_leaves=12,
)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed on this machine")
@settings(max_examples=1, deadline=None)
@given(values=st.lists(json_values, min_size=200, max_size=200))
def test_live_against_node(values: list) -> None:
    """200 random values per run, canonicalised by Node.js and by us."""
    payload = json.dumps(values, ensure_ascii=True)  # \\u escapes carry lone surrogates safely
    out = subprocess.run(["node", str(DATA / "js_canonical.js")], input=payload,
                         capture_output=True, text=True, check=True)
    for value, expected in zip(values, json.loads(out.stdout), strict=True):
        assert canonical_json(value) == expected["canonical"]
