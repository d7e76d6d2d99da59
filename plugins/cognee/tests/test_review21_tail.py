"""An add Cognee finishes after the store stopped waiting is never reported as absent.

The fake's ``store_later`` answers 504 before the server stored the item (a gateway that gave up
while Cognee was still ingesting); ``finish_adds()`` is the server catching up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx
import pytest

from agent_custody_state.plugin import Unanswered, may_have_landed
from agent_custody_state.stores import StoreError, StoreSet, StoreWriteError
from agent_custody_state_cognee.store import CogneeStore
from agent_custody_state_cognee.testing import FakeCognee
from agent_custody_state_conformance.fakeserver import json_reply
from agent_custody_state_conformance.stores import make_fact

pytestmark = pytest.mark.anyio

MakeStore = Callable[..., CogneeStore]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_an_add_still_running_on_the_server_is_not_reported_as_no_copy(
    fake: FakeCognee, make_store: MakeStore
) -> None:
    store, fact = make_store(), make_fact()
    fake.store_later = 1
    with pytest.raises(StoreWriteError) as failed:
        await StoreSet([store]).put_all(fact)
    assert "no copy left" not in str(failed.value)
    assert "cognee: may hold a copy (looking it up failed:" in str(failed.value)
    assert failed.value.owed == ["cognee"]  # the outbox keeps the cleanup for the next start
    with pytest.raises(StoreError, match="without Cognee naming the item"):
        await store.held_ids(fact)
    fake.finish_adds()  # the server finishes ingesting after the client gave up
    (external_id,) = await store.held_ids(fact)  # found: the add is over
    await store.remove(external_id, fact)
    assert await store.held_ids(fact) == []


async def test_the_doubt_ends_after_add_settle_seconds(
    fake: FakeCognee, make_store: MakeStore
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
    assert await store.held_ids(fact) == []  # the add never landed within the bound


async def test_a_refused_add_leaves_no_doubt(fake: FakeCognee, make_store: MakeStore) -> None:
    store, fact = make_store(), make_fact()
    fake.api_key = "another-key"  # 401: Cognee answered, nothing stored
    with pytest.raises(StoreError, match="401"):
        await store.put(fact)
    fake.api_key = "test-key"
    assert await store.held_ids(fact) == []


def test_which_failures_leave_the_add_open() -> None:
    assert may_have_landed(httpx.ReadTimeout("read"))
    assert may_have_landed(httpx.RemoteProtocolError("closed"))
    assert not may_have_landed(httpx.ConnectError("refused"))
    assert may_have_landed(status=502) and not may_have_landed(status=409)


def test_the_setting_reaches_the_store(make_store: MakeStore) -> None:
    assert make_store().unanswered.settle_seconds == 600.0
    assert make_store(add_settle_seconds=5).unanswered.settle_seconds == 5.0


async def test_an_add_accepted_without_a_data_id_may_still_land(
    fake: FakeCognee, make_store: MakeStore
) -> None:
    # A server that runs the add in the background answers at once, with no data id, and the
    # listing does not show the item yet.
    store, fact = make_store(), make_fact()
    original = fake._add

    def in_background(request: Any, params: dict[str, str]) -> Any:
        fake.store_later = 1
        original(request, params)
        dataset = next(iter(fake.datasets.values()))
        return json_reply(200, {"status": "PipelineRunStarted", "dataset_id": dataset["id"]})

    fake._routes = [
        route if route.op != "add" else replace(route, handler=in_background)
        for route in fake._routes
    ]
    with pytest.raises(StoreError, match="reported no data id"):
        await store.put(fact)
    with pytest.raises(StoreError, match="without Cognee naming the item"):
        await store.held_ids(fact)
    fake.finish_adds()
    assert len(await store.held_ids(fact)) == 1
