"""The Zep v4 fake, driven through the real ``zep-cloud`` 4.x client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from zep_cloud.client import Zep
from zep_cloud.core.api_error import ApiError  # NB: zep_cloud.ApiError is the body model
from zep_cloud.errors import BadRequestError, NotFoundError, UnauthorizedError

from agent_custody_state_zep.testing import FakeZep

KEY = "test-key"
NO_RETRY: Any = {"max_retries": 0}


@pytest.fixture
def zep(fake: FakeZep) -> Iterator[Zep]:
    yield Zep(api_key=KEY, base_url=fake.url + "/api/v4")


@pytest.fixture
def graph(zep: Zep) -> str:
    created = zep.graph.create(name="custody", description="facts")
    assert created.uuid_
    return str(created.uuid_)


def _fact_filter(fact_id: str) -> dict[str, Any]:
    condition = {"property_name": "factId", "operator": "eq", "value": fact_id}
    return {"metadata_filters": {"type": "and", "filters": [condition]}}


def _add(zep: Zep, graph: str, fact_id: str = "f1", text: str = "alice likes tea") -> str:
    result = zep.graph.episode.add(
        graph,
        data=json.dumps({"subject": "alice", "predicate": "likes", "value": text}),
        type="json",
        metadata={"factId": fact_id, "space": "s1", "source": "agent-custody"},
        source_description="agent-custody",
    )
    assert result.episode is not None and result.task is not None
    assert result.episode.processed is False and result.task.status == "pending"
    return str(result.episode.uuid_)


def test_add_get_list_search_then_async_delete(fake: FakeZep, zep: Zep, graph: str) -> None:
    episode = _add(zep, graph)
    request = fake.requests_for("add")[0]
    assert request.headers["authorization"] == f"Api-Key {KEY}"
    assert request.path == f"/api/v4/graphs/{graph}/episodes"

    got = zep.graph.episode.get(graph, episode)
    assert got.metadata == {"factId": "f1", "space": "s1", "source": "agent-custody"}
    assert got.processed is True and got.graph_uuid == graph  # ingestion finished

    listed = list(zep.graph.episode.list(graph, filters=_fact_filter("f1")))
    assert [e.uuid_ for e in listed] == [episode]
    assert list(zep.graph.episode.list(graph, filters=_fact_filter("f2"))) == []

    hits = list(zep.graph.search_episodes(graph, query="alice likes tea"))
    assert hits[0].uuid_ == episode and hits[0].score is not None
    edges = list(zep.graph.search_edges(graph, query="alice"))
    assert edges and episode in (edges[0].episode_uuids or [])

    fake.task_polls_pending = 2
    deletion = zep.graph.episode.delete(graph, episode)
    assert deletion.task is not None and deletion.task.status == "pending"
    # Removal waits for the task: the episode is still readable meanwhile.
    assert zep.graph.episode.get(graph, episode).uuid_ == episode
    statuses = [zep.task.get(str(deletion.task.uuid_)).status for _ in range(3)]
    assert statuses == ["pending", "pending", "succeeded"]

    with pytest.raises(NotFoundError):
        zep.graph.episode.get(graph, episode)
    assert list(zep.graph.episode.list(graph, filters=_fact_filter("f1"))) == []
    assert all(
        episode not in (e.episode_uuids or []) for e in zep.graph.search_edges(graph, query="alice")
    )
    assert fake.deleted == [episode]


def test_failed_delete_task_keeps_the_episode(fake: FakeZep, zep: Zep, graph: str) -> None:
    episode = _add(zep, graph)
    fake.task_outcome = "failed"
    deletion = zep.graph.episode.delete(graph, episode)
    task = zep.task.get(str(deletion.task.uuid_)) if deletion.task else None
    assert task is not None and task.status == "failed" and task.error is not None
    assert zep.graph.episode.get(graph, episode).uuid_ == episode


def test_metadata_limits_are_enforced(zep: Zep, graph: str) -> None:
    with pytest.raises(BadRequestError):
        zep.graph.episode.add(graph, data="x", metadata={f"k{i}": i for i in range(11)})
    with pytest.raises(BadRequestError):
        zep.graph.episode.add(graph, data="x", metadata={"receiptId": None})
    with pytest.raises(BadRequestError):
        zep.graph.episode.add(graph, data="x", metadata={"nested": {"a": 1}})
    with pytest.raises(BadRequestError):
        zep.graph.episode.add(graph, data="not json", type="json")
    ok = zep.graph.episode.add(
        graph, data="x", metadata={f"k{i}": [i, "s", True] for i in range(10)}
    )
    assert ok.episode is not None


def test_non_uuid_graph_id_is_invalid_identifier(zep: Zep) -> None:
    with pytest.raises(BadRequestError) as caught:
        zep.graph.episode.add("my-legacy-graph-id", data="x")
    assert caught.value.body.error.code == "invalid_identifier"


def test_unknown_graph_and_episode_are_404(zep: Zep, graph: str) -> None:
    missing = "00000000-0000-4000-8000-000000000000"
    with pytest.raises(NotFoundError):
        zep.graph.episode.get(graph, missing)
    with pytest.raises(NotFoundError):
        zep.graph.episode.delete(graph, missing)
    with pytest.raises(NotFoundError):
        zep.graph.episode.add(missing, data="x")
    with pytest.raises(NotFoundError):
        zep.task.get(missing)


def test_episode_of_another_graph_is_404(zep: Zep, graph: str) -> None:
    other = str(zep.graph.create(name="other").uuid_)
    episode = _add(zep, graph)
    with pytest.raises(NotFoundError):
        zep.graph.episode.get(other, episode)


def test_wrong_key_is_unauthorized(fake: FakeZep) -> None:
    client = Zep(api_key="wrong", base_url=fake.url + "/api/v4")
    with pytest.raises(UnauthorizedError):
        client.graph.create(name="g")


def test_fail_switch_raises_api_error(fake: FakeZep, zep: Zep, graph: str) -> None:
    fake.fail = True
    with pytest.raises(ApiError) as caught:
        zep.graph.episode.add(graph, data="x", request_options=NO_RETRY)
    assert caught.value.status_code == 500
    assert len(fake.requests_for("add")) == 1  # no retry was attempted


def test_fail_on_delete_only(fake: FakeZep, zep: Zep, graph: str) -> None:
    episode = _add(zep, graph)
    fake.fail_on = {"delete"}
    with pytest.raises(ApiError):
        zep.graph.episode.delete(graph, episode, request_options=NO_RETRY)
    assert zep.graph.episode.get(graph, episode).uuid_ == episode


def test_users_address_their_graph_by_uuid(fake: FakeZep, zep: Zep) -> None:
    user = zep.user.create(user_id="alice", email="alice@example.com")
    assert user.uuid_ and user.user_id == "alice"
    assert zep.user.lookup(user_id="alice").uuid_ == user.uuid_
    assert zep.graph.lookup(user_id="alice").uuid_ == user.graph_uuid
    result = zep.graph.episode.add(str(user.uuid_), data="alice likes tea")
    assert result.episode is not None
    assert result.episode.user_uuid == user.uuid_
    assert result.episode.graph_uuid == user.graph_uuid
    with pytest.raises(NotFoundError):
        zep.user.lookup(user_id="bob")


def test_lag_checks_keep_deleted_episode_listed(fake: FakeZep, zep: Zep, graph: str) -> None:
    episode = _add(zep, graph)
    fake.lag_checks = 1
    zep.graph.episode.delete(graph, episode)
    with pytest.raises(NotFoundError):
        zep.graph.episode.get(graph, episode)
    first = [e.uuid_ for e in zep.graph.episode.list(graph, filters=_fact_filter("f1"))]
    second = [e.uuid_ for e in zep.graph.episode.list(graph, filters=_fact_filter("f1"))]
    assert (first, second) == ([episode], [])


def test_list_pager_follows_cursor(fake: FakeZep, zep: Zep, graph: str) -> None:
    episodes = [_add(zep, graph, fact_id=f"f{i}") for i in range(3)]
    pager = zep.graph.episode.list(graph, page_size=2)
    assert len(pager.items or []) == 2  # .items is only the first page
    assert [e.uuid_ for e in pager] == episodes
    assert len(fake.requests_for("list")) == 2


def test_search_rejects_unsupported_filters(zep: Zep, graph: str) -> None:
    with pytest.raises(BadRequestError):
        list(zep.graph.search_episodes(graph, query="x", filters={"mentioned_node_uuids": ["a"]}))


def test_ingestion_can_stay_pending(fake: FakeZep, zep: Zep, graph: str) -> None:
    fake.ingest_polls_pending = 1
    result = zep.graph.episode.add(graph, data="bob likes coffee")
    assert result.episode is not None and result.task is not None
    assert zep.graph.episode.get(graph, str(result.episode.uuid_)).processed is False
    assert list(zep.graph.search_edges(graph, query="bob")) == []
    assert zep.task.get(str(result.task.uuid_)).status == "pending"
    assert zep.task.get(str(result.task.uuid_)).status == "succeeded"
    assert zep.graph.episode.get(graph, str(result.episode.uuid_)).processed is True
    assert len(list(zep.graph.search_edges(graph, query="bob"))) == 1


def test_unknown_route_and_wrong_method_use_the_v4_error_shape(fake: FakeZep) -> None:
    headers = {"Authorization": f"Api-Key {KEY}"}
    missing = httpx.get(f"{fake.url}/api/v4/nowhere", headers=headers)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    wrong = httpx.put(f"{fake.url}/api/v4/graphs", headers=headers)
    assert wrong.status_code == 405
    assert wrong.json()["error"]["code"] == "method_not_allowed"
    unprefixed = httpx.post(f"{fake.url}/graphs", headers=headers, json={})
    assert unprefixed.status_code == 404  # the SDK base_url must include /api/v4
    assert fake.requests[-1].op is None
