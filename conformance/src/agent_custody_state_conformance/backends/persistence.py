"""Event-backend rules for persistence and concurrency: what survives, is shared, is atomic.

Reopen keeps every event and its exact wire form, two instances of one location see each other's
writes, keys from a newer version are kept, and a failed transaction leaves nothing behind.
"""

from __future__ import annotations

import pytest

from agent_custody_state import Ledger, LedgerError

from ..clock import StepClock
from ..rules import rule
from .base import BackendRules, StoreFactory, fact_ids

__all__ = ["PersistenceRules"]


class PersistenceRules(BackendRules):
    """Persistence, sharing between instances, unknown keys and atomic transactions."""

    __suite_root__ = True

    # -- persistence and concurrency ---------------------------------------------------------

    @rule("EB-P-reopen")
    def test_reopen(self, store_factory: StoreFactory, clock: StepClock) -> None:
        """Everything survives close and reopen: events, their order and their exact wire dicts.

        Troubleshooting: the store must persist ``to_json()`` and decode it losslessly.
        """
        with Ledger(store_factory("reopen"), clock=clock) as ledger:
            a = self._assert(ledger, value={"nested": [1, 2.5, "ü"]}, confidence=0.5)
            self._assert(ledger, value=None, supersedes=a.fact_id)
            ledger.forget(fact_id=a.fact_id, actor="x", reason="r")
            before = [e.to_dict() for e in ledger.export()]
        with Ledger(store_factory("reopen"), clock=clock) as again:
            assert [e.to_dict() for e in again.export()] == before
            assert again.count() == 3

    @rule("EB-P-shared")
    def test_two_instances_share(self, store_factory: StoreFactory, clock: StepClock) -> None:
        """Two open instances of one location see each other's writes at once, and the
        supersession rule holds across them.

        Troubleshooting: reads must not answer from a stale cache; ``transaction()`` must lock
        across connections or processes.
        """
        with (
            Ledger(store_factory("shared"), clock=clock) as one,
            Ledger(store_factory("shared"), clock=clock) as two,
        ):
            a = self._assert(one)
            assert two.get(a.fact_id) is not None
            self._assert(two, value="x", supersedes=a.fact_id)
            with pytest.raises(LedgerError, match="already superseded"):
                self._assert(one, value="y", supersedes=a.fact_id)
            ledger_b_count = two.count()
            assert one.count() == ledger_b_count == 2
            one.forget(fact_id=a.fact_id, actor="x", reason="r")
            fact = two.get(a.fact_id)
            assert fact is not None and fact.value is None

    @rule("EB-P-extra-keys")
    def test_unknown_keys_kept(self, ledger: Ledger) -> None:
        """Keys written by a newer version are kept and written back unchanged.

        Troubleshooting: persist and return the whole event JSON, not only known columns.
        """
        from agent_custody_state.ledger.model import event_from_dict

        raw = {
            "eventId": "e-new",
            "kind": "assert",
            "txTime": "2026-09-01T00:00:00.000Z",
            "fact": {
                "factId": "f-new",
                "subject": "s",
                "predicate": "p",
                "value": 1,
                "space": "org",
                "actor": "a",
                "source": {"receiptId": None},
                "provenance": "claimed",
                "validFrom": "2026-09-01T00:00:00.000Z",
                "validTo": None,
                "confidence": None,
                "tags": ["x"],
            },
            "supersedes": None,
            "future": {"k": 1},
        }
        with ledger.backend.transaction():
            ledger.backend.append([event_from_dict(raw)])
        assert ledger.history("f-new")[0].to_dict() == raw

    @rule("EB-P-atomic")
    def test_failed_transaction_leaves_nothing(self, ledger: Ledger) -> None:
        """An exception inside a transaction leaves no appended event; a refused batch
        (assert_many) appends none of its items.

        Troubleshooting: roll back the database transaction / truncate the pending lines.
        """
        keep = self._assert(ledger)
        # validate_assert builds the event an assert would append, without appending it.
        event = ledger.validate_assert(subject="s", predicate="p", value=1, space="org", actor="a")
        with pytest.raises(RuntimeError), ledger.backend.transaction():
            ledger.backend.append([event])
            raise RuntimeError("boom")
        assert ledger.count() == 1
        with pytest.raises(LedgerError, match="^item 1: cannot supersede unknown fact nope$"):
            ledger.assert_many(
                [
                    {"subject": "s", "predicate": "p", "value": 1, "space": "org", "actor": "a"},
                    {
                        "subject": "s",
                        "predicate": "p",
                        "value": 2,
                        "space": "org",
                        "actor": "a",
                        "supersedes": "nope",
                    },
                ]
            )
        assert fact_ids(ledger.facts()) == [keep.fact_id]
        batch = ledger.assert_many(
            [
                {"subject": "s", "predicate": "p", "value": i, "space": "org", "actor": "a"}
                for i in range(50)
            ]
        )
        assert ledger.count() == 51 and len(batch) == 50
