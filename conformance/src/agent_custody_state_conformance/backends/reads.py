"""Event-backend rules for bitemporal reads (SPEC 2.2): ``as_of`` and what it must see.

Valid and transaction time, filters and append order, supersession chains with retractions in
them, provenance levels with confirms, and forgotten facts in past reads.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from agent_custody_state import Ledger, LedgerError

from ..clock import StepClock
from ..rules import rule
from .base import BackendRules, fact_ids

__all__ = ["ReadRules"]


def _millisecond_before(wire: str) -> str:
    """The wire time (``...T..:..:..sssZ``) one millisecond before ``wire``."""
    instant = datetime.fromisoformat(wire.replace("Z", "+00:00")) - timedelta(milliseconds=1)
    return instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{instant.microsecond // 1000:03d}Z"


class ReadRules(BackendRules):
    """The ``as_of`` rules (SPEC 2.2)."""

    __suite_root__ = True

    # -- 2.2 as_of -------------------------------------------------------------------------------

    @rule("EB-2.2-bitemporal")
    def test_as_of_bitemporal(self, ledger: Ledger, clock: StepClock) -> None:
        """valid_at selects what was true then; tx_at what the ledger knew then.

        Troubleshooting: ``find_asserts(tx_at=...)`` must filter ``txTime <= tx_at``, and
        ``events_for`` must return events of every kind so the ledger can filter them by time.
        """
        a = self._assert(ledger, valid_from="2026-01-01T00:00:00Z")
        t1 = ledger.now()
        clock.advance(days=1)
        b = self._assert(
            ledger, value="enterprise", supersedes=a.fact_id, valid_from="2026-07-01T00:00:00Z"
        )
        now = [f.value for f in ledger.as_of()]
        assert now == ["enterprise"]
        assert [f.value for f in ledger.as_of(valid_at="2026-03-01T00:00:00Z")] == ["pro"]
        old = ledger.as_of(valid_at="2026-03-01T00:00:00Z")[0]
        assert old.valid_to == "2026-07-01T00:00:00.000Z"
        known_then = ledger.as_of(tx_at=t1, valid_at="2026-08-01T00:00:00Z")
        assert [f.value for f in known_then] == ["pro"]
        assert known_then[0].valid_to is None
        assert ledger.as_of(valid_at="2025-12-31T23:59:59Z") == []
        assert b.fact.valid_from == "2026-07-01T00:00:00.000Z"

    @rule("EB-2.2-tx-edge")
    def test_as_of_at_an_exact_tx_time(self, ledger: Ledger) -> None:
        """A read whose tx_at is exactly an event's transaction time sees that event: the assert
        made then, the superseder made then, the retraction made then; a read one millisecond
        earlier sees none of them.

        Troubleshooting: ``find_asserts(tx_at=...)`` keeps ``txTime <= tx_at`` (inclusive) and
        only ``tx_before`` is strict; compare the normalised strings, or instants, never a
        truncated prefix.
        """
        a = self._assert(ledger, value="pro")
        b = self._assert(ledger, value="enterprise", supersedes=a.fact_id)
        retract = ledger.retract(fact_id=b.fact_id, actor="x", reason="wrong")

        def values(tx_at: str) -> list[object]:
            return [f.value for f in ledger.as_of(tx_at=tx_at)]

        edges = {"the assert": (a.tx_time, ["pro"]), "the superseder": (b.tx_time, ["enterprise"])}
        edges["the retraction"] = (retract.tx_time, ["pro"])
        for what, (tx_time, expected) in edges.items():
            assert values(tx_time) == expected, (
                f"EB-2.2-tx-edge: as_of(tx_at={tx_time!r}), the txTime of {what}, answered "
                f"{values(tx_time)!r}, not {expected!r}: tx_at must be inclusive"
            )
        earlier = _millisecond_before(a.tx_time)
        assert values(earlier) == [], f"EB-2.2-tx-edge: as_of(tx_at={earlier!r}) sees a later fact"
        assert values(_millisecond_before(retract.tx_time)) == ["enterprise"]

    @rule("EB-2.2-filters")
    def test_as_of_filters_and_order(self, ledger: Ledger) -> None:
        """space, subject and predicate filter; results come in append order.

        Troubleshooting: order by the append sequence, never by time or id.
        """
        ids = []
        for i, (space, subject, predicate) in enumerate(
            [("org", "a", "p"), ("team:x", "a", "p"), ("org", "b", "p"), ("org", "a", "q")]
        ):
            ids.append(
                self._assert(
                    ledger, space=space, subject=subject, predicate=predicate, value=i
                ).fact_id
            )
        assert fact_ids(ledger.as_of()) == ids
        assert fact_ids(ledger.as_of(space="org")) == [ids[0], ids[2], ids[3]]
        assert fact_ids(ledger.as_of(subject="a")) == [ids[0], ids[1], ids[3]]
        assert fact_ids(ledger.as_of(subject="a", predicate="p", space="team:x")) == [ids[1]]
        assert ledger.as_of(space="nowhere") == []

    @rule("EB-2.2-many-chains")
    def test_many_chains_at_once(self, ledger: Ledger) -> None:
        """One read over many supersession chains ends each chain at its own head.

        Troubleshooting: ``superseders(ids)`` must answer for every id in the collection at once
        (an ``IN`` query), not just the first.
        """
        heads = []
        for subject in ("a", "b", "c"):
            first = self._assert(ledger, subject=subject, value=1)
            second = self._assert(ledger, subject=subject, value=2, supersedes=first.fact_id)
            heads.append(second.fact_id)
        assert fact_ids(ledger.as_of()) == heads

    @rule("EB-2.2-retract-past")
    def test_retraction_keeps_past(self, ledger: Ledger) -> None:
        """A retraction is invisible to reads whose tx_at is before it.

        Troubleshooting: the retract event's txTime must be stored and filtered on.
        """
        a = self._assert(ledger)
        before = ledger.now()
        ledger.retract(fact_id=a.fact_id, actor="x", reason="wrong")
        assert ledger.as_of() == []
        assert fact_ids(ledger.as_of(tx_at=before)) == [a.fact_id]

    @rule("EB-2.2-chain-middle")
    def test_retract_middle_of_chain(self, ledger: Ledger) -> None:
        """Retracting B in A <- B <- C leaves exactly one current value, C; superseding A is then
        refused because C holds it.

        Troubleshooting: ``superseders`` must return asserts for every id asked, including ids of
        retracted facts (the ledger walks through them).
        """
        a = self._assert(ledger, value="a")
        b = self._assert(ledger, value="b", supersedes=a.fact_id)
        c = self._assert(ledger, value="c", supersedes=b.fact_id)
        ledger.retract(fact_id=b.fact_id, actor="x", reason="poisoned")
        assert [f.value for f in ledger.as_of()] == ["c"]
        with pytest.raises(LedgerError, match=rf"^fact {a.fact_id} is already superseded$"):
            self._assert(ledger, value="d", supersedes=a.fact_id)
        assert c.fact_id in fact_ids(ledger.as_of())

    @rule("EB-2.2-chain-head")
    def test_retract_head_restores(self, ledger: Ledger) -> None:
        """Retracting the head of a chain makes the previous link current again, with validTo
        open; the restored fact can be superseded again.

        Troubleshooting: as EB-2.2-chain-middle.
        """
        a = self._assert(ledger, value="a")
        b = self._assert(ledger, value="b", supersedes=a.fact_id)
        ledger.retract(fact_id=b.fact_id, actor="x", reason="undo")
        current = ledger.as_of()
        assert [f.value for f in current] == ["a"] and current[0].valid_to is None
        self._assert(ledger, value="c", supersedes=a.fact_id)
        assert [f.value for f in ledger.as_of()] == ["c"]

    @rule("EB-2.2-include")
    def test_include_and_confirm(self, ledger: Ledger) -> None:
        """include=all/attested/verified filters by provenance rank; a confirmed fact shows as
        attested in as_of, get and facts, but not to reads before the confirm.

        Troubleshooting: confirm events must be returned by ``events_for``.
        """
        c = self._assert(ledger, subject="c", provenance="claimed")
        at = self._assert(ledger, subject="a", provenance="attested")
        v = self._assert(ledger, subject="v", provenance="verified")
        assert fact_ids(ledger.as_of()) == [c.fact_id, at.fact_id, v.fact_id]
        assert fact_ids(ledger.as_of(include="attested")) == [at.fact_id, v.fact_id]
        assert fact_ids(ledger.as_of(include="verified")) == [v.fact_id]
        before = ledger.now()
        ledger.confirm(fact_id=c.fact_id, actor="gw")
        assert fact_ids(ledger.as_of(include="attested")) == [c.fact_id, at.fact_id, v.fact_id]
        assert fact_ids(ledger.as_of(include="attested", tx_at=before)) == [at.fact_id, v.fact_id]
        fact = ledger.get(c.fact_id)
        assert fact is not None and fact.provenance == "attested"
        assert next(f.provenance for f in ledger.facts()) == "attested"

    @rule("EB-2.2-forgotten-past")
    def test_forgotten_in_past_reads(self, ledger: Ledger) -> None:
        """A forgotten fact leaves the present and appears in historical reads with value null.

        Troubleshooting: the forget must rewrite the stored assert itself, not only append.
        """
        a = self._assert(ledger, value={"ssn": "123-45-6789"})
        before = ledger.now()
        ledger.forget(fact_id=a.fact_id, actor="x", reason="gdpr")
        assert ledger.as_of() == []
        past = ledger.as_of(tx_at=before)
        assert len(past) == 1 and past[0].value is None and past[0].forgotten is not None

    # -- 2.9 key values (completions) ------------------------------------------------------------

    @rule("EB-2.9-keys")
    def test_key_values(self, ledger: Ledger) -> None:
        """``key_values`` lists the distinct subjects, predicates, spaces and fact ids starting
        with a prefix, sorted by code point, at most ``limit``; a forgotten fact's keys are gone
        unless another fact still carries them; retracted and superseded facts keep theirs.

        Troubleshooting: exclude asserts whose fact has a forget event; match the prefix
        exactly (case-sensitive, not a LIKE pattern: ``%`` and ``_`` are plain characters).
        """
        a = self._assert(ledger, subject="acct:1", predicate="plan", space="team:a")
        self._assert(ledger, subject="acct:10", predicate="plan_b", space="team:b")
        b = self._assert(ledger, subject="acct:2", predicate="tier", space="org")
        gone = self._assert(ledger, subject="acct:%_x", predicate="secret", space="user:eve")
        ledger.retract(fact_id=b.fact_id, actor="l", reason="r")
        ledger.forget(fact_id=gone.fact_id, actor="l", reason="r")
        assert ledger.key_values("subject", "acct:") == ["acct:1", "acct:10", "acct:2"]
        assert ledger.key_values("subject", "acct:1") == ["acct:1", "acct:10"]
        assert ledger.key_values("subject", "acct:1", limit=1) == ["acct:1"]
        assert ledger.key_values("subject", "acct:%") == []
        assert ledger.key_values("subject", "ACCT") == []
        assert ledger.key_values("predicate", "") == ["plan", "plan_b", "tier"]
        assert ledger.key_values("space", "team:") == ["team:a", "team:b"]
        assert ledger.key_values("space", "") == ["org", "team:a", "team:b"]
        assert ledger.key_values("factId", a.fact_id[:-1]) == [a.fact_id]
        assert ledger.key_values("factId", gone.fact_id) == []
        again = self._assert(ledger, subject="acct:2", predicate="secret", space="user:eve")
        assert ledger.key_values("predicate", "s") == ["secret"]
        assert again.fact_id in ledger.key_values("factId", "", limit=10)
