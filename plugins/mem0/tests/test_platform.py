"""The mem0 store on the hosted platform API, through the real ``MemoryClient`` on the fake:
what goes over the wire, the de-duplication guard, the asynchronous add path, the removal
checks and the failures."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from conftest import API_KEY
from mem0 import MemoryClient

from agent_custody_state.stores import StoreError, custody_metadata, fact_text
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_mem0.backend import Added, EventState, Record
from agent_custody_state_mem0.store import Mem0Store, marked_text
from agent_custody_state_mem0.testing import FakeMem0

pytestmark = pytest.mark.anyio
MakeStore = Callable[..., Mem0Store]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def texts(fake: FakeMem0) -> list[str]:
    return [r.json()["messages"][0]["content"] for r in fake.requests_for("add")]


async def test_put_is_one_verbatim_direct_import(fake: FakeMem0, make_store: MakeStore) -> None:
    store = make_store(agent_id="billing-bot", app_id="support")
    fact = make_fact(value={"tier": "pro"})
    memory_id = await store.put(fact)

    (add,) = fake.requests_for("add")
    body = add.json()
    assert add.headers["authorization"] == f"Token {API_KEY}"
    assert body["messages"] == [{"role": "user", "content": fact_text(fact)}]
    assert body["infer"] is False
    assert body["metadata"] == custody_metadata(fact)
    assert (body["user_id"], body["agent_id"], body["app_id"]) == (
        "u-test",
        "billing-bot",
        "support",
    )
    assert fake.items[memory_id]["memory"] == fact_text(fact)


async def test_equal_text_gets_a_memory_of_its_own(fake: FakeMem0, make_store: MakeStore) -> None:
    store = make_store()
    first, second = make_fact(), make_fact()
    first_id = await store.put(first)
    second_id = await store.put(second)

    assert first_id != second_id
    # The platform merged the second add into the first memory; the store noticed and re-added
    # the fact with its id marker, leaving the first memory as it was.
    assert texts(fake) == [fact_text(first), fact_text(second), marked_text(second)]
    assert fake.items[first_id]["memory"] == fact_text(first)
    assert fake.items[first_id]["metadata"]["factId"] == first.fact_id
    assert fake.items[second_id]["memory"] == f"{fact_text(second)} (fact {second.fact_id})"
    assert fake.items[second_id]["metadata"]["factId"] == second.fact_id

    await store.remove(first_id, first)
    assert second_id in fake.items
    assert await store.verify_removed(first_id, first) is True
    assert await store.verify_removed(second_id, second) is False


async def test_no_marker_when_nothing_was_merged(fake: FakeMem0, make_store: MakeStore) -> None:
    fake.dedupe = False
    store = make_store()
    first, second = make_fact(), make_fact()
    assert await store.put(first) != await store.put(second)
    assert texts(fake) == [fact_text(first)] * 2


async def test_the_same_fact_put_again_keeps_its_memory(
    fake: FakeMem0, make_store: MakeStore
) -> None:
    store = make_store()
    fact = make_fact()
    assert await store.put(fact) == await store.put(fact)
    assert texts(fake) == [fact_text(fact)] * 2  # the merge is with itself: no marker


async def test_a_foreign_memory_with_the_same_text_is_not_taken_over(
    fake: FakeMem0, make_store: MakeStore
) -> None:
    fact = make_fact()
    client = MemoryClient(api_key=API_KEY, host=fake.url)
    try:
        foreign = client.add(fact_text(fact), user_id="u-test", infer=False)["results"][0]["id"]
    finally:
        client.client.close()
    store = make_store()
    memory_id = await store.put(fact)
    assert memory_id != foreign
    assert fake.items[memory_id]["memory"] == marked_text(fact)
    await store.remove(memory_id, fact)
    assert foreign in fake.items


async def test_unique_text_marks_every_fact(fake: FakeMem0, make_store: MakeStore) -> None:
    store = make_store(unique_text=True)
    fact = make_fact()
    memory_id = await store.put(fact)
    assert texts(fake) == [marked_text(fact)]
    assert fake.requests_for("get") == []  # nothing to check: the text cannot collide
    assert fake.items[memory_id]["metadata"]["factId"] == fact.fact_id


async def test_pending_add_is_polled_until_it_succeeds(
    fake: FakeMem0, make_store: MakeStore
) -> None:
    fake.async_add = True
    fake.event_polls_pending = 3
    store = make_store()
    fact = make_fact()
    memory_id = await store.put(fact)
    assert fake.items[memory_id]["metadata"]["factId"] == fact.fact_id
    polls = fake.requests_for("event")
    assert len(polls) == 4
    assert polls[0].headers["authorization"] == f"Token {API_KEY}"


async def test_pending_add_wait_is_bounded(fake: FakeMem0, make_store: MakeStore) -> None:
    fake.async_add = True
    fake.event_polls_pending = 10**6
    store = make_store(event_wait_seconds=0.3)
    fact = make_fact()
    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        await store.put(fact)
    assert 0.3 <= time.monotonic() - started < 2
    assert caught.value.store == "mem0"
    assert "still pending after 0.3s" in caught.value.message
    assert fact.fact_id in caught.value.message  # how to find the memory should it appear


async def test_failed_add_event_is_a_refusal(fake: FakeMem0, make_store: MakeStore) -> None:
    fake.async_add = True
    fake.event_outcome = "FAILED"
    store = make_store()
    with pytest.raises(StoreError, match="add event .* failed: Memory processing failed"):
        await store.put(make_fact())
    assert fake.items == {}


async def test_event_poll_error_is_a_refusal(fake: FakeMem0, make_store: MakeStore) -> None:
    fake.async_add = True
    fake.fail_on = {"event"}
    store = make_store()
    with pytest.raises(StoreError, match=r"add \(event poll\) failed: HTTPStatusError"):
        await store.put(make_fact())


async def test_remove_of_a_missing_memory_is_not_an_error(
    fake: FakeMem0, make_store: MakeStore
) -> None:
    store = make_store()
    await store.remove("6f1d0bde-2a64-4c2b-9a51-000000000000", make_fact())
    assert len(fake.requests_for("delete")) == 1


async def test_verify_sees_a_second_copy_by_fact_id(fake: FakeMem0, make_store: MakeStore) -> None:
    """A copy carrying the fact id (a retried add, say) keeps the fact "still indexed"."""
    fake.dedupe = False
    store = make_store()
    fact = make_fact()
    memory_id = await store.put(fact)
    await store.put(fact)  # the copy
    await store.remove(memory_id, fact)
    assert await store.verify_removed(memory_id, fact) is False
    listing = fake.requests_for("list")[-1].json()
    assert listing["filters"] == {
        "AND": [{"user_id": "u-test"}, {"metadata": {"factId": fact.fact_id}}]
    }


async def test_verify_searches_without_threshold(fake: FakeMem0, make_store: MakeStore) -> None:
    store = make_store(agent_id="bot")
    fact = make_fact()
    memory_id = await store.put(fact)
    await store.remove(memory_id, fact)
    assert await store.verify_removed(memory_id, fact) is True
    search = fake.requests_for("search")[-1].json()
    assert search["threshold"] == 0.0
    assert search["query"] == fact_text(fact)
    assert search["filters"] == {"AND": [{"user_id": "u-test"}, {"agent_id": "bot"}]}


class _SearchOnly:
    """A backend whose only trace of the fact is a search hit (an index behind the store)."""

    def __init__(self, hit: Record) -> None:
        self.hit = hit

    def add(self, text: str, metadata: dict[str, Any]) -> Added:
        raise NotImplementedError

    def event(self, event_id: str) -> EventState:
        raise NotImplementedError

    def get(self, memory_id: str) -> Record | None:
        return None

    def delete(self, memory_id: str) -> None:
        return None

    def by_fact(self, fact_id: str) -> list[Record]:
        return []

    def search(self, text: str) -> list[Record]:
        return [self.hit]

    def close(self) -> None:
        return None


@pytest.mark.parametrize(
    ("hit", "gone"),
    [
        ({"id": "m-1", "metadata": {}}, False),
        ({"id": "m-other", "metadata": {"factId": "f-1"}}, False),
        ({"id": "m-other", "metadata": {"factId": "f-other"}}, True),
    ],
)
async def test_verify_needs_the_search_to_miss(hit: Record, gone: bool) -> None:
    store = Mem0Store("mem0", _SearchOnly(hit))
    assert await store.verify_removed("m-1", make_fact(fact_id="f-1")) is gone


async def test_errors_name_the_store_and_the_call(fake: FakeMem0, make_store: MakeStore) -> None:
    store = make_store(name="recall")
    fact = make_fact()
    memory_id = await store.put(fact)
    fake.fail_on = {"delete"}
    with pytest.raises(StoreError) as caught:
        await store.remove(memory_id, fact)
    assert caught.value.store == "recall"
    assert caught.value.message.startswith("delete failed: MemoryError")
    fake.fail_on = {"search"}
    with pytest.raises(StoreError, match="search failed"):
        await store.verify_removed("gone-id", make_fact())


async def test_a_failed_read_back_refuses_the_write(fake: FakeMem0, make_store: MakeStore) -> None:
    store = make_store()
    fact = make_fact()
    fake.fail_on = {"get"}
    with pytest.raises(StoreError) as caught:
        await store.put(fact)
    assert caught.value.message.startswith("reading back memory ")
    assert f"it carries factId {fact.fact_id}" in caught.value.message
    assert len(fake.items) == 1  # left alone: it might have been another fact's memory


async def test_a_bad_api_key_is_reported_at_first_use(
    fake: FakeMem0, make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store()
    monkeypatch.setenv("ACS_TEST_MEM0_API_KEY", "wrong-key")
    wrong = make_store()
    with pytest.raises(StoreError, match=r"GET /v1/ping/ on http://127\.0\.0\.1:\d+\) failed"):
        await wrong.put(make_fact())
    assert await store.put(make_fact())  # built with the right key: unaffected
