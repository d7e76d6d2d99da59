"""What Zep finishes after the store stopped waiting: what is Zep's own.

The shared scenarios for an add (a late add is never "no copy left", the doubt ends after
``add_settle_seconds``, a 4xx leaves none) are the conformance rules ``ST-4.2-late*``, run in
``test_conformance.py``. Here: which of the SDK's failures leave an add open, a delete task
still running when ``wait_seconds`` ran out, which keeps the episode visible to a rebuilt store,
and the setting the settle time comes from.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from agent_custody_state.stores.base import settle_seconds_of
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


def test_the_store_declares_its_settle_time(make_store: MakeStore) -> None:
    # ``resume`` after a restart reads it to keep a failed put's cleanup owed that long.
    assert settle_seconds_of(make_store()) == 600.0
    assert settle_seconds_of(make_store(add_settle_seconds=5)) == 5.0
    assert settle_seconds_of(make_store(add_settle_seconds=0)) == 0.0
