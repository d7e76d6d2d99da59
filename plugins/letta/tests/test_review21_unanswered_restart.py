"""A passage write Letta finishes after a restart is still cleaned up, not left unowed.

The first process's write gets a 504 before Letta stored the passage (the fake's
``store_later``); its cleanup is owed in the outbox. The process "restarts": a new ledger
object, store and ``Custody`` on the same files. The new store has no record of the write, so
only its ``settle_seconds`` (``write_settle_seconds``) keeps ``resume`` from settling the entry
on an empty search before Letta finished (``finish_adds``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.stores import StoreSet, StoreWriteError, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.outbox import Outbox, Resumed
from agent_custody_state_letta.store import LettaStore
from agent_custody_state_letta.testing import FakeLetta

pytestmark = pytest.mark.anyio

MakeStore = Callable[..., LettaStore]
FAST = VerifyPolicy(attempts=2, delay=0)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _passages(fake: FakeLetta, fact_id: str) -> list[str]:
    with fake.lock:
        return [p["id"] for p in fake.items.values() if f"fact:{fact_id}" in p["tags"]]


async def test_a_restart_before_letta_finished_keeps_the_cleanup_owed(
    fake: FakeLetta, make_store: MakeStore, tmp_path: Path
) -> None:
    path, outbox = str(tmp_path / "ledger.jsonl"), str(tmp_path / "ledger.jsonl.outbox")
    now = [datetime(2026, 12, 7, 12, 0, tzinfo=UTC)]

    async def start() -> Resumed | None:
        with Ledger(path, clock=lambda: now[0]) as ledger:
            store = make_store(write_settle_seconds=120)
            return await Custody(ledger, StoreSet([store], FAST), outbox=outbox).resume()

    fake.store_later = 1
    with Ledger(path, clock=lambda: now[0]) as ledger:
        custody = Custody(
            ledger, StoreSet([make_store(write_settle_seconds=120)], FAST), outbox=outbox
        )
        with pytest.raises(StoreWriteError) as failed:
            await custody.write(AssertRequest("acct:42", "plan", "pro", "org", "agent"))
    assert failed.value.owed == ["letta"]
    (owed,) = Outbox(outbox).pending()

    now[0] += timedelta(seconds=30)
    resumed = await start()  # the new store's search finds nothing: Letta has not finished
    assert resumed is not None and "may still land for 90s more" in resumed.left[owed.entry]
    assert Outbox(outbox).pending() == [owed]

    fake.finish_adds()  # Letta stores the passage after the restart's lookup
    assert len(_passages(fake, owed.fact_id)) == 1
    now[0] += timedelta(seconds=120)
    resumed = await start()
    assert resumed is not None and not resumed.left
    assert resumed.finished[owed.fact_id].removed_from == ["letta"]
    assert _passages(fake, owed.fact_id) == []
    assert Outbox(outbox).pending() == []


def test_the_store_declares_its_settle_time(make_store: MakeStore) -> None:
    assert make_store().settle_seconds == 600.0
    assert make_store(write_settle_seconds=5).settle_seconds == 5.0
