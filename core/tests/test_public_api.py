"""The public Python API of SPEC section 7: names, keyword-only calls, context manager."""

from __future__ import annotations

import pytest

import agent_custody_state as acs
from agent_custody_state import Ledger, LedgerError


def test_public_names() -> None:
    for name in ("Ledger", "open_store", "create_memory_server", "serve_memory_http",
                 "LedgerError", "hookimpl", "Fact", "AssertEvent", "SweepResult"):
        assert hasattr(acs, name), name
    assert issubclass(LedgerError, ValueError)


def test_transaction_time_cannot_be_backdated() -> None:
    with Ledger("memory:") as ledger, pytest.raises(TypeError):
        ledger.assert_fact(subject="s", predicate="p", value=1, space="o", actor="a",
                           tx_time="2000-01-01T00:00:00.000Z")


def test_open_store_kinds(tmp_path: object) -> None:
    store = acs.open_store("memory:")
    assert store.kind == "memory" and store.location == "memory:"


def test_to_dict_wire_names() -> None:
    with Ledger("memory:") as ledger:
        event = ledger.assert_fact(subject="s", predicate="p", value={"k": [1]}, space="o",
                                   actor="a", receipt_id="r-1", confidence=0.5)
        fact = event.fact
        assert fact.fact_id == event.to_dict()["fact"]["factId"]
        assert fact.to_dict()["source"] == {"receiptId": "r-1"}
        assert event.tx_time.endswith("Z") and len(event.tx_time) == 24
