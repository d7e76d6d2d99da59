"""Review 7 of the day's new code (core): where a store writes, and a flow whose caller left.

- A store whose ``where`` raises (a property with a bug) stopped a forget after the ledger
  committed it: every store's removal was skipped, the other stores kept the erased value, and
  the caller got the store's exception. It now names no place (logged): a copy recorded at a
  place reads as moved (``failed``), the other stores are removed and verified.
- A ``where`` that is not a text (a URL object, a number) was ignored without a word: the
  store's copies went unrecorded and a move was never caught. It is still not recorded (an
  object's text may differ in each process) but warned, once per store.
- A caller's own ``externalWhere`` (``AssertRequest.fact_extra``) was kept by a write through
  stores that declare no ``where``, so a store that never moved was refused its removal
  forever. A write through stores records what the stores did, as it does for ``external``.
- A flow that failed after its caller was cancelled (``stores.finish``) had its exception
  retrieved and dropped: nothing reached the log. It is now logged at ERROR.
- The mode mark records the default key store by its absolute path (sixth review): a
  crypto-shred ledger whose folder was moved (restored from a backup, mounted elsewhere) could
  no longer be read by a read-only open or the command line, its key store right beside it.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.ledger.model import Fact
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore, MemoryVendor

A = "mem://vendor-a space:support"


class PlacedStore(InProcessStore):
    """An in-process store that declares where it writes, and may be made to fail at it."""

    def __init__(self, name: str, vendor: MemoryVendor, where: str) -> None:
        super().__init__(name, vendor)
        self._where = where
        self.broken = False

    @property
    def where(self) -> str:
        if self.broken:
            raise RuntimeError("where: settings not loaded")
        return self._where


def custody(ledger: Ledger, *stores: InProcessStore) -> Custody:
    return Custody(ledger, StoreSet(list(stores), VerifyPolicy(1, 0)))


def request(value: str = "dana@example.org", **more: Any) -> AssertRequest:
    return AssertRequest("acct:1", "email", value, "org", "a", **more)


def test_a_where_that_raises_never_stops_a_forget_after_its_commit() -> None:
    async def scenario() -> None:
        broken_vendor, good_vendor = MemoryVendor(), MemoryVendor()
        with Ledger("memory:") as ledger:
            broken = PlacedStore("broken", broken_vendor, A)
            here = custody(ledger, broken, InProcessStore("good", good_vendor))
            fact_id = (await here.write(request())).event.fact_id
            broken.broken = True
            done = await here.forget(fact_id=fact_id, actor="a", reason="r")
            forgotten = ledger.get(fact_id)
            assert forgotten is not None and forgotten.forgotten is not None
            # The other store's copy left, and was checked; the one whose place cannot be
            # told is reported, never removed or checked at an unknown place.
            assert done.removal.verification == {"broken": "failed", "good": "verified"}
            assert A in done.removal.still_held["broken"]
            assert good_vendor.rows == {} and len(broken_vendor.rows) == 1
            # A write through it still works: its copy is recorded without a place.
            again = (await here.write(request("new@example.org"))).event.fact
            assert "externalWhere" not in again.extra and set(again.external or {}) == {
                "broken",
                "good",
            }

    anyio.run(scenario)


def test_a_callers_external_where_is_not_kept_by_a_write_through_stores() -> None:
    async def scenario() -> None:
        vendor = MemoryVendor()
        with Ledger("memory:") as ledger:
            here = custody(ledger, InProcessStore("s", vendor))
            forged = request(fact_extra={"externalWhere": {"s": "elsewhere"}, "note": "kept"})
            fact: Fact = (await here.write(forged)).event.fact
            assert "externalWhere" not in fact.extra and fact.extra["note"] == "kept"
            done = await here.forget(fact_id=fact.fact_id, actor="a", reason="r")
            assert done.removal.verification == {"s": "verified"} and vendor.rows == {}

    anyio.run(scenario)


class StallingStore(InProcessStore):
    """A store whose put waits for ``gate`` and then fails."""

    def __init__(self, name: str, vendor: MemoryVendor) -> None:
        super().__init__(name, vendor)
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def put(self, fact: Fact) -> str:
        self.entered.set()
        await self.gate.wait()
        raise RuntimeError("the vendor went away after the caller did")


def test_a_flow_failing_after_its_caller_was_cancelled_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        with Ledger("memory:") as ledger:
            store = StallingStore("s", MemoryVendor())
            caller = asyncio.ensure_future(custody(ledger, store).write(request()))
            await store.entered.wait()
            caller.cancel()  # asyncio's own cancel: the flow runs on in its own task
            store.gate.set()
            with pytest.raises(asyncio.CancelledError):
                await caller

    with caplog.at_level(logging.ERROR, logger="agent_custody_state.stores.finish"):
        asyncio.run(scenario())
    [record] = [r for r in caplog.records if r.name == "agent_custody_state.stores.finish"]
    assert record.levelno == logging.ERROR and "caller was cancelled failed" in record.message
    assert "the vendor went away" in record.getMessage()  # the store's failure, its text masked
    assert "RuntimeError" in (record.exc_text or "")  # the cause's type, never its message


def test_a_supersede_after_a_move_and_a_store_that_declares_where_only_after_an_upgrade() -> None:
    """Probed, and kept as they are: the old fact's copy at the old place is reported, not
    removed at the new one; a fact written before the store declared ``where`` is removed and
    checked as before (nothing recorded, nothing refused)."""

    async def scenario() -> None:
        old, new = MemoryVendor(), MemoryVendor()
        with Ledger("memory:") as ledger:
            first = (await custody(ledger, PlacedStore("s", old, A)).write(request())).event
            moved = custody(ledger, PlacedStore("s", new, "mem://vendor-b"))
            written = await moved.write(request("new@example.org", supersedes=first.fact_id))
            assert written.mirror is not None and written.mirror.moved == ["s"]
            assert written.event.fact.extra["externalWhere"] == {"s": "mem://vendor-b"}
            assert len(old.rows) == 1 and len(new.rows) == 1
            # Written before the store declared where: no record, removed as before.
            plain = (await custody(ledger, InProcessStore("t", old)).write(request("x@y"))).event
            upgraded = custody(ledger, PlacedStore("t", old, A))
            done = await upgraded.forget(fact_id=plain.fact_id, actor="a", reason="r")
            assert done.removal.verification == {"t": "verified"}
            assert "externalWhere" not in plain.fact.extra

    anyio.run(scenario)


def test_a_crypto_shred_ledger_whose_folder_moved_still_reads_its_keys(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir()
    with Ledger(before / "ledger.jsonl", forget_mode="crypto-shred") as ledger:
        fact_id = ledger.assert_fact(request()).fact_id
    shutil.move(str(before), str(after))
    with Ledger(after / "ledger.jsonl", forget_mode="crypto-shred", read_only=True) as ledger:
        fact = ledger.get(fact_id)
        assert fact is not None and fact.value == "dana@example.org"
        mark = ledger.backend.recorded_forget_mode()
        assert mark is not None and mark.key_store == str(after / "ledger.jsonl.keys")
    assert sorted(p.name for p in after.iterdir()) == [
        "ledger.jsonl",
        "ledger.jsonl.keys",
        "ledger.jsonl.lock",
        "ledger.jsonl.mode",
    ]


class OddPlace(InProcessStore):
    where: Any = 42  # a URL object or a number where a text belongs


def test_a_where_that_is_not_a_text_is_warned_once_and_not_recorded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        vendor = MemoryVendor()
        with Ledger("memory:") as ledger:
            here = custody(ledger, OddPlace("odd-place-store", vendor))
            facts = [(await here.write(request(f"{i}@example.org"))).event.fact for i in (1, 2)]
            assert all("externalWhere" not in f.extra for f in facts)
            done = await here.forget(fact_id=facts[0].fact_id, actor="a", reason="r")
            assert done.removal.verification == {"odd-place-store": "verified"}

    with caplog.at_level(logging.WARNING, logger="agent_custody_state.stores.where"):
        anyio.run(scenario)
    [warning] = [r for r in caplog.records if r.name == "agent_custody_state.stores.where"]
    assert "odd-place-store" in warning.message and "int value, not a text" in warning.message
