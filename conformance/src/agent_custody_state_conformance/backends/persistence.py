"""Event-backend rules for persistence and concurrency: what survives, is shared, is atomic.

Reopen keeps every event and its exact wire form, two instances of one location see each other's
writes, keys from a newer version are kept, and a failed transaction leaves nothing behind.
"""

from __future__ import annotations

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.model import ForgetEvent, Forgotten

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

    @rule("EB-P-unicode")
    def test_awkward_text_survives_reopen(
        self, store_factory: StoreFactory, clock: StepClock
    ) -> None:
        """Text that trips encodings survives close and reopen unchanged, in the value and in
        the keys reads filter on: astral-plane characters, combining marks, CJK, U+2028,
        U+2029 and U+0085 (line breaks to some readers), control characters, quotes and
        backslashes; as_of, spaces and key_values find the fact by those keys exactly.

        Troubleshooting: store UTF-8 (or the event's JSON text as given), never ASCII with
        replacement; split stored lines on ``"\\n"`` only (``str.splitlines`` also splits at
        U+2028, U+0085 and others); give text columns a full Unicode encoding (utf8mb4, not
        utf8 or latin1).
        """
        subject, space = "user:zo\u00eb \U0001f600", "team:\u4e2d\u6587 e\u0301"
        value = {
            "text": 'a\u2028b\u2029c\u0085d \U0001f9ea "q" back\\slash \x01\x1f\t\n',
            "list": ["\U0001d11e", "e\u0301", "\ufeff", "\u00ff"],
        }
        with Ledger(store_factory("unicode"), clock=clock) as ledger:
            fact = self._assert(ledger, subject=subject, space=space, value=value)
        with Ledger(store_factory("unicode"), clock=clock) as again:
            after = [e.to_dict() for e in again.export()]
            assert after == [fact.to_dict()], (
                "EB-P-unicode: the events read back differ from those written"
            )
            found = again.as_of(subject=subject, space=space)
            assert fact_ids(found) == [fact.fact_id], "EB-P-unicode: as_of by the keys misses it"
            assert found[0].value == value, f"EB-P-unicode: the value reads {found[0].value!r}"
            assert again.spaces() == [space], f"EB-P-unicode: spaces() is {again.spaces()!r}"
            assert again.key_values("subject", "user:zo\u00eb") == [subject]

    @rule("EB-7-immutable")
    def test_what_a_caller_mutates_stays_the_callers(
        self, store_factory: StoreFactory, clock: StepClock
    ) -> None:
        """SPEC 7: facts and events are immutable. Mutating the dict given to ``assert_fact``,
        the event it returned, or a value any read handed out changes nothing the ledger holds:
        the past reads as written, in this instance and after a reopen.

        Troubleshooting: a backend whose reads return the objects it keeps (an in-memory index)
        declares ``keeps_objects = True``, and the ledger then hands out copies; a backend that
        builds every event it returns from storage leaves it False.
        """
        value: dict[str, object] = {"seats": [1, 2], "plan": "pro"}
        with Ledger(store_factory("immutable"), clock=clock) as ledger:
            first = self._assert(ledger, value=value, external={"mem0": "m-1"})
            value["plan"] = "changed by the caller"
            first.fact.value["seats"].append(3)
            read = ledger.get(first.fact_id)
            assert read is not None and read.external is not None
            read.value["plan"] = "enterprise"
            read.external["mem0"] = "edited"
            ledger.as_of()[0].value["seats"].clear()
            ledger.history(first.fact_id)[0].fact.value["plan"] = "history"  # type: ignore[union-attr]
            ledger.facts()[0].value["seats"].append(9)
            written = {"seats": [1, 2], "plan": "pro"}
            again = ledger.get(first.fact_id)
            assert again is not None and (again.value, again.external) == (
                written,
                {"mem0": "m-1"},
            ), (
                f"EB-7-immutable: the fact now reads {again!r}: a caller's mutation reached the ledger"
            )
        with Ledger(store_factory("immutable"), clock=clock) as reopened:
            assert [f.value for f in reopened.as_of()] == [written]

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

    @rule("EB-P-atomic-forget")
    def test_failed_forget_is_whole_or_absent(
        self, store_factory: StoreFactory, clock: StepClock
    ) -> None:
        """A write section that fails after its forget leaves the forget whole or absent: the
        forget event is there exactly when the assert reads rewritten (value null,
        ``forgotten`` set), in this instance and in one opened afterwards.

        Troubleshooting: ``forget`` rewrites the assert and appends its event in one step of
        the section: a database rolls both back; a file backend that replaces its file must
        replace it with both already in it, never write the rewrite ahead of the section.
        """
        with Ledger(store_factory("forget-rollback"), clock=clock) as ledger:
            a = self._assert(ledger, value="secret")
            forgotten = Forgotten(None, "none", ledger.now())
            event = ForgetEvent("e-forget", forgotten.at, a.fact_id, "x", "r", digest_kind="none")
            with pytest.raises(RuntimeError), ledger.backend.transaction():
                ledger.backend.forget(a.fact_id, forgotten, event)
                raise RuntimeError("boom")
            self._whole_or_absent("this instance", ledger.backend, a.fact_id)
            with store_factory("forget-rollback") as other:
                self._whole_or_absent("a new instance", other, a.fact_id)

    def _whole_or_absent(self, who: str, backend: EventBackend, fact_id: str) -> None:
        kinds = [e.kind for e in backend.events_for([fact_id])]
        stored = backend.get_assert(fact_id)
        assert stored is not None, f"EB-P-atomic-forget: {who} lost the assert"
        rewritten = stored.fact.forgotten is not None or stored.fact.value is None
        assert rewritten == ("forget" in kinds), (
            f"EB-P-atomic-forget: after the failed section {who} reads the assert "
            f"{'rewritten' if rewritten else 'intact'} but its events are {kinds}"
        )

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
