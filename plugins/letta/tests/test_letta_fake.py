"""The Letta fake, driven through the real ``letta-client``."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from letta_client import (
    AuthenticationError,
    InternalServerError,
    Letta,
    NotFoundError,
    UnprocessableEntityError,
)

from agent_custody_state_letta.testing import FakeLetta

KEY = "test-key"
TEXT = "alice likes: green tea"
TAGS = ["agent-custody", "fact:f1", "space:s1", "receipt:r1"]


@pytest.fixture
def agent(fake: FakeLetta) -> str:
    return fake.add_agent()


@pytest.fixture
def letta(fake: FakeLetta) -> Iterator[Letta]:
    client = Letta(api_key=KEY, base_url=fake.url, max_retries=0)
    yield client
    client.close()


def test_create_list_search_delete(fake: FakeLetta, letta: Letta, agent: str) -> None:
    created = letta.agents.passages.create(agent, text=TEXT, tags=TAGS)
    assert isinstance(created, list) and len(created) == 1
    passage = created[0]
    assert passage.id and passage.id.startswith("passage-")
    assert passage.text == TEXT and passage.tags == TAGS
    request = fake.requests_for("add")[0]
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.json() == {"text": TEXT, "tags": TAGS}

    assert [p.id for p in letta.agents.passages.list(agent, search="GREEN tea")] == [passage.id]
    assert letta.agents.passages.list(agent, search="coffee") == []

    found = letta.agents.passages.search(agent, query=TEXT, tags=["fact:f1"])
    assert found.count == 1
    assert found.results[0].id == passage.id and found.results[0].content == TEXT
    assert found.results[0].tags == TAGS and found.results[0].timestamp

    letta.agents.passages.delete(passage.id, agent_id=agent)
    assert fake.deleted == [passage.id]
    assert letta.agents.passages.search(agent, query=TEXT, tags=["fact:f1"]).count == 0
    with pytest.raises(NotFoundError):
        letta.agents.passages.delete(passage.id, agent_id=agent)


def test_tag_match_modes_and_repeated_tags(fake: FakeLetta, letta: Letta, agent: str) -> None:
    letta.agents.passages.create(agent, text="one", tags=["a", "b"])
    letta.agents.passages.create(agent, text="two", tags=["a"])
    both = letta.agents.passages.search(agent, query="x", tags=["a", "b"], tag_match_mode="all")
    either = letta.agents.passages.search(agent, query="x", tags=["a", "b"], tag_match_mode="any")
    assert [r.content for r in both.results] == ["one"]
    assert sorted(r.content for r in either.results) == ["one", "two"]
    assert fake.requests_for("search")[0].query["tags"] == ["a", "b"]


def test_search_ranks_without_cutoff(letta: Letta, agent: str) -> None:
    letta.agents.passages.create(agent, text="bob drinks coffee")
    letta.agents.passages.create(agent, text=TEXT)
    ranked = letta.agents.passages.search(agent, query="green tea")
    assert [r.content for r in ranked.results] == [TEXT, "bob drinks coffee"]
    assert letta.agents.passages.search(agent, query="green tea", top_k=1).count == 1


def test_unknown_agent_is_404_and_malformed_id_422(letta: Letta) -> None:
    with pytest.raises(NotFoundError):
        letta.agents.passages.create("agent-00000000-0000-4000-8000-000000000000", text=TEXT)
    with pytest.raises(UnprocessableEntityError):
        letta.agents.passages.list("my-agent")


def test_passage_of_another_agent_is_404(fake: FakeLetta, letta: Letta, agent: str) -> None:
    passage = letta.agents.passages.create(agent, text=TEXT)[0]
    other = fake.add_agent()
    assert passage.id is not None
    with pytest.raises(NotFoundError):
        letta.agents.passages.delete(passage.id, agent_id=other)
    assert passage.id in fake.items


def test_wrong_key_is_authentication_error(fake: FakeLetta, agent: str) -> None:
    with (
        Letta(api_key="wrong", base_url=fake.url, max_retries=0) as client,
        pytest.raises(AuthenticationError),
    ):
        client.agents.passages.list(agent)


def test_fail_switch_and_fail_on(fake: FakeLetta, letta: Letta, agent: str) -> None:
    fake.fail = True
    with pytest.raises(InternalServerError):
        letta.agents.passages.create(agent, text=TEXT)
    fake.fail = False
    fake.fail_on = {"search"}
    letta.agents.passages.create(agent, text=TEXT)
    with pytest.raises(InternalServerError):
        letta.agents.passages.search(agent, query=TEXT)
    assert len(letta.agents.passages.list(agent)) == 1


def test_fail_next_lets_sdk_retries_recover(fake: FakeLetta, agent: str) -> None:
    fake.fail_next = 1
    with Letta(api_key=KEY, base_url=fake.url, max_retries=1) as client:
        assert client.agents.passages.create(agent, text=TEXT)[0].text == TEXT
    assert len(fake.requests_for("add")) == 2
    assert len(fake.items) == 1


def test_lag_checks_keep_deleted_passage_searchable(
    fake: FakeLetta, letta: Letta, agent: str
) -> None:
    passage_id = letta.agents.passages.create(agent, text=TEXT, tags=TAGS)[0].id
    assert passage_id is not None
    fake.lag_checks = 2
    letta.agents.passages.delete(passage_id, agent_id=agent)
    counts = [
        letta.agents.passages.search(agent, query=TEXT, tags=["fact:f1"]).count for _ in range(3)
    ]
    assert counts == [1, 1, 0]


def test_list_paging_and_order(letta: Letta, agent: str) -> None:
    ids = [letta.agents.passages.create(agent, text=f"p{i}")[0].id for i in range(3)]
    assert [p.id for p in letta.agents.passages.list(agent, limit=2)] == ids[:2]
    assert [p.id for p in letta.agents.passages.list(agent, ascending=False)] == ids[::-1]
    assert [p.id for p in letta.agents.passages.list(agent, after=ids[0])] == ids[1:]


def test_chunks_switch_splits_one_add_into_several_passages(
    fake: FakeLetta, letta: Letta, agent: str
) -> None:
    fake.chunks = 3
    created = letta.agents.passages.create(agent, text="abcdefgh", tags=["t"])
    assert [p.text for p in created] == ["abc", "def", "gh"]
    assert all(p.tags == ["t"] for p in created) and len({p.id for p in created}) == 3


def test_no_api_key_means_open() -> None:
    with FakeLetta(api_key=None) as fake:
        agent = fake.add_agent()
        reply = httpx.get(f"{fake.url}/v1/agents/{agent}/archival-memory")
        assert reply.status_code == 200 and reply.json() == []
