"""A copy a failed put left behind is found by the fact id and removed, or reported and owed.

The stores here are the in-process reference store with a put that stores the record and then
raises (a timeout after the vendor stored it), and variants without the lookup or with one that
fails. Vendor rows are read directly, as a conformance backdoor reads a vendor.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.ledger.model import Fact
from agent_custody_state.stores import StoreError, StoreSet, StoreWriteError, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.orphans import NO_LOOKUP
from agent_custody_state.stores.outbox import Outbox

FAST = VerifyPolicy(attempts=2, delay=0)


class StoresThenTimesOut(InProcessStore):
    """The vendor keeps the record; the answer never arrives. ``leak`` switches it on."""

    leak = True
    lookup_fails = False

    async def put(self, fact: Fact) -> str:
        external_id = await super().put(fact)
        if self.leak:
            raise StoreError(self.name, "put failed: ReadTimeout: timed out")
        return external_id

    async def held_ids(self, fact: Fact) -> list[str]:
        if self.lookup_fails:
            raise StoreError(self.name, "list by factId failed: 503")
        return await super().held_ids(fact)


class NoLookup(StoresThenTimesOut):
    """The same store without ``held_ids`` (a third-party store that cannot look up)."""

    held_ids = None  # type: ignore[assignment]


class RemoveFails(StoresThenTimesOut):
    async def remove(self, external_id: str, fact: Fact) -> None:
        raise StoreError(self.name, "delete failed: 500")


def copies(store: InProcessStore) -> list[str]:
    return [r["metadata"]["factId"] for r in store.vendor.rows.values()]


def plan(value: Any, **more: Any) -> AssertRequest:
    fields: dict[str, Any] = {"subject": "acct:42", "predicate": "plan", "space": "org"}
    return AssertRequest(value=value, actor="agent", **(fields | more))


def fact(fact_id: str = "f1") -> Fact:
    return Fact(fact_id, "acct:42", "plan", "pro", "org", "agent", valid_from="2026-01-01")


def test_the_copy_a_timed_out_put_left_is_removed_and_named() -> None:
    first, leaky = InProcessStore("first"), StoresThenTimesOut("leaky")

    async def scenario() -> None:
        with pytest.raises(StoreWriteError) as caught:
            await StoreSet([first, leaky], FAST).put_all(fact())
        assert caught.value.store == "leaky"
        assert caught.value.message == "put failed: ReadTimeout: timed out"  # the put's error
        assert caught.value.compensation == {
            "first": "removed",
            "leaky": "removed a copy the failed put left",
        }
        assert caught.value.owed == []
        assert "leaky: removed a copy the failed put left" in str(caught.value)

    anyio.run(scenario)
    assert copies(first) == [] and copies(leaky) == []


def test_a_put_that_stored_nothing_reports_no_copy_left() -> None:
    down = InProcessStore("down")
    down.vendor.fail = True

    class Refuses(InProcessStore):
        async def put(self, fact: Fact) -> str:
            raise StoreError(self.name, "quota exceeded")

    async def scenario() -> None:
        with pytest.raises(StoreWriteError) as caught:
            await StoreSet([Refuses("refuses")], FAST).put_all(fact())
        assert caught.value.compensation == {"refuses": "no copy left"}

    anyio.run(scenario)


def test_a_store_without_the_lookup_is_reported_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    leaky = NoLookup("leaky")

    async def scenario() -> None:
        with pytest.raises(StoreWriteError) as caught:
            await StoreSet([leaky], FAST).put_all(fact("f-nolookup"))
        assert caught.value.compensation == {"leaky": NO_LOOKUP}
        assert caught.value.owed == []  # nothing could retry it

    with caplog.at_level(logging.WARNING):
        anyio.run(scenario)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert any("leaky" in r.getMessage() and "f-nolookup" in r.getMessage() for r in errors)
    assert copies(leaky) == ["f-nolookup"]  # the operator's to delete, as the log says


def test_a_failing_cleanup_never_hides_the_puts_error() -> None:
    leaky = RemoveFails("leaky")

    async def scenario() -> None:
        with pytest.raises(StoreWriteError) as caught:
            await StoreSet([leaky], FAST).put_all(fact())
        assert caught.value.message == "put failed: ReadTimeout: timed out"
        outcome = caught.value.compensation["leaky"]
        assert outcome.startswith("may hold a copy (removing it failed: ")
        assert caught.value.owed == ["leaky"]

    anyio.run(scenario)


def test_write_without_outbox_logs_an_error_when_the_lookup_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    leaky = StoresThenTimesOut("leaky")
    leaky.lookup_fails = True

    async def scenario() -> None:
        with Ledger("memory:") as ledger:
            with pytest.raises(StoreWriteError) as caught:
                await Custody(ledger, StoreSet([leaky], FAST)).write(plan("pro"))
            assert ledger.count() == 0
        assert caught.value.owed == ["leaky"]

    with caplog.at_level(logging.WARNING):
        anyio.run(scenario)
    (fact_id,) = copies(leaky)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("leaky" in m and fact_id in m and "no outbox" in m for m in errors), errors


def test_an_owed_cleanup_is_kept_in_the_outbox_and_resumed(tmp_path: Path) -> None:
    leaky = StoresThenTimesOut("leaky")
    leaky.lookup_fails = True
    outbox_path = tmp_path / "ledger.jsonl.outbox"

    async def scenario() -> None:
        with Ledger(str(tmp_path / "ledger.jsonl")) as ledger:
            custody = Custody(ledger, StoreSet([leaky], FAST), outbox=outbox_path)
            with pytest.raises(StoreWriteError) as caught:
                await custody.write(plan("pro", space="team:a"))
            assert "owed in the outbox" in caught.value.compensation["leaky"]
            (owed,) = Outbox(outbox_path).pending()
            assert (owed.operation, owed.store, owed.space) == ("put", "leaky", "team:a")
            assert owed.external_id == "" and "pro" not in outbox_path.read_text()
            # Still failing at the next start: the entry stays.
            resumed = await custody.resume()
            assert resumed is not None and list(resumed.left) == [owed.entry]
            leaky.lookup_fails = False
            resumed = await custody.resume()
            assert resumed is not None and not resumed.left
            assert resumed.finished[owed.fact_id].removed_from == ["leaky"]
            # No value in the outbox: verified only because this check needs none.
            assert resumed.finished[owed.fact_id].verification == {"leaky": "verified"}
            assert Outbox(outbox_path).pending() == []

    anyio.run(scenario)
    assert copies(leaky) == []


def test_resume_keeps_the_copy_the_ledger_records(tmp_path: Path) -> None:
    leaky = StoresThenTimesOut("leaky")
    leaky.lookup_fails = True
    outbox_path = tmp_path / "ledger.jsonl.outbox"

    async def scenario() -> None:
        with Ledger(str(tmp_path / "ledger.jsonl")) as ledger:
            custody = Custody(ledger, StoreSet([leaky], FAST), outbox=outbox_path)
            with pytest.raises(StoreWriteError):
                await custody.write(plan("pro", fact_id="f-retried"))
            leaky.leak = leaky.lookup_fails = False
            # The caller writes the same fact id again, and this time it lands (a put that
            # succeeds cleans nothing up): two copies, one recorded by the ledger.
            report = await custody.write(plan("pro", fact_id="f-retried"))
            recorded = (report.event.fact.external or {})["leaky"]
            assert copies(leaky) == ["f-retried", "f-retried"]
            await custody.resume()
            assert list(leaky.vendor.rows) == [recorded]
            assert Outbox(outbox_path).pending() == []

    anyio.run(scenario)


def test_a_put_back_that_times_out_leaves_no_copy() -> None:
    mirror = StoresThenTimesOut("mirror")
    mirror.leak = False

    async def scenario() -> None:
        with Ledger("memory:") as ledger:
            custody = Custody(ledger, StoreSet([mirror], FAST))
            a = await custody.write(plan("pro"))
            b = await custody.write(plan("enterprise", supersedes=a.event.fact_id))
            mirror.leak = True
            out = await custody.retract(fact_id=b.event.fact_id, actor="x", reason="wrong")
            assert out.restored is not None and out.restored.external == {}
            failed = out.restored.failed["mirror"]
            assert failed.endswith("; removed a copy the failed put left"), failed

    anyio.run(scenario)
    assert copies(mirror) == []
