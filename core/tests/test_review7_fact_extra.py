"""``AssertRequest.fact_extra`` (keys kept on the fact beside the wire keys, such as the stores'
``externalWhere``) is held to the rules of a value: JSON kept exactly, or a clear refusal that
writes nothing. Before, NaN was written as null, a large integer rounded, and a set, a
non-text key or deep nesting failed inside the encoder (TypeError, RecursionError)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import AssertRequest, Ledger, LedgerError

DEEP: Any = []
for _ in range(3000):
    DEEP = [DEEP]


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"note": float("nan")}, "fact_extra.note: NaN"),
        ({"note": 2**60}, "fact_extra.note"),
        ({"note": {1, 2}}, "fact_extra.note must be JSON: fact_extra.note is a set"),
        ({"note": {1: "x"}}, "fact_extra.note must be JSON: fact_extra.note has a int key"),
        ({"note": DEEP}, "fact_extra.note is nested too deeply"),
        ({3: "x"}, "fact_extra keys must be text: 3"),
        (["note"], "fact_extra must be a mapping"),
        ({"valueSalt": "x"}, "fact's own keys"),
    ],
)
def test_fact_extra_that_json_cannot_keep_is_refused_and_nothing_written(
    tmp_path: Path, extra: Any, says: str
) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
        before = path.read_bytes()
        request = AssertRequest(
            subject="t", predicate="p", value=2, space="org", actor="a", fact_extra=extra
        )
        with pytest.raises(LedgerError) as caught:
            ledger.assert_many([request])
        assert says in str(caught.value)
        assert caught.value.field.startswith("fact_extra")
        assert path.read_bytes() == before


def test_fact_extra_that_json_keeps_is_kept_across_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    extra = {"note": {"n": 2**53 - 1, "list": [1.5, "x", None, True]}}
    request = AssertRequest(
        subject="t", predicate="p", value=2, space="org", actor="a", fact_extra=extra
    )
    with Ledger(path) as ledger:
        (event,) = ledger.assert_many([request])
    with Ledger(path) as reopened:
        (fact,) = reopened.facts()
    assert fact.extra["note"] == extra["note"] == event.fact.extra["note"]
