"""Event-backend rules for what follows an assert (SPEC 2.3 to 2.7), and the other queries (2.9).

Retract, confirm, forget (with its digests), hold and release, ``learned_before`` and sweep, then
``get``, ``history``, ``facts``, ``spaces``, ``count`` and ``export`` over what they leave behind.
"""

from __future__ import annotations

import hashlib
import hmac

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.canonical import canonical_json
from agent_custody_state.ledger.model import RetractEvent

from ..clock import StepClock
from ..rules import rule
from .base import BackendRules, StoreFactory, fact_ids

__all__ = ["MutationRules"]


class MutationRules(BackendRules):
    """The retract, confirm, forget, hold, sweep rules (SPEC 2.3-2.7) and other queries (2.9)."""

    __suite_root__ = True

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
        keep_digest is false; the assert is rewritten (value null, its chain salt erased,
        forgotten after the SPEC keys) and nothing else changes.

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
            assert before["fact"].pop("valueSalt")  # erased with the value (docs/proofs.md)
            before["fact"]["forgotten"] = {
                "valueDigest": expected,
                "digestKind": "sha256",
                "at": f.tx_time,
            }
            assert after == before
            keys = list(after["fact"])
            assert keys[keys.index("confidence") + 1] == "forgotten"
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
        sup = self._assert(
            ledger, value="newer", supersedes=old.fact_id, valid_from="2030-01-01T00:00:00Z"
        )
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
        learned = fact_ids(ledger.learned_before(cutoff))
        assert learned == [old.fact_id, sup.fact_id, held.fact_id, team.fact_id]
        assert fact_ids(ledger.learned_before(cutoff, "team:x")) == [team.fact_id]
        assert ledger.learned_before(team.tx_time) == ledger.learned_before(team.tx_time)
        assert team.fact_id not in fact_ids(ledger.learned_before(team.tx_time))
        res = ledger.sweep(before=cutoff, actor="retention", reason="P30D", space="org")
        assert [e.fact_id for e in res.forgotten] == [old.fact_id, sup.fact_id]
        assert res.held == [held.fact_id]
        assert fact_ids(ledger.learned_before(cutoff)) == [held.fact_id, team.fact_id]
        assert fact_ids(ledger.as_of(valid_at="2031-01-01T00:00:00Z")) == [
            held.fact_id,
            team.fact_id,
            late.fact_id,
        ]

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
        assert fact_ids(ledger.facts()) == [a.fact_id, b.fact_id, unrelated.fact_id]
        fact_a = ledger.get(a.fact_id)
        assert fact_a is not None and fact_a.valid_to == b.fact.valid_from
