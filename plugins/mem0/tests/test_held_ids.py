"""``held_ids``: the memories a failed put may have left, by the ``factId`` metadata filter."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_custody_state.stores import StoreSet, StoreWriteError, custody_metadata, fact_text
from agent_custody_state_conformance.stores import TimesOutAfterStoring, make_fact
from agent_custody_state_mem0.store import Mem0Store
from agent_custody_state_mem0.testing import FakeMem0

pytestmark = pytest.mark.anyio
MakeStore = Callable[..., Mem0Store]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_memory_merged_into_another_facts_is_never_named(
    fake: FakeMem0, make_store: MakeStore
) -> None:
    store = make_store()
    first, second = make_fact(), make_fact()
    first_id = await store.put(first)
    # A plain add of the second fact lands in the first one's memory (mem0's de-duplication):
    # cleaning up after the second fact must not delete the first one's memory.
    merged = store.backend.add(fact_text(second), custody_metadata(second))
    assert merged.memory_id == first_id
    assert await store.held_ids(second) == []
    assert await store.held_ids(first) == [first_id]


async def test_a_timed_out_marked_add_is_cleaned_and_the_other_fact_kept(
    fake: FakeMem0, make_store: MakeStore
) -> None:
    store = make_store()
    first, second = make_fact(), make_fact()
    first_id = await store.put(first)
    with pytest.raises(StoreWriteError) as caught:
        await StoreSet([TimesOutAfterStoring(store)]).put_all(second)  # type: ignore[list-item]
    assert caught.value.compensation == {"mem0": "removed a copy the failed put left"}
    assert list(fake.items) == [first_id]
