"""A passage write Letta finishes after the store stopped waiting is never reported as absent.

The fake's ``store_later`` answers 504 before the server stored the passage (a gateway that gave
up while Letta was still embedding); ``finish_adds()`` is the server catching up.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_custody_state.plugin import Unanswered
from agent_custody_state.stores import StoreError, StoreSet, StoreWriteError
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_letta.store import LettaStore
from agent_custody_state_letta.testing import FakeLetta

pytestmark = pytest.mark.anyio

MakeStore = Callable[..., LettaStore]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _tagged(fake: FakeLetta, fact_id: str) -> list[str]:
    with fake.lock:
        return [p["id"] for p in fake.items.values() if f"fact:{fact_id}" in p["tags"]]


async def test_a_write_still_running_on_the_server_is_not_reported_as_no_copy(
    fake: FakeLetta, make_store: MakeStore
) -> None:
    store, fact = make_store(), make_fact()
    fake.store_later = 1
    with pytest.raises(StoreWriteError) as failed:
        await StoreSet([store]).put_all(fact)
    assert "no copy left" not in str(failed.value)
    assert "letta: may hold a copy (looking it up failed: a write of fact" in str(failed.value)
    assert failed.value.owed == ["letta"]  # the outbox keeps the cleanup for the next start
    with pytest.raises(StoreError, match="ended without Letta's answer"):
        await store.held_ids(fact)
    fake.finish_adds()  # the server finishes the insert after the client gave up
    (passage,) = _tagged(fake, fact.fact_id)
    assert await store.held_ids(fact) == [passage]  # found: the write is over
    await store.remove(passage, fact)
    assert await store.held_ids(fact) == []


async def test_the_doubt_ends_after_write_settle_seconds(
    fake: FakeLetta, make_store: MakeStore
) -> None:
    now = [100.0]
    store, fact = make_store(), make_fact()
    store.unanswered = Unanswered(60.0, clock=lambda: now[0])
    fake.store_later = 1
    with pytest.raises(StoreError):
        await store.put(fact)
    now[0] += 59.0
    with pytest.raises(StoreError, match="look again 1s later"):
        await store.held_ids(fact)
    now[0] += 1.0
    assert await store.held_ids(fact) == []  # the write never landed within the bound


async def test_a_refused_write_leaves_no_doubt(fake: FakeLetta, make_store: MakeStore) -> None:
    missing = "agent-00000000-0000-4000-8000-000000000000"
    store, fact = make_store(agent_id=missing), make_fact()
    with pytest.raises(StoreError, match="404"):
        await store.put(fact)  # Letta answered: no such agent, nothing written
    fake.add_agent(missing)
    assert await store.held_ids(fact) == []


def test_the_setting_reaches_the_store(make_store: MakeStore) -> None:
    assert make_store().unanswered.settle_seconds == 600.0
    assert make_store(write_settle_seconds=5).unanswered.settle_seconds == 5.0
