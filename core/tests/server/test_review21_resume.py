"""Owed work finished while the server runs (``server/resumer.py``, ``[server] resume_every``).

The owed work is a failed write's cleanup (an outbox ``put`` entry): the in-process store takes
the put, then answers it with an error and goes down, so looking the copy up fails too and the
cleanup is owed. Before, only the next start finished it; the server now does within a period.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import AssertRequest, Ledger, serve_memory_http
from agent_custody_state.server.app import create_memory_server
from agent_custody_state.server.resumer import PeriodicResume, resuming
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.outbox import Outbox, resume
from agent_custody_state.stores.storeset import StoreWriteError

pytestmark = pytest.mark.anyio


def failing_put(store: InProcessStore) -> None:
    """The store keeps the next put's copy, then answers with an error and goes down."""
    insert = store.vendor.insert

    def insert_then_fail(record: dict[str, Any]) -> str:
        insert(record)
        store.vendor.insert = insert  # type: ignore[method-assign]
        store.vendor.fail = True
        raise RuntimeError("504 gateway timeout")

    store.vendor.insert = insert_then_fail  # type: ignore[method-assign]


async def owe_a_cleanup(server: Any, store: InProcessStore) -> None:
    failing_put(store)
    request = AssertRequest(subject="s", predicate="p", value="v", space="org", actor="a")
    with pytest.raises(StoreWriteError, match="owed in the outbox"):
        await server.memory.custody.write(request)


def owed(path: Path) -> list[str]:
    return [o.operation for o in Outbox(path).pending()]


async def wait_for(condition: Any, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        await asyncio.sleep(0.02)
    return condition()


@pytest.fixture
def setup(tmp_path: Path) -> Any:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    store = InProcessStore("vectors")
    yield ledger, store, tmp_path / "ledger.jsonl.outbox"
    ledger.close()


async def test_the_server_finishes_an_owed_cleanup_once_the_store_is_back(
    setup: Any, caplog: pytest.LogCaptureFixture
) -> None:
    ledger, store, outbox = setup
    server = create_memory_server(
        ledger, stores=[store], outbox=outbox, require_gateway=False, resume_every=0.05
    )
    caplog.set_level(logging.INFO)
    async with server.resuming() as resumer:
        assert isinstance(resumer, PeriodicResume)
        await owe_a_cleanup(server, store)
        written = len(caplog.records)  # the failed write's own lines
        assert owed(outbox) == ["put"] and len(store.vendor.rows) == 1
        # The store stays down for several periods: still owed, and said once, not each time.
        assert await wait_for(lambda: resumer.passes >= 6)
        assert owed(outbox) == ["put"] and len(store.vendor.rows) == 1
        still = [r for r in caplog.records if "still owed" in r.getMessage()]
        assert len(still) == 1 and still[0].levelno == logging.WARNING
        passes = [r.getMessage() for r in caplog.records[written:] if r.levelno >= logging.WARNING]
        assert any("may hold a copy" in t for t in passes)  # the first pass says why
        assert len(passes) == len(set(passes)), passes  # and no pass after it repeats it
        store.vendor.fail = False  # back: the next pass removes the copy and settles
        assert await wait_for(lambda: not outbox.exists())
        assert store.vendor.rows == {}
        assert await wait_for(lambda: any("nothing is owed" in r.message for r in caplog.records))
    assert server.memory.custody.outbox is not None


async def test_a_stop_cuts_a_pass_that_hangs_and_the_work_stays_owed(setup: Any) -> None:
    ledger, store, outbox = setup
    server = create_memory_server(ledger, stores=[store], outbox=outbox, require_gateway=False)
    await owe_a_cleanup(server, store)
    store.vendor.fail = False
    started = asyncio.Event()

    async def hang(fact: Any) -> list[str]:
        started.set()
        await asyncio.sleep(60)
        return []

    store.held_ids = hang  # type: ignore[attr-defined]
    began = time.monotonic()
    async with resuming(server.memory.custody, 0.01, stop_seconds=0.2) as resumer:
        assert resumer is not None
        await asyncio.wait_for(started.wait(), 5)
    assert time.monotonic() - began < 3  # cut after stop_seconds, not after 60 s
    assert owed(outbox) == ["put"]  # what the cut pass did not finish stays owed


async def test_a_stop_between_passes_is_at_once_and_zero_starts_nothing(setup: Any) -> None:
    ledger, store, outbox = setup
    server = create_memory_server(ledger, stores=[store], outbox=outbox, resume_every=3600)
    began = time.monotonic()
    async with server.resuming() as resumer:
        assert resumer is not None
    assert time.monotonic() - began < 1
    async with resuming(server.memory.custody, 0) as nothing:
        assert nothing is None
    with pytest.raises(ValueError, match="resume_every"):
        create_memory_server(ledger, resume_every=-1)


def test_the_http_server_resumes_while_it_serves(setup: Any) -> None:
    ledger, store, outbox = setup
    running = serve_memory_http(
        ledger, port=0, stores=[store], outbox=outbox, require_gateway=False, resume_every=0.05
    )
    try:
        anyio.run(owe_a_cleanup, running.memory, store)
        store.vendor.fail = False
        deadline = time.monotonic() + 5
        while outbox.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not outbox.exists() and store.vendor.rows == {}
    finally:
        running.close()


async def test_a_pass_leaves_alone_an_entry_its_flow_settles_right_after_the_read(
    setup: Any,
) -> None:
    """A flow settling between a pass's read of the outbox and its in-flight check: the pass
    took the entry for one no flow had, removed the copy again and logged a crash that never
    was (seen under load: a forget a millisecond, a pass every half a millisecond)."""
    ledger, store, outbox_path = setup
    server = create_memory_server(ledger, stores=[store], outbox=outbox_path)
    custody = server.memory.custody
    request = AssertRequest(subject="s", predicate="p", value="v", space="org", actor="a")
    fact_id = (await custody.write(request)).event.fact_id
    fact = ledger.get(fact_id)
    assert fact is not None and fact.external
    outbox = custody.outbox
    assert outbox is not None
    owed_now = outbox.owe([fact], "forget", ledger.now())  # a forget's flow, in flight
    ledger.forget(fact_id=fact_id, actor="dpo", reason="gdpr")

    async def run(fn: Any, *args: Any) -> Any:
        result = fn(*args)
        if getattr(fn, "__func__", None) is Outbox.pending:
            outbox.settle(owed_now)  # the flow is done just after the pass read the outbox
        return result

    done = await resume(outbox, ledger, custody.stores, run)
    assert done.finished == {} and len(store.vendor.rows) == 1  # left to its flow
