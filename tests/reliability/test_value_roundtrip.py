"""Values are kept exactly, or refused: there is no third outcome (issue 11, SPEC 2.1).

A property over generated values, including the ones JSON cannot keep (NaN, +-Infinity, integers
beyond +-(2^53 - 1)) and the floats at its edges: each is either refused with a ``LedgerError``
naming the place in the value, or reads back identical (same types, same float bits) after the
ledger is closed and reopened, on JSONL, SQLite and PostgreSQL. A refused value leaves the ledger
unchanged.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_custody_state import Ledger, LedgerError

from .support import STRESS, record

EXAMPLES = 400 if STRESS else 60

EDGE_FLOATS = [
    1e308,
    -1e308,
    5e-324,
    -5e-324,
    0.1,
    2.0**-1074,
    1.7976931348623157e308,
    float("nan"),
    float("inf"),
    float("-inf"),
    -0.0,
]
EDGE_INTS = [
    2**53 - 1,
    -(2**53 - 1),
    2**53,
    -(2**53),
    2**53 + 1,
    10**22,
    10**400,
    12345678901234567890123,
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=8),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.sampled_from(EDGE_INTS),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(EDGE_FLOATS),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


def _keepable(value: Any) -> bool:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return True
    if isinstance(value, int):
        return abs(value) <= 2**53 - 1
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_keepable(v) for v in value)
    return all(_keepable(v) for v in value.values())


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON: one number type (a double, as in JavaScript: ``1.0`` is written ``1`` and
    reads back as the int 1), compared bit for bit; ``-0`` is written ``0`` as JS does."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float):
        if not isinstance(b, int | float):
            return False
        if a == 0 and b == 0:
            return True
        return struct.pack("<d", float(a)) == struct.pack("<d", float(b))
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


@pytest.mark.parametrize("location", ["jsonl", "sqlite", "postgres"], indirect=True)
def test_value_is_kept_exactly_or_refused(location: str) -> None:
    outcomes = {"kept": 0, "refused": 0}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(value=values)
    def check(value: Any) -> None:
        with Ledger(location) as ledger:
            before = ledger.count()
            try:
                event = ledger.assert_fact(
                    subject="v", predicate="p", value=value, space="org", actor="fuzz"
                )
            except LedgerError as exc:
                assert not _keepable(value), f"a keepable value was refused: {exc}"
                assert str(exc).startswith("value"), exc
                assert ledger.count() == before
                outcomes["refused"] += 1
                return
            assert _keepable(value), f"kept a value JSON cannot keep: {value!r}"
        with Ledger(location) as reopened:
            back = reopened.get(event.fact_id)
            assert back is not None and _same(value, back.value), (value, back and back.value)
        outcomes["kept"] += 1

    check()
    kind = "postgres" if location.startswith("postgres") else Path(location).suffix[1:]
    record(f"value_roundtrip[{kind}]", examples=EXAMPLES, **outcomes)
    assert outcomes["kept"] and outcomes["refused"], outcomes
