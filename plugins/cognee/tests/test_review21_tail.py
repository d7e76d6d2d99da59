"""An add Cognee finishes after the store stopped waiting: what is Cognee's own.

The shared scenarios (a late add is never "no copy left", the doubt ends after
``add_settle_seconds``, a 4xx leaves none) are the conformance rules ``ST-4.2-late*``, run in
``test_conformance.py``. Here: which failures leave an add open, an add Cognee accepts in
the background without naming the item, and the setting the settle time comes from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx
import pytest

from agent_custody_state.plugin import may_have_landed
from agent_custody_state.stores import StoreError
from agent_custody_state.stores.base import settle_seconds_of
from agent_custody_state_cognee.store import CogneeStore
from agent_custody_state_cognee.testing import FakeCognee
from agent_custody_state_conformance.fakeserver import json_reply
from agent_custody_state_conformance.stores import make_fact

pytestmark = pytest.mark.anyio

MakeStore = Callable[..., CogneeStore]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_which_failures_leave_the_add_open() -> None:
    assert may_have_landed(httpx.ReadTimeout("read"))
    assert may_have_landed(httpx.RemoteProtocolError("closed"))
    assert not may_have_landed(httpx.ConnectError("refused"))
    assert may_have_landed(status=502) and not may_have_landed(status=409)


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


def test_the_store_declares_its_settle_time(make_store: MakeStore) -> None:
    # ``resume`` after a restart reads it to keep a failed put's cleanup owed that long.
    assert settle_seconds_of(make_store()) == 600.0
    assert settle_seconds_of(make_store(add_settle_seconds=5)) == 5.0
    assert settle_seconds_of(make_store(add_settle_seconds=0)) == 0.0
