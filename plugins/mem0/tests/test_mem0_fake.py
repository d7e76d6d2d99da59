"""The mem0 fake, driven through the real ``mem0ai`` ``MemoryClient``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mem0 import MemoryClient
from mem0.exceptions import (
    AuthenticationError,
    MemoryError,
    MemoryNotFoundError,
    ValidationError,
)

from agent_custody_state_mem0.testing import FakeMem0

KEY = "test-key"
FACT = "alice likes: green tea"


@pytest.fixture
def client(fake: FakeMem0) -> Iterator[MemoryClient]:
    client = MemoryClient(api_key=KEY, host=fake.url)
    yield client
    client.client.close()


def _add(client: MemoryClient, text: str = FACT, user: str = "u1", **extra: Any) -> str:
    reply = client.add(
        [{"role": "user", "content": text}],
        user_id=user,
        infer=False,
        metadata={"factId": extra.pop("fact_id", "f1"), "source": "agent-custody"},
        **extra,
    )
    assert reply["status"] == "SUCCEEDED"
    assert reply["results"][0]["event"] == "ADD"
    assert reply["results"][0]["data"] == {"memory": text}
    return str(reply["results"][0]["id"])


def test_constructor_pings_with_token_auth(fake: FakeMem0, client: MemoryClient) -> None:
    ping = fake.requests_for("ping")
    assert len(ping) == 1
    assert ping[0].headers["authorization"] == f"Token {KEY}"
    assert client.org_id == "org-fake" and client.project_id == "proj-fake"


def test_add_get_search_get_all_delete(fake: FakeMem0, client: MemoryClient) -> None:
    memory_id = _add(client)
    body = fake.requests_for("add")[0].json()
    assert body["infer"] is False and body["user_id"] == "u1"

    got = client.get(memory_id)
    assert got["memory"] == FACT
    assert got["metadata"]["factId"] == "f1"
    assert got["user_id"] == "u1" and "session_id" in got

    hits = client.search(FACT, filters={"user_id": "u1"})["results"]
    assert [h["id"] for h in hits] == [memory_id]
    assert hits[0]["score"] == 1.0

    page = client.get_all(filters={"AND": [{"user_id": "u1"}, {"metadata": {"factId": "f1"}}]})
    assert page["count"] == 1 and page["results"][0]["id"] == memory_id
    assert (
        client.get_all(filters={"AND": [{"user_id": "u1"}, {"metadata": {"factId": "f2"}}]})[
            "results"
        ]
        == []
    )

    assert "deleted" in client.delete(memory_id)["message"]
    assert fake.deleted == [memory_id]
    with pytest.raises(MemoryNotFoundError):
        client.get(memory_id)
    assert client.search(FACT, filters={"user_id": "u1"}, threshold=0.0)["results"] == []


def test_unknown_memory_is_404_with_platform_body(fake: FakeMem0, client: MemoryClient) -> None:
    with pytest.raises(MemoryNotFoundError):
        client.delete("no-such-id")
    reply = httpx.get(f"{fake.url}/v1/memories/nope/", headers={"Authorization": f"Token {KEY}"})
    assert reply.status_code == 404 and reply.json() == {"error": "Memory not found"}


def test_invalid_json_body_is_a_platform_400(fake: FakeMem0) -> None:
    reply = httpx.post(
        f"{fake.url}/v3/memories/search/",
        headers={"Authorization": f"Token {KEY}", "Content-Type": "application/json"},
        content=b"{not json",
    )
    assert reply.status_code == 400 and "error" in reply.json()


def test_wrong_key_fails_the_constructor_ping(fake: FakeMem0) -> None:
    with pytest.raises(ValueError, match="Error"):
        MemoryClient(api_key="wrong-key", host=fake.url)


def test_revoked_key_raises_authentication_error(fake: FakeMem0, client: MemoryClient) -> None:
    fake.api_key = "rotated"
    with pytest.raises(AuthenticationError):
        client.search("x", filters={"user_id": "u1"})


def test_fail_switch_raises_typed_error(fake: FakeMem0, client: MemoryClient) -> None:
    fake.fail = True
    with pytest.raises(MemoryError) as caught:
        _add(client)
    assert type(caught.value) is MemoryError  # 500 maps to the base class, not a subclass
    assert fake.items == {}


def test_fail_on_only_breaks_named_operation(fake: FakeMem0, client: MemoryClient) -> None:
    memory_id = _add(client)
    fake.fail_on = {"delete"}
    with pytest.raises(MemoryError):
        client.delete(memory_id)
    assert client.get(memory_id)["id"] == memory_id
    assert memory_id in fake.items


def test_lag_checks_keep_deleted_memory_in_search_then_drop_it(
    fake: FakeMem0, client: MemoryClient
) -> None:
    memory_id = _add(client)
    fake.lag_checks = 2
    client.delete(memory_id)
    with pytest.raises(MemoryNotFoundError):  # reads by id are already consistent
        client.get(memory_id)
    seen = [
        [h["id"] for h in client.search(FACT, filters={"user_id": "u1"}, threshold=0)["results"]]
        for _ in range(3)
    ]
    assert seen == [[memory_id], [memory_id], []]


def test_direct_import_dedupes_same_text_in_same_scope(
    fake: FakeMem0, client: MemoryClient
) -> None:
    first = _add(client, fact_id="f1")
    assert _add(client, fact_id="f2") == first
    assert _add(client, user="u2") != first
    fake.dedupe = False
    assert _add(client) != first
    assert len(fake.items) == 3


def test_async_add_answers_pending_then_event_polling_succeeds(
    fake: FakeMem0, client: MemoryClient
) -> None:
    fake.async_add = True
    fake.event_polls_pending = 2
    reply = client.add([{"role": "user", "content": FACT}], user_id="u1", infer=False)
    assert reply["status"] == "PENDING" and "results" not in reply
    assert client.get_all(filters={"user_id": "u1"})["count"] == 0

    statuses = []
    for _ in range(3):
        event = client.client.get(f"/v1/event/{reply['event_id']}/").json()
        statuses.append(event["status"])
    assert statuses == ["PENDING", "PENDING", "SUCCEEDED"]
    memory_id = event["results"][0]["id"]
    assert client.get(memory_id)["memory"] == FACT


def test_infer_default_is_asynchronous(fake: FakeMem0, client: MemoryClient) -> None:
    reply = client.add(FACT, user_id="u1")
    assert reply["status"] == "PENDING"
    fake.complete_events()
    assert fake.events[reply["event_id"]]["status"] == "SUCCEEDED"
    assert client.get_all(filters={"user_id": "u1"})["count"] == 1


def test_system_messages_are_not_stored(fake: FakeMem0, client: MemoryClient) -> None:
    reply = client.add(
        [{"role": "system", "content": "be nice"}, {"role": "user", "content": FACT}],
        user_id="u1",
        infer=False,
    )
    assert [r["data"]["memory"] for r in reply["results"]] == [FACT]


def test_entity_ids_belong_in_filters(fake: FakeMem0, client: MemoryClient) -> None:
    with pytest.raises(ValueError, match="Top-level entity"):
        client.search("x", user_id="u1")  # the SDK refuses before sending
    reply = httpx.post(
        f"{fake.url}/v3/memories/search/",
        headers={"Authorization": f"Token {KEY}"},
        json={"query": "x", "user_id": "u1", "filters": {"user_id": "u1"}},
    )
    assert reply.status_code == 400 and "Top-level entity" in reply.json()["error"]
    with pytest.raises(ValidationError):
        client.search("x", filters={"userId": "u1"})
    with pytest.raises(ValidationError):
        client.get_all()
    with pytest.raises(ValidationError):
        client.search("x", filters={"metadata": {"factId": {"gt": 1}}})


def test_add_needs_an_entity_scope(client: MemoryClient) -> None:
    with pytest.raises(ValidationError):
        client.add(FACT, infer=False)


def test_default_threshold_hides_unrelated_memories(client: MemoryClient) -> None:
    memory_id = _add(client)
    assert client.search("quantum chromodynamics", filters={"user_id": "u1"})["results"] == []
    hits = client.search("quantum chromodynamics", filters={"user_id": "u1"}, threshold=0.0)
    assert [h["id"] for h in hits["results"]] == [memory_id]


def test_filters_or_not_and_wildcard(client: MemoryClient) -> None:
    one = _add(client, "one fact", user="u1")
    two = _add(client, "two fact", user="u2")

    def ids(filters: dict[str, Any]) -> set[str]:
        return {r["id"] for r in client.get_all(filters=filters)["results"]}

    assert ids({"OR": [{"user_id": "u1"}, {"user_id": "u2"}]}) == {one, two}
    assert ids({"user_id": "*", "NOT": [{"user_id": "u1"}]}) == {two}
    assert ids({"memory_ids": [one]}) == {one}
    assert ids({"user_id": {"in": ["u2", "u3"]}}) == {two}


def test_get_all_pages(fake: FakeMem0, client: MemoryClient) -> None:
    for text in ("a b", "c d", "e f"):
        _add(client, text)
    first = client.get_all(filters={"user_id": "u1"}, page=1, page_size=2)
    assert first["count"] == 3 and len(first["results"]) == 2
    assert first["next"].startswith(fake.url) and first["previous"] is None
    last = client.get_all(filters={"user_id": "u1"}, page=2, page_size=2)
    assert len(last["results"]) == 1 and last["next"] is None
    assert fake.requests_for("list")[0].query == {"page": ["1"], "page_size": ["2"]}
