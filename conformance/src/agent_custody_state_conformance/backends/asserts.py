"""Event-backend rules for asserting (SPEC 2.1) and for the times a caller passes (SPEC 1.3).

Supersession refusals, replacement rules, confidence bounds, ``validate_assert``, caller-chosen
fact ids and time normalisation: what a backend must answer for the ledger to decide them.
"""

from __future__ import annotations

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.ledger.model import Source

from ..rules import rule
from .base import BackendRules

__all__ = ["AssertRules"]


class AssertRules(BackendRules):
    """The assert rules (SPEC 2.1) and caller times (SPEC 1.3)."""

    __suite_root__ = True

    # -- 2.1 assert ------------------------------------------------------------------------------

    @rule("EB-2.1-defaults")
    def test_assert_defaults(self, ledger: Ledger) -> None:
        """An assert gets source {receiptId: null}, provenance claimed, confidence null and
        validFrom equal to its txTime; the wire dict has SPEC 1.1 key order (the chain's keys
        after it).

        Troubleshooting: the store must return the fact exactly as appended; check that the json
        you persist is ``event.to_json()`` and that you decode it with ``event_from_dict``.
        """
        event = self._assert(ledger)
        fact = ledger.get(event.fact_id)
        assert fact is not None
        assert fact.source == Source(None)
        assert fact.provenance == "claimed"
        assert fact.confidence is None
        assert fact.valid_from == event.tx_time
        assert list(fact.to_dict()) == [
            "factId",
            "subject",
            "predicate",
            "value",
            "space",
            "actor",
            "source",
            "provenance",
            "validFrom",
            "validTo",
            "confidence",
            # The chain's keys come after the SPEC keys (docs/proofs.md).
            "valueSalt",
            "valueCommitment",
        ]
        wire = ["eventId", "kind", "txTime", "fact", "supersedes"]
        assert list(event.to_dict()) == [*wire, "chain"]

    @rule("EB-2.1-1")
    def test_supersede_unknown(self, ledger: Ledger) -> None:
        """Superseding an unknown fact is refused with ``cannot supersede unknown fact <id>``.

        Troubleshooting: ``get_assert`` must return None for an id never asserted.
        """
        with pytest.raises(LedgerError, match=r"^cannot supersede unknown fact nope$"):
            self._assert(ledger, supersedes="nope")
        assert ledger.count() == 0

    @rule("EB-2.1-2")
    def test_supersede_twice(self, ledger: Ledger) -> None:
        """A fact with a live superseder cannot be superseded again.

        Troubleshooting: ``superseders([id])`` must return every assert whose supersedes is id.
        """
        a = self._assert(ledger)
        self._assert(ledger, value="enterprise", supersedes=a.fact_id)
        with pytest.raises(LedgerError, match=rf"^fact {a.fact_id} is already superseded$"):
            self._assert(ledger, value="free", supersedes=a.fact_id)

    @rule("EB-2.1-3")
    def test_supersede_retracted(self, ledger: Ledger) -> None:
        """A retracted or forgotten fact cannot be superseded: ``fact <id> is retracted``.

        Troubleshooting: ``events_for([id])`` must include retract and forget events.
        """
        a = self._assert(ledger)
        ledger.retract(fact_id=a.fact_id, actor="x", reason="wrong")
        with pytest.raises(LedgerError, match=rf"^fact {a.fact_id} is retracted$"):
            self._assert(ledger, value="enterprise", supersedes=a.fact_id)
        b = self._assert(ledger, subject="acct:7")
        ledger.forget(fact_id=b.fact_id, actor="x", reason="gdpr")
        with pytest.raises(LedgerError, match=rf"^fact {b.fact_id} is retracted$"):
            self._assert(ledger, subject="acct:7", supersedes=b.fact_id)

    @rule("EB-2.1-4")
    def test_replacement_start(self, ledger: Ledger) -> None:
        """A replacement may not start before the fact it supersedes; starting at the same
        instant is allowed.

        Troubleshooting: compare validFrom as instants (normalised strings), not raw text.
        """
        a = self._assert(ledger, valid_from="2026-06-01T00:00:00Z")
        with pytest.raises(
            LedgerError, match="^replacement cannot start before the fact it supersedes$"
        ):
            self._assert(ledger, supersedes=a.fact_id, valid_from="2026-05-31T23:59:59.999Z")
        b = self._assert(ledger, supersedes=a.fact_id, valid_from="2026-06-01T02:00:00+02:00")
        assert b.fact.valid_from == "2026-06-01T00:00:00.000Z"

    @rule("EB-2.1-5")
    def test_replacement_keeps_subject_predicate(self, ledger: Ledger) -> None:
        """A replacement must keep the subject and predicate of the fact it supersedes.

        Troubleshooting: the stored fact's subject/predicate must round-trip exactly.
        """
        a = self._assert(ledger)
        for change in ({"subject": "acct:43"}, {"predicate": "tier"}):
            with pytest.raises(LedgerError, match="^a replacement must keep the subject and"):
                self._assert(ledger, supersedes=a.fact_id, **change)
        assert ledger.count() == 1

    @rule("EB-2.1-confidence")
    def test_confidence_range(self, ledger: Ledger) -> None:
        """Confidence outside [0, 1] is refused by the ledger: ``confidence must be between 0
        and 1``; the bounds themselves are accepted.

        Troubleshooting: this rule is the ledger's; a backend fails it only by losing the number.
        """
        for bad in (-0.01, 1.5, float("nan")):
            with pytest.raises(LedgerError, match="^confidence must be between 0 and 1$"):
                self._assert(ledger, confidence=bad)
        for good in (0, 1, 0.25):
            e = self._assert(ledger, confidence=good)
            fact = ledger.get(e.fact_id)
            assert fact is not None and fact.confidence == good

    @rule("EB-2.1-validate")
    def test_validate_assert_writes_nothing(self, ledger: Ledger) -> None:
        """``validate_assert`` runs the same checks and writes nothing.

        Troubleshooting: validate must not open a write transaction that appends.
        """
        a = self._assert(ledger)
        ledger.validate_assert(
            subject="acct:42",
            predicate="plan",
            value="x",
            space="org",
            actor="a",
            supersedes=a.fact_id,
        )
        with pytest.raises(LedgerError, match="unknown fact"):
            ledger.validate_assert(
                subject="s", predicate="p", value=1, space="org", actor="a", supersedes="missing"
            )
        assert ledger.count() == 1

    @rule("EB-2.1-fact-id")
    def test_caller_fact_id(self, ledger: Ledger) -> None:
        """A caller may choose the fact id; choosing an existing one is refused.

        Troubleshooting: ``get_assert`` must find the fact by the id given.
        """
        e = self._assert(ledger, fact_id="f-1")
        assert e.fact_id == "f-1" and ledger.get("f-1") is not None
        with pytest.raises(LedgerError, match="^fact f-1 already exists$"):
            self._assert(ledger, fact_id="f-1")

    # -- 1.3 time --------------------------------------------------------------------------------

    @rule("EB-1.3-normalise")
    def test_times_normalised(self, ledger: Ledger) -> None:
        """Caller times are converted to UTC milliseconds with Z; offset-less or naive times are
        refused naming the parameter.

        Troubleshooting: store the normalised string the ledger hands you.
        """
        from datetime import datetime

        e = self._assert(ledger, valid_from="2026-09-01T02:00:00.123456+02:00")
        assert e.fact.valid_from == "2026-09-01T00:00:00.123Z"
        with pytest.raises(LedgerError, match="^valid_from: .*no UTC offset"):
            self._assert(ledger, valid_from="2026-09-01T00:00:00")
        with pytest.raises(LedgerError, match="^valid_from: .*naive"):
            self._assert(ledger, valid_from=datetime(2026, 9, 1))
        with pytest.raises(LedgerError, match="^valid_at: "):
            ledger.as_of(valid_at="yesterday")
        assert ledger.count() == 1
