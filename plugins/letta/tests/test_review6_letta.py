"""Sixth review: a create the server wrote but answered with an error must not leave a copy
that outlives the forget (the SDK's retry of it wrote a second passage)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from conftest import LettaBackdoor

from agent_custody_state.stores import StoreSet, StoreWriteError, VerifyPolicy
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_letta.store import LettaStore
from agent_custody_state_letta.testing import FakeLetta

pytestmark = pytest.mark.anyio

MakeStore = Callable[..., LettaStore]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_create_written_but_answered_504_leaves_no_passage(
    fake: FakeLetta, make_store: MakeStore, letta_backdoor: LettaBackdoor
) -> None:
    # The SDK's default retries: before the fix its retry wrote a second passage, the put
    # recorded only that one, and the first outlived the forget (stillIndexed forever).
    stores = StoreSet([make_store(max_retries=2)], VerifyPolicy(attempts=1, delay=0))
    fact = make_fact()
    fake.store_then_fail = 1
    with pytest.raises(StoreWriteError) as caught:
        await stores.put_all(fact)
    assert len(fake.requests_for("add")) == 1  # not retried
    assert caught.value.compensation == {"letta": "removed a copy the failed put left"}
    assert letta_backdoor.passages(fact.fact_id) == []


async def test_reads_and_deletes_are_still_retried(
    fake: FakeLetta, make_store: MakeStore, letta_backdoor: LettaBackdoor
) -> None:
    store = make_store(max_retries=1)
    fact = make_fact()
    external_id = await store.put(fact)
    fake.fail_next = 1
    await store.remove(external_id, fact)
    assert len(fake.requests_for("delete")) == 2
    assert letta_backdoor.passages(fact.fact_id) == []
