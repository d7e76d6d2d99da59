"""The Zep store through the real ``zep-cloud`` SDK on the v4 fake: the episode it writes, the
graph it resolves, the delete task it awaits (and how long), the removal checks, the errors."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from conftest import API_KEY
from zep_cloud import Zep

from agent_custody_state.ledger.model import Source
from agent_custody_state.stores import StoreError, custody_metadata
from agent_custody_state_conformance.stores import AWKWARD_VALUE, make_fact
from agent_custody_state_zep.store import ZepStore
from agent_custody_state_zep.testing import FakeZep

pytestmark = pytest.mark.anyio
MakeStore = Callable[..., ZepStore]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_put_writes_one_json_episode(
    fake: FakeZep, graph: str, make_store: MakeStore
) -> None:
    store = make_store(source_description="custody ledger")
    fact = make_fact(value={"tier": "pro", "seats": 5})
    episode_uuid = await store.put(fact)

    (add,) = fake.requests_for("add")
    assert add.path == f"/api/v4/graphs/{graph}/episodes"
    assert add.headers["authorization"] == f"Api-Key {API_KEY}"
    body = add.json()
    assert body["type"] == "json"
    assert json.loads(body["data"]) == {
        "subject": fact.subject, "predicate": fact.predicate, "value": fact.value,
        **custody_metadata(fact),
    }  # fmt: skip
    assert body["metadata"] == custody_metadata(fact)
    assert body["source_description"] == "custody ledger"
    assert body["reference_time"] == fact.valid_from
    assert fake.items[episode_uuid]["graph_uuid"] == graph


async def test_metadata_stays_within_zep_limits(fake: FakeZep, make_store: MakeStore) -> None:
    store = make_store()
    claimed = make_fact(provenance="claimed", source=Source(None))
    episode_uuid = await store.put(claimed)
    metadata = fake.items[episode_uuid]["metadata"]
    assert "receiptId" not in metadata  # None is not a value Zep accepts
    assert len(metadata) <= 10
    assert all(isinstance(v, str | int | float | bool) for v in metadata.values())
    assert json.loads(fake.items[episode_uuid]["content"])["receiptId"] is None


async def test_unicode_survives_within_the_cap(fake: FakeZep, make_store: MakeStore) -> None:
    value = {"name": AWKWARD_VALUE["name"], "nested": AWKWARD_VALUE["nested"]}
    fact = make_fact(subject="user:zoë", value=value)
    episode_uuid = await make_store().put(fact)
    assert json.loads(fake.items[episode_uuid]["content"])["value"] == value
    assert "\\u" not in fake.requests_for("add")[0].json()["data"]  # sent as UTF-8, not escapes


async def test_a_fact_over_the_episode_cap_is_refused_before_sending(
    fake: FakeZep, make_store: MakeStore
) -> None:
    store = make_store(name="graph")
    fact = make_fact(value="x" * 10_000)
    with pytest.raises(StoreError) as caught:
        await store.put(fact)
    assert caught.value.store == "graph"
    assert (
        "Zep accepts at most 10000" in caught.value.message and fact.fact_id in caught.value.message
    )
    assert fake.requests_for("add") == []


async def test_user_graph_is_resolved_once(fake: FakeZep, make_store: MakeStore) -> None:
    client = Zep(api_key=API_KEY, base_url=fake.url + "/api/v4")
    user = client.user.create(user_id="alice")
    store = make_store(user_id="alice")
    first = await store.put(make_fact())
    await store.put(make_fact())
    assert len(fake.requests_for("lookup_graph")) == 1
    assert fake.requests_for("lookup_graph")[0].json() == {"user_id": "alice"}
    assert fake.items[first]["user_uuid"] == user.uuid_


async def test_legacy_graph_id_is_resolved(
    fake: FakeZep, graph: str, make_store: MakeStore
) -> None:
    fake.graphs[graph]["graph_id"] = "support-kb"
    episode_uuid = await make_store(graph_id="support-kb").put(make_fact())
    assert fake.items[episode_uuid]["graph_uuid"] == graph


async def test_an_unknown_user_is_named(make_store: MakeStore) -> None:
    store = make_store(user_id="nobody")
    with pytest.raises(StoreError, match="Zep has no graph for user_id 'nobody'"):
        await store.put(make_fact())


async def test_remove_awaits_the_delete_task(fake: FakeZep, make_store: MakeStore) -> None:
    fake.task_polls_pending = 3
    store = make_store()
    fact = make_fact()
    episode_uuid = await store.put(fact)
    await store.remove(episode_uuid, fact)
    assert episode_uuid not in fake.items  # the task completed before remove returned
    assert len(fake.requests_for("task")) == 4
    assert await store.verify_removed(episode_uuid, fact) is True


async def test_the_wait_for_a_delete_is_bounded(fake: FakeZep, make_store: MakeStore) -> None:
    fake.task_polls_pending = 10**6
    store = make_store(wait_seconds=0.3)
    fact = make_fact()
    episode_uuid = await store.put(fact)
    started = time.monotonic()
    await store.remove(episode_uuid, fact)  # accepted, still running: not a failure
    assert 0.3 <= time.monotonic() - started < 2
    assert await store.verify_removed(episode_uuid, fact) is False  # -> stillIndexed
    fake.complete_tasks()
    assert await store.verify_removed(episode_uuid, fact) is True


@pytest.mark.parametrize("outcome", ["failed", "partial"])
async def test_a_delete_task_that_does_not_succeed_fails_the_removal(
    fake: FakeZep, make_store: MakeStore, outcome: str
) -> None:
    store = make_store()
    fact = make_fact()
    episode_uuid = await store.put(fact)
    fake.task_outcome = outcome
    with pytest.raises(StoreError, match=f"ended {outcome}: fake task {outcome}") as caught:
        await store.remove(episode_uuid, fact)
    assert caught.value.store == "zep"
    assert episode_uuid in fake.items
    assert await store.verify_removed(episode_uuid, fact) is False


async def test_remove_of_a_missing_episode_is_not_an_error(
    fake: FakeZep, make_store: MakeStore
) -> None:
    await make_store().remove("6f1d0bde-2a64-4c2b-9a51-000000000000", make_fact())
    assert len(fake.requests_for("delete")) == 1
    assert fake.requests_for("task") == []


async def test_verify_asks_by_fact_id_and_by_episode(
    fake: FakeZep, graph: str, make_store: MakeStore
) -> None:
    store = make_store()
    fact = make_fact()
    episode_uuid = await store.put(fact)
    await store.remove(episode_uuid, fact)
    assert await store.verify_removed(episode_uuid, fact) is True
    listing = fake.requests_for("list")[-1].json()
    assert listing["filters"] == {
        "metadata_filters": {
            "type": "and",
            "filters": [{"property_name": "factId", "operator": "eq", "value": fact.fact_id}],
        }
    }
    edges = fake.requests_for("search_edges")[-1].json()
    assert edges["filters"] == {"episode_uuids": [episode_uuid]}


async def test_an_edge_citing_the_episode_keeps_it_indexed(
    fake: FakeZep, make_store: MakeStore
) -> None:
    """An edge derived from two episodes outlives the deletion of one of them."""
    store = make_store()
    fact, other = make_fact(), make_fact(subject="acct:43")
    episode_uuid, other_uuid = await store.put(fact), await store.put(other)
    with fake.lock:
        edge = next(e for e in fake.edges.values() if e["episode_uuids"] == [episode_uuid])
        edge["episode_uuids"].append(other_uuid)
    await store.remove(episode_uuid, fact)
    assert await store.verify_removed(episode_uuid, fact) is False


async def test_errors_are_one_line_and_name_the_store(fake: FakeZep, make_store: MakeStore) -> None:
    store = make_store(name="graph", max_retries=0)
    fact = make_fact()
    fake.fail_on = {"add"}
    with pytest.raises(StoreError) as caught:
        await store.put(fact)
    assert caught.value.store == "graph"
    assert caught.value.message == (
        "episode add failed: ZepRequestError: HTTP 500 internal_error: Internal Server Error"
    )
    fake.fail_on = set()
    fake.api_key = "rotated"
    with pytest.raises(StoreError, match="HTTP 401 unauthorized: Unauthorized"):
        await store.verify_removed("6f1d0bde-2a64-4c2b-9a51-000000000000", fact)


async def test_sdk_retries_recover_from_a_transient_error(
    fake: FakeZep, make_store: MakeStore
) -> None:
    fake.throttle_adds = 1  # a 429 stored nothing; a 5xx may have: test_review21_retry.py
    episode_uuid = await make_store(max_retries=1).put(make_fact())
    assert episode_uuid in fake.items
    assert len(fake.requests_for("add")) == 2
