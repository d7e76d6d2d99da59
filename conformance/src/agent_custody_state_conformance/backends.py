"""``EventBackendConformance``: the SPEC section 2 rules, persistence and reopen, for any backend.

Subclass it and provide ``store_factory``: a callable ``factory(name="ledger")`` that opens the
store for ``name`` (the same location every time it is called with the same name; a fresh, empty
location for a name not used before in the test)::

    class TestMyBackend(EventBackendConformance):
        @pytest.fixture
        def store_factory(self, tmp_path):
            return lambda name="ledger": MyStore(str(tmp_path / f"{name}.db"))

Every test has a rule id (``docs/conformance.md`` lists them) and a docstring whose second
paragraph says what to look at when it fails.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from agent_custody_state import Ledger, LedgerError
from agent_custody_state.canonical import canonical_json
from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.model import AssertEvent, RetractEvent, Source

from .clock import StepClock
from .property import PropertyChecks
from .rules import ConformanceSuite, rule

StoreFactory = Callable[..., EventBackend]


def _ids(facts: list[Any]) -> list[str]:
    return [f.fact_id for f in facts]


class EventBackendConformance(PropertyChecks, ConformanceSuite):
    """The event-backend suite. Override ``store_factory``; everything else is inherited."""

    __suite_root__ = True

    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        raise NotImplementedError("provide a store_factory fixture: factory(name='ledger')")

    @pytest.fixture
    def clock(self) -> StepClock:
        return StepClock()

    @pytest.fixture
    def ledger(self, store_factory: StoreFactory, clock: StepClock) -> Iterator[Ledger]:
        with Ledger(store_factory(), clock=clock) as ledger:
            yield ledger

    def _assert(self, ledger: Ledger, **kw: Any) -> AssertEvent:
        args: dict[str, Any] = {
            "subject": "acct:42", "predicate": "plan", "value": "pro", "space": "org",
            "actor": "agent",
        }
        args.update(kw)
        return ledger.assert_fact(**args)

    # -- 2.1 assert ------------------------------------------------------------------------------

    @rule("EB-2.1-defaults")
    def test_assert_defaults(self, ledger: Ledger) -> None:
        """An assert gets source {receiptId: null}, provenance claimed, confidence null and
        validFrom equal to its txTime; the wire dict has SPEC 1.1 key order.

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
            "factId", "subject", "predicate", "value", "space", "actor", "source", "provenance",
            "validFrom", "validTo", "confidence",
        ]
        assert list(event.to_dict()) == ["eventId", "kind", "txTime", "fact", "supersedes"]

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
        ledger.validate_assert(subject="acct:42", predicate="plan", value="x", space="org",
                               actor="a", supersedes=a.fact_id)
        with pytest.raises(LedgerError, match="unknown fact"):
            ledger.validate_assert(subject="s", predicate="p", value=1, space="org", actor="a",
                                   supersedes="missing")
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
        b = self._assert(ledger, value="enterprise", supersedes=a.fact_id,
                         valid_from="2026-07-01T00:00:00Z")
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

    @rule("EB-2.2-filters")
    def test_as_of_filters_and_order(self, ledger: Ledger) -> None:
        """space, subject and predicate filter; results come in append order.

        Troubleshooting: order by the append sequence, never by time or id.
        """
        ids = []
        for i, (space, subject, predicate) in enumerate(
            [("org", "a", "p"), ("team:x", "a", "p"), ("org", "b", "p"), ("org", "a", "q")]
        ):
            ids.append(self._assert(ledger, space=space, subject=subject, predicate=predicate,
                                    value=i).fact_id)
        assert _ids(ledger.as_of()) == ids
        assert _ids(ledger.as_of(space="org")) == [ids[0], ids[2], ids[3]]
        assert _ids(ledger.as_of(subject="a")) == [ids[0], ids[1], ids[3]]
        assert _ids(ledger.as_of(subject="a", predicate="p", space="team:x")) == [ids[1]]
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
        assert _ids(ledger.as_of()) == heads

    @rule("EB-2.2-retract-past")
    def test_retraction_keeps_past(self, ledger: Ledger) -> None:
        """A retraction is invisible to reads whose tx_at is before it.

        Troubleshooting: the retract event's txTime must be stored and filtered on.
        """
        a = self._assert(ledger)
        before = ledger.now()
        ledger.retract(fact_id=a.fact_id, actor="x", reason="wrong")
        assert ledger.as_of() == []
        assert _ids(ledger.as_of(tx_at=before)) == [a.fact_id]

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
        assert c.fact_id in _ids(ledger.as_of())

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
        assert _ids(ledger.as_of()) == [c.fact_id, at.fact_id, v.fact_id]
        assert _ids(ledger.as_of(include="attested")) == [at.fact_id, v.fact_id]
        assert _ids(ledger.as_of(include="verified")) == [v.fact_id]
        before = ledger.now()
        ledger.confirm(fact_id=c.fact_id, actor="gw")
        assert _ids(ledger.as_of(include="attested")) == [c.fact_id, at.fact_id, v.fact_id]
        assert _ids(ledger.as_of(include="attested", tx_at=before)) == [at.fact_id, v.fact_id]
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

    # -- 2.3 retract -----------------------------------------------------------------------------

    @rule("EB-2.3")
    def test_retract_rules(self, ledger: Ledger) -> None:
        """Retract: unknown and twice are refused; superseded and held facts may be retracted;
        after forget it reads ``already retracted``.

        Troubleshooting: ``events_for`` must see retract/forget events of the fact.
        """
        with pytest.raises(LedgerError, match="^cannot retract unknown fact zz$"):
            ledger.retract(fact_id="zz", actor="x", reason="r")
        a = self._assert(ledger)
        b = self._assert(ledger, value="x", supersedes=a.fact_id)
        r = ledger.retract(fact_id=a.fact_id, actor="x", reason="superseded one")
        assert isinstance(r, RetractEvent)
        with pytest.raises(LedgerError, match=rf"^fact {a.fact_id} is already retracted$"):
            ledger.retract(fact_id=a.fact_id, actor="x", reason="r")
        ledger.hold(fact_id=b.fact_id, actor="legal", reason="case 1")
        ledger.retract(fact_id=b.fact_id, actor="x", reason="held but wrong")
        c = self._assert(ledger, subject="other")
        ledger.forget(fact_id=c.fact_id, actor="x", reason="gdpr")
        with pytest.raises(LedgerError, match=rf"^fact {c.fact_id} is already retracted$"):
            ledger.retract(fact_id=c.fact_id, actor="x", reason="r")

    # -- 2.4 confirm -----------------------------------------------------------------------------

    @rule("EB-2.4")
    def test_confirm_rules(self, ledger: Ledger) -> None:
        """Confirm errors in order: unknown, retracted, already attested (stored provenance not
        claimed, or confirmed before).

        Troubleshooting: the stored provenance must round-trip.
        """
        with pytest.raises(LedgerError, match="^cannot confirm unknown fact q$"):
            ledger.confirm(fact_id="q", actor="gw")
        a = self._assert(ledger)
        ledger.confirm(fact_id=a.fact_id, actor="gw", receipt_id="r-1")
        with pytest.raises(LedgerError, match=rf"^fact {a.fact_id} is already attested$"):
            ledger.confirm(fact_id=a.fact_id, actor="gw")
        b = self._assert(ledger, subject="b", provenance="attested")
        with pytest.raises(LedgerError, match=rf"^fact {b.fact_id} is already attested$"):
            ledger.confirm(fact_id=b.fact_id, actor="gw")
        ledger.retract(fact_id=b.fact_id, actor="x", reason="r")
        with pytest.raises(LedgerError, match=rf"^fact {b.fact_id} is retracted$"):
            ledger.confirm(fact_id=b.fact_id, actor="gw")
        confirm = ledger.history(a.fact_id)[-1]
        assert confirm.to_dict()["source"] == {"receiptId": "r-1"}
        assert "reason" not in confirm.to_dict()

    # -- 2.5 forget ------------------------------------------------------------------------------

    @rule("EB-2.5-errors")
    def test_forget_rules(self, ledger: Ledger) -> None:
        """Forget errors in order: unknown, already forgotten, on legal hold; a retracted fact may
        be forgotten.

        Troubleshooting: hold/release events must be returned in append order by ``events_for``.
        """
        with pytest.raises(LedgerError, match="^cannot forget unknown fact q$"):
            ledger.forget(fact_id="q", actor="x", reason="r")
        a = self._assert(ledger)
        ledger.hold(fact_id=a.fact_id, actor="legal", reason="case")
        with pytest.raises(LedgerError, match=rf"^fact {a.fact_id} is on legal hold; release"):
            ledger.forget(fact_id=a.fact_id, actor="x", reason="r")
        ledger.release(fact_id=a.fact_id, actor="legal", reason="closed")
        ledger.retract(fact_id=a.fact_id, actor="x", reason="r")
        ledger.forget(fact_id=a.fact_id, actor="x", reason="r")
        with pytest.raises(LedgerError, match=rf"^fact {a.fact_id} is already forgotten$"):
            ledger.forget(fact_id=a.fact_id, actor="x", reason="r")

    @rule("EB-2.5-digest")
    def test_forget_digests(self, store_factory: StoreFactory, clock: StepClock) -> None:
        """sha256 of the canonical JSON by default, HMAC-SHA256 with a forget key, none when
        keep_digest is false; the assert is rewritten (value null, forgotten appended) and
        nothing else changes.

        Troubleshooting: persist the rewritten assert exactly as ``forget_assert`` builds it.
        """
        value = {"b": 1.0, "a": ["é", 1e21, None]}
        expected = hashlib.sha256(canonical_json(value).encode()).hexdigest()
        with Ledger(store_factory("digests"), clock=clock) as ledger:
            a = self._assert(ledger, value=value)
            other = self._assert(ledger, subject="keep", value="untouched")
            before = a.to_dict()
            f = ledger.forget(fact_id=a.fact_id, actor="x", reason="gdpr")
            assert (f.value_digest, f.digest_kind) == (expected, "sha256")
            after = ledger.history(a.fact_id)[0].to_dict()
            before["fact"]["value"] = None
            before["fact"]["forgotten"] = {"valueDigest": expected, "digestKind": "sha256",
                                           "at": f.tx_time}
            assert after == before
            assert list(after["fact"])[-1] == "forgotten"
            kept = ledger.get(other.fact_id)
            assert kept is not None and kept.value == "untouched"
            b = self._assert(ledger, subject="n", value="x")
            none = ledger.forget(fact_id=b.fact_id, actor="x", reason="r", keep_digest=False)
            assert (none.value_digest, none.digest_kind) == (None, "none")
        with Ledger(store_factory("digests-keyed"), forget_key="s3cret", clock=clock) as keyed:
            c = self._assert(keyed, value="enterprise")
            h = keyed.forget(fact_id=c.fact_id, actor="x", reason="r")
            mac = hmac.new(b"s3cret", b'"enterprise"', hashlib.sha256).hexdigest()
            assert (h.value_digest, h.digest_kind) == (mac, "hmac-sha256")

    # -- 2.6 hold / release ----------------------------------------------------------------------

    @rule("EB-2.6")
    def test_hold_release(self, ledger: Ledger) -> None:
        """held() follows the last hold/release; double hold, release without hold, and hold of
        a forgotten fact are refused.

        Troubleshooting: return hold and release events in append order.
        """
        a = self._assert(ledger)
        assert ledger.held(a.fact_id) is False
        with pytest.raises(LedgerError, match="^cannot hold unknown fact q$"):
            ledger.hold(fact_id="q", actor="l", reason="r")
        with pytest.raises(LedgerError, match=rf"^fact {a.fact_id} is not on hold$"):
            ledger.release(fact_id=a.fact_id, actor="l", reason="r")
        hold = ledger.hold(fact_id=a.fact_id, actor="l", reason="case 7")
        assert hold.to_dict()["kind"] == "hold" and ledger.held(a.fact_id)
        with pytest.raises(LedgerError, match=rf"^fact {a.fact_id} is already on hold$"):
            ledger.hold(fact_id=a.fact_id, actor="l", reason="r")
        ledger.release(fact_id=a.fact_id, actor="l", reason="closed")
        assert not ledger.held(a.fact_id)
        ledger.hold(fact_id=a.fact_id, actor="l", reason="again")
        assert ledger.held(a.fact_id)
        b = self._assert(ledger, subject="b")
        ledger.forget(fact_id=b.fact_id, actor="x", reason="r")
        with pytest.raises(LedgerError, match=rf"^fact {b.fact_id} is already forgotten$"):
            ledger.hold(fact_id=b.fact_id, actor="l", reason="r")

    # -- 2.7 learned_before / sweep --------------------------------------------------------------

    @rule("EB-2.7")
    def test_learned_before_and_sweep(self, ledger: Ledger, clock: StepClock) -> None:
        """learned_before uses transaction time (not valid time), includes retracted and
        superseded facts, excludes forgotten ones; sweep forgets them, skipping held facts,
        optionally in one space.

        Troubleshooting: ``find_asserts(tx_before=...)`` must be a strict ``<``.
        """
        old = self._assert(ledger, value="old", valid_from="2030-01-01T00:00:00Z")
        sup = self._assert(ledger, value="newer", supersedes=old.fact_id,
                           valid_from="2030-01-01T00:00:00Z")
        held = self._assert(ledger, subject="held")
        team = self._assert(ledger, subject="t", space="team:x")
        gone = self._assert(ledger, subject="gone")
        ledger.retract(fact_id=sup.fact_id, actor="x", reason="r")
        ledger.forget(fact_id=gone.fact_id, actor="x", reason="r")
        ledger.hold(fact_id=held.fact_id, actor="legal", reason="case")
        clock.advance(days=1)
        cutoff = ledger.now()
        clock.advance(days=1)
        late = self._assert(ledger, subject="late")
        learned = _ids(ledger.learned_before(cutoff))
        assert learned == [old.fact_id, sup.fact_id, held.fact_id, team.fact_id]
        assert _ids(ledger.learned_before(cutoff, "team:x")) == [team.fact_id]
        assert ledger.learned_before(team.tx_time) == ledger.learned_before(team.tx_time)
        assert team.fact_id not in _ids(ledger.learned_before(team.tx_time))
        res = ledger.sweep(before=cutoff, actor="retention", reason="P30D", space="org")
        assert [e.fact_id for e in res.forgotten] == [old.fact_id, sup.fact_id]
        assert res.held == [held.fact_id]
        assert _ids(ledger.learned_before(cutoff)) == [held.fact_id, team.fact_id]
        assert _ids(ledger.as_of(valid_at="2031-01-01T00:00:00Z")) == [held.fact_id,
                                                                          team.fact_id,
                                                                          late.fact_id]

    # -- 2.9 other queries -----------------------------------------------------------------------

    @rule("EB-2.9")
    def test_other_queries(self, ledger: Ledger) -> None:
        """get, history (oldest first, including superseding asserts), facts, spaces (sorted),
        count and export (every event, in order).

        Troubleshooting: ``history`` must include asserts whose ``supersedes`` is the id.
        """
        assert ledger.get("none") is None and ledger.history("none") == []
        a = self._assert(ledger, space="user:dana")
        b = self._assert(ledger, value="x", supersedes=a.fact_id, space="org")
        ledger.hold(fact_id=a.fact_id, actor="l", reason="r")
        unrelated = self._assert(ledger, subject="u", space="team:a")
        hist = ledger.history(a.fact_id)
        assert [e.kind for e in hist] == ["assert", "assert", "hold"]
        assert hist[1].event_id == b.event_id
        assert ledger.spaces() == ["org", "team:a", "user:dana"]
        assert ledger.count() == 4
        exported = list(ledger.export())
        assert [e.event_id for e in exported][:2] == [a.event_id, b.event_id]
        assert exported[-1].event_id == unrelated.event_id
        assert _ids(ledger.facts()) == [a.fact_id, b.fact_id, unrelated.fact_id]
        fact_a = ledger.get(a.fact_id)
        assert fact_a is not None and fact_a.valid_to == b.fact.valid_from

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
        with Ledger(store_factory("shared"), clock=clock) as one, \
                Ledger(store_factory("shared"), clock=clock) as two:
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
            "eventId": "e-new", "kind": "assert", "txTime": "2026-09-01T00:00:00.000Z",
            "fact": {"factId": "f-new", "subject": "s", "predicate": "p", "value": 1,
                     "space": "org", "actor": "a", "source": {"receiptId": None},
                     "provenance": "claimed", "validFrom": "2026-09-01T00:00:00.000Z",
                     "validTo": None, "confidence": None, "tags": ["x"]},
            "supersedes": None, "future": {"k": 1},
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
        event = ledger.validate_assert(subject="s", predicate="p", value=1, space="org",
                                       actor="a")
        with pytest.raises(RuntimeError), ledger.backend.transaction():
            ledger.backend.append([event])
            raise RuntimeError("boom")
        assert ledger.count() == 1
        with pytest.raises(LedgerError, match="^item 1: cannot supersede unknown fact nope$"):
            ledger.assert_many([
                {"subject": "s", "predicate": "p", "value": 1, "space": "org", "actor": "a"},
                {"subject": "s", "predicate": "p", "value": 2, "space": "org", "actor": "a",
                 "supersedes": "nope"},
            ])
        assert _ids(ledger.facts()) == [keep.fact_id]
        batch = ledger.assert_many(
            [{"subject": "s", "predicate": "p", "value": i, "space": "org", "actor": "a"}
             for i in range(50)]
        )
        assert ledger.count() == 51 and len(batch) == 50
