"""What Zep finishes after the store stopped waiting: never reported as absent.

The fake's ``store_later`` answers 504 before Zep created the episode (a gateway that gave up
while Zep was still handling the add); ``finish_adds()`` is Zep catching up. A delete task still
running when ``wait_seconds`` ran out keeps the episode visible, to a rebuilt store too.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from agent_custody_state.plugin import Unanswered
from agent_custody_state.stores import StoreError, StoreSet, StoreWriteError
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_zep.api import ZepRequestError
from agent_custody_state_zep.store import ZepStore
from agent_custody_state_zep.testing import FakeZep
from agent_custody_state_zep.unanswered import may_have_landed

pytestmark = pytest.mark.anyio

MakeStore = Callable[..., ZepStore]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_an_add_still_running_in_zep_is_not_reported_as_no_copy(
    fake: FakeZep, make_store: MakeStore
) -> None:
    store, fact = make_store(max_retries=0), make_fact()
    fake.store_later = 1
    with pytest.raises(StoreWriteError) as failed:
        await StoreSet([store]).put_all(fact)
    assert "no copy left" not in str(failed.value)
    assert "zep: may hold a copy (looking it up failed: an add of fact" in str(failed.value)
    assert failed.value.owed == ["zep"]  # the outbox keeps the cleanup for the next start
    with pytest.raises(StoreError, match="ended without Zep's answer"):
        await store.held_ids(fact)
    fake.finish_adds()  # Zep creates the episode after the client gave up
    (episode,) = await store.held_ids(fact)  # found: the add is over
    await store.remove(episode, fact)
    assert await store.held_ids(fact) == []


async def test_the_doubt_ends_after_add_settle_seconds(
    fake: FakeZep, make_store: MakeStore
) -> None:
    now = [100.0]
    store, fact = make_store(max_retries=0), make_fact()
    store.unanswered = Unanswered(60.0, clock=lambda: now[0])
    fake.store_later = 1
    with pytest.raises(StoreError):
        await store.put(fact)
    now[0] += 59.0
    with pytest.raises(StoreError, match="look again 1s later"):
        await store.held_ids(fact)
    now[0] += 1.0
    assert await store.held_ids(fact) == []  # the add never landed within the bound


async def test_a_refused_add_leaves_no_doubt(fake: FakeZep, make_store: MakeStore) -> None:
    store, fact = make_store(max_retries=0), make_fact()
    fake.max_episode_chars = 10  # Zep answers 400: nothing created
    with pytest.raises(StoreError, match="400"):
        await store.put(fact)
    assert await store.held_ids(fact) == []


def test_which_failures_leave_the_add_open() -> None:
    assert may_have_landed(httpx.ReadTimeout("read"))
    assert not may_have_landed(httpx.ConnectError("refused"))
    assert may_have_landed(ZepRequestError("HTTP 504", status=504))
    assert not may_have_landed(ZepRequestError("HTTP 400", status=400))


async def test_a_delete_still_running_is_seen_by_a_rebuilt_store(
    fake: FakeZep, make_store: MakeStore
) -> None:
    store, fact = make_store(wait_seconds=0.2), make_fact()
    episode = await store.put(fact)
    fake.task_polls_pending = 10_000
    await store.remove(episode, fact)  # gives up waiting; the task goes on in Zep
    rebuilt = make_store()
    assert await rebuilt.verify_removed(episode, fact) is False
    assert await rebuilt.held_ids(fact) == [episode]
    fake.complete_tasks()
    assert await rebuilt.verify_removed(episode, fact) is True
