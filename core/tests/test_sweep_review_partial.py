"""A sweep stopped by a fact it may not forget (a crypto-shred value swept in plain mode): what
it forgot before must still leave the stores (and be compacted out of the ledger's files: the
SQLite plugin's ``test_sqlite_sweep_stop.py``)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agent_custody_state import AssertRequest, Ledger, LedgerError
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore

SECRET = "zebra-secret-4711"
LATER = "2100-01-01T00:00:00Z"


def test_a_stopped_custody_sweep_still_removes_what_it_forgot_from_the_stores(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.jsonl"
    store = InProcessStore("vectors")
    with Ledger(path) as ledger:
        custody = Custody(ledger, StoreSet([store], VerifyPolicy(attempts=1, delay=0)))
        request = AssertRequest(subject="a", predicate="p", value=SECRET, space="org", actor="x")
        first = anyio.run(custody.write, request).event.fact.fact_id
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        ledger.assert_fact(subject="b", predicate="p", value=2, space="org", actor="x")
    with Ledger(path) as ledger:
        custody = Custody(ledger, StoreSet([store], VerifyPolicy(attempts=1, delay=0)))
        with pytest.raises(LedgerError):
            anyio.run(lambda: custody.sweep(before=LATER, actor="x", reason="r"))
        assert ledger.get(first).forgotten is not None  # type: ignore[union-attr]
        values = [r["value"] for r in store.vendor.rows.values()]
        assert SECRET not in values, "erased in the ledger, left in the store"
