"""A put the store did not see answered stays owed across a restart until it can no longer land.

The store here is the in-process reference store over a vendor that answers a timeout before
it stores the record and stores it later (``finish_adds``: the server caught up), as Letta,
Cognee and Zep do. A "restart" is a new ledger object, store and ``Custody`` on the same files
and vendor: the new store has no record of the unanswered put, so only its ``settle_seconds``
keeps the outbox's cleanup from settling on an empty lookup. Vendor rows are read directly.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.ledger.model import Fact
from agent_custody_state.plugin import Unanswered, may_have_landed
from agent_custody_state.stores import StoreError, StoreSet, StoreWriteError, VerifyPolicy
from agent_custody_state.stores.base import settle_seconds_of
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore, MemoryVendor
from agent_custody_state.stores.outbox import Outbox

FAST = VerifyPolicy(attempts=2, delay=0)
SETTLE = 600.0


class SlowVendor(MemoryVendor):
    """Answers the next ``store_later`` inserts with a timeout and stores them at
    ``finish_adds``."""

    def __init__(self) -> None:
        super().__init__()
        self.store_later = 0
        self.unfinished: list[dict[str, Any]] = []

    def insert(self, record: dict[str, Any]) -> str:
        if self.store_later > 0:
            self.store_later -= 1
            self.unfinished.append(record)
            raise httpx.ReadTimeout("timed out")
        return super().insert(record)

    def finish_adds(self) -> None:
        unfinished, self.unfinished = self.unfinished, []
        for record in unfinished:
            super().insert(record)


class SettlingStore(InProcessStore):
    """The in-process store with the record a vendor store keeps (``stores.unanswered``)."""

    def __init__(self, vendor: SlowVendor, settle_seconds: float = SETTLE) -> None:
        super().__init__("slow", vendor)
        self.unanswered = Unanswered(settle_seconds)

    @property
    def settle_seconds(self) -> float:
        return self.unanswered.settle_seconds

    async def put(self, fact: Fact) -> str:
        try:
            with self.unanswered.sending(fact.fact_id):
                return self.vendor.insert({"metadata": {"factId": fact.fact_id}})
        except httpx.HTTPError as exc:
            raise StoreError(self.name, f"put failed: {exc}") from exc

    async def held_ids(self, fact: Fact) -> list[str]:
        held = await super().held_ids(fact)
        age = self.unanswered.doubt(fact.fact_id, held)
        if age is not None:
            raise StoreError(self.name, f"a put of it ended unanswered {age:.0f}s ago")
        return held


def _copies(vendor: MemoryVendor) -> list[str]:
    return [r["metadata"]["factId"] for r in vendor.rows.values()]


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


async def _failed_write(path: Path, vendor: SlowVendor, clock: Clock) -> str:
    """The first process: a put the vendor has not answered; the cleanup is owed."""
    vendor.store_later = 1
    with Ledger(str(path), clock=clock) as ledger:
        custody = Custody(ledger, StoreSet([SettlingStore(vendor)], FAST), outbox=f"{path}.outbox")
        request = AssertRequest("acct:42", "plan", "pro", "org", "agent")
        with pytest.raises(StoreWriteError) as failed:
            await custody.write(request)
    assert failed.value.owed == ["slow"]
    (owed,) = Outbox(f"{path}.outbox").pending()
    return owed.fact_id


async def _resume_after_restart(path: Path, vendor: SlowVendor, clock: Clock) -> Any:
    with Ledger(str(path), clock=clock) as ledger:
        custody = Custody(ledger, StoreSet([SettlingStore(vendor)], FAST), outbox=f"{path}.outbox")
        return await custody.resume()


def test_a_restart_before_the_vendor_finished_keeps_the_cleanup_owed(tmp_path: Path) -> None:
    path, vendor, clock = tmp_path / "ledger.jsonl", SlowVendor(), Clock()

    async def scenario() -> None:
        fact_id = await _failed_write(path, vendor, clock)
        clock.now += timedelta(seconds=60)
        resumed = await _resume_after_restart(path, vendor, clock)
        (why,) = resumed.left.values()
        assert "may still land for 540s more" in why
        assert len(Outbox(f"{path}.outbox").pending()) == 1  # not settled on an empty lookup
        vendor.finish_adds()  # the vendor stores the copy after the restart's lookup
        assert _copies(vendor) == [fact_id]
        clock.now += timedelta(seconds=SETTLE)
        resumed = await _resume_after_restart(path, vendor, clock)
        assert not resumed.left and resumed.finished[fact_id].removed_from == ["slow"]
        assert _copies(vendor) == []
        assert Outbox(f"{path}.outbox").pending() == []

    anyio.run(scenario)


def test_a_copy_found_while_the_put_may_still_land_is_removed_and_the_entry_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, vendor, clock = tmp_path / "ledger.jsonl", SlowVendor(), Clock()

    async def scenario() -> None:
        fact_id = await _failed_write(path, vendor, clock)
        vendor.finish_adds()
        resumed = await _resume_after_restart(path, vendor, clock)
        assert resumed.finished[fact_id].removed_from == ["slow"] and _copies(vendor) == []
        (why,) = resumed.left.values()
        assert why.startswith("slow: removed a copy the failed put left, but the put it did")
        # A retried request of that put may still land: the entry waits out the bound.
        assert len(Outbox(f"{path}.outbox").pending()) == 1
        clock.now += timedelta(seconds=SETTLE)
        resumed = await _resume_after_restart(path, vendor, clock)
        assert not resumed.left and Outbox(f"{path}.outbox").pending() == []

    with caplog.at_level(logging.WARNING):
        anyio.run(scenario)
    assert any("may still land" in r.getMessage() for r in caplog.records)


def test_a_store_that_declares_no_settle_time_settles_as_before(tmp_path: Path) -> None:
    path, vendor, clock = tmp_path / "ledger.jsonl", SlowVendor(), Clock()

    async def scenario() -> None:
        await _failed_write(path, vendor, clock)
        with Ledger(str(path), clock=clock) as ledger:
            store = InProcessStore("slow", vendor)  # the same name, without settle_seconds
            custody = Custody(ledger, StoreSet([store], FAST), outbox=f"{path}.outbox")
            resumed = await custody.resume()
        assert resumed is not None and not resumed.left
        assert Outbox(f"{path}.outbox").pending() == []

    anyio.run(scenario)


@pytest.mark.parametrize(
    ("declared", "seconds"),
    [
        (None, 0.0),
        (30, 30.0),
        (2.5, 2.5),
        (-1, 0.0),
        (True, 0.0),
        ("600", 0.0),
        (float("nan"), 0.0),
    ],
)
def test_settle_seconds_of_reads_only_a_positive_number(declared: Any, seconds: float) -> None:
    store = InProcessStore()
    if declared is not None:
        store.settle_seconds = declared  # type: ignore[attr-defined]
    assert settle_seconds_of(store) == seconds


def _request() -> httpx.Request:
    return httpx.Request("POST", "https://vendor.example/add")


def _status(code: int) -> httpx.HTTPStatusError:
    response = httpx.Response(code, request=_request())
    return httpx.HTTPStatusError("failed", request=_request(), response=response)


def _wrapped(exc: BaseException) -> StoreError:
    try:
        raise StoreError("s", "put failed") from exc
    except StoreError as error:
        return error


@pytest.mark.parametrize(
    ("failure", "open_"),
    [
        (httpx.ConnectError("refused"), False),
        (httpx.ConnectTimeout("no connection"), False),
        (httpx.ReadTimeout("timed out"), True),
        (httpx.RemoteProtocolError("dropped"), True),
        (_status(422), False),
        (_status(504), True),
        (_wrapped(httpx.ConnectError("refused")), False),
        (_wrapped(_status(404)), False),
        (_wrapped(httpx.ReadTimeout("timed out")), True),
        (asyncio.CancelledError(), True),
    ],
)
def test_may_have_landed_reads_the_failure_and_its_causes(
    failure: BaseException, open_: bool
) -> None:
    assert may_have_landed(failure) is open_


def test_may_have_landed_by_status_or_an_sdks_own_error() -> None:
    assert may_have_landed(status=500) and not may_have_landed(status=409)

    class SdkError(Exception):
        status = 503

    def status_of(exc: BaseException) -> int | None:
        return exc.status if isinstance(exc, SdkError) else None

    assert may_have_landed(_wrapped(SdkError()), status_of=status_of)
    SdkError.status = 400
    assert not may_have_landed(_wrapped(SdkError()), status_of=status_of)


def test_unanswered_notes_only_what_may_have_landed_and_doubts_until_settled() -> None:
    now = [0.0]
    record = Unanswered(10.0, clock=lambda: now[0])
    with pytest.raises(httpx.ConnectError), record.sending("never-sent"):
        raise httpx.ConnectError("refused")
    with pytest.raises(httpx.ReadTimeout), record.sending("open"):
        raise httpx.ReadTimeout("timed out")
    now[0] = 4.0
    assert record.doubt("never-sent", []) is None
    assert record.doubt("open", []) == 4.0
    assert record.doubt("open", ["copy"]) is None  # a copy turned up: the write landed
    assert record.doubt("open", []) is None
    with pytest.raises(httpx.ReadTimeout), record.sending("late"):
        raise httpx.ReadTimeout("timed out")
    now[0] = 14.0
    assert record.doubt("late", []) is None  # settle_seconds passed
