"""The public Python API of SPEC section 7: names, keyword-only calls, context manager."""

from __future__ import annotations

import pytest

import agent_custody_state as acs
from agent_custody_state import Ledger, LedgerError


def test_public_names() -> None:
    for name in (
        "Ledger",
        "open_store",
        "create_memory_server",
        "serve_memory_http",
        "LedgerError",
        "hookimpl",
        "Fact",
        "AssertEvent",
        "SweepResult",
    ):
        assert hasattr(acs, name), name
    assert issubclass(LedgerError, ValueError)


def test_transaction_time_cannot_be_backdated() -> None:
    with Ledger("memory:") as ledger, pytest.raises(TypeError):
        ledger.assert_fact(
            subject="s",
            predicate="p",
            value=1,
            space="o",
            actor="a",
            tx_time="2000-01-01T00:00:00.000Z",
        )


def test_open_store_kinds(tmp_path: object) -> None:
    store = acs.open_store("memory:")
    assert store.kind == "memory" and store.location == "memory:"


def test_to_dict_wire_names() -> None:
    with Ledger("memory:") as ledger:
        event = ledger.assert_fact(
            subject="s",
            predicate="p",
            value={"k": [1]},
            space="o",
            actor="a",
            receipt_id="r-1",
            confidence=0.5,
        )
        fact = event.fact
        assert fact.fact_id == event.to_dict()["fact"]["factId"]
        assert fact.to_dict()["source"] == {"receiptId": "r-1"}
        assert event.tx_time.endswith("Z") and len(event.tx_time) == 24


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({1: "a"}, "value must be JSON: value has a int key"),
        ({"a": [1, {2, 3}]}, r"value must be JSON: value.a\[1\] is a set"),
        (object(), "value must be JSON: value is a object"),
        ("deep-list", "nested too deeply"),
        ("deep-dict", "nested too deeply"),
    ],
)
def test_value_that_is_not_json_is_refused_cleanly(
    tmp_path: object, value: object, message: str
) -> None:
    """Not JSON, or nested thousands deep: a LedgerError naming the value, not a TypeError or a
    RecursionError from the encoder (the server reported those as internal errors)."""
    if value in ("deep-list", "deep-dict"):
        nested: object = "x"
        for _ in range(5000):
            nested = [nested] if value == "deep-list" else {"k": nested}
        value = nested
    with Ledger(f"{tmp_path}/l.jsonl") as ledger:
        with pytest.raises(LedgerError, match=message) as caught:
            ledger.assert_fact(subject="s", predicate="p", value=value, space="org", actor="a")
        assert caught.value.field == "value"
        assert ledger.count() == 0
        nested = "x"
        for _ in range(200):  # as deep as the transports carry: accepted
            nested = [nested]
        ledger.assert_fact(subject="s", predicate="p", value=nested, space="org", actor="a")
