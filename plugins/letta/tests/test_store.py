"""Letta specifics the shared suite does not cover: tags, chunked adds, auth, settings, wiring."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from agent_custody_state.ledger.model import Source
from agent_custody_state.plugins import PluginManager, resolve_ref
from agent_custody_state.stores import StoreError, StoreSet, VerifyPolicy
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_letta.settings import LettaSettings
from agent_custody_state_letta.store import LettaStore, build
from agent_custody_state_letta.tags import custody_from_tags, custody_tags
from agent_custody_state_letta.testing import FakeLetta

pytestmark = pytest.mark.anyio

MakeStore = Callable[..., LettaStore]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_put_sends_text_and_custody_tags(fake: FakeLetta, make_store: MakeStore) -> None:
    store = make_store(tags=["team-support", "prod"])
    fact = make_fact()
    passage_id = await store.put(fact)
    sent = fake.requests_for("add")[0]
    assert sent.headers["authorization"] == "Bearer test-key"
    body = sent.json()
    assert body["text"] == "acct:42 plan: pro"
    assert body["tags"] == [
        "agent-custody",
        f"fact:{fact.fact_id}",
        "space:team:support",
        f"receipt:{fact.source.receipt_id}",
        "actor:agent:billing",
        "provenance:attested",
        "valid-from:2026-09-01T00:00:00.000Z",
        "team-support",
        "prod",
    ]
    assert fake.items[passage_id]["tags"] == body["tags"]


def test_tags_round_trip_and_skip_a_missing_receipt() -> None:
    fact = make_fact(source=Source(None), actor="a:b:c")
    tags = custody_tags(fact, ["agent-custody", "extra"])
    assert not any(t.startswith("receipt:") for t in tags)
    assert tags.count("agent-custody") == 1 and tags[-1] == "extra"
    decoded = custody_from_tags(tags)
    assert decoded["receiptId"] is None and decoded["actor"] == "a:b:c"
    assert decoded["source"] == "agent-custody" and decoded["factId"] == fact.fact_id


async def test_chunked_add_records_and_removes_every_passage(
    fake: FakeLetta, make_store: MakeStore
) -> None:
    fake.chunks = 3
    store = make_store()
    fact = make_fact(value="a value long enough to be cut into three passages")
    external_id = await store.put(fact)
    ids = external_id.split(",")
    assert len(ids) == 3 and set(ids) <= set(fake.items)
    # A partial removal (one passage deleted behind our back) is finished, not failed.
    fake._remove(ids[1])
    assert await store.verify_removed(external_id, fact) is False
    await store.remove(external_id, fact)
    assert not set(ids) & set(fake.items)
    assert [r.path.rsplit("/", 1)[-1] for r in fake.requests_for("delete")] == ids
    assert await store.verify_removed(external_id, fact) is True


async def test_verify_catches_a_passage_with_the_fact_tag_under_another_id(
    fake: FakeLetta, make_store: MakeStore, agent_id: str
) -> None:
    store = make_store()
    fact = make_fact()
    external_id = await store.put(fact)
    await store.remove(external_id, fact)
    # Someone re-wrote the fact outside the ledger's knowledge: still held, whatever the id.
    store.client.agents.passages.create(agent_id, text="other text", tags=[f"fact:{fact.fact_id}"])
    assert await store.verify_removed(external_id, fact) is False


async def test_lagging_search_then_verified(fake: FakeLetta, make_store: MakeStore) -> None:
    fake.lag_checks = 2
    store = make_store()
    fact = make_fact()
    fact = fact.with_(external={"letta": await store.put(fact)})
    report = await StoreSet([store], VerifyPolicy(attempts=4, delay=0.001)).remove_all(fact)
    assert report.verification == {"letta": "verified"}
    # Attempt 1 saw the ghost in search; the adapter asks again rather than caching.
    assert len(fake.requests_for("search")) >= 2


async def test_failed_delete_names_store_and_passages(
    fake: FakeLetta, make_store: MakeStore
) -> None:
    store = make_store(name="archive")
    fact = make_fact()
    external_id = await store.put(fact)
    fake.fail_on = {"delete"}
    with pytest.raises(StoreError) as caught:
        await store.remove(external_id, fact)
    assert caught.value.store == "archive"
    assert external_id in caught.value.message and "500" in caught.value.message


async def test_wrong_key_is_a_store_error(
    fake: FakeLetta, make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store()
    monkeypatch.setattr(store.client, "api_key", "wrong")
    with pytest.raises(StoreError, match="401"):
        await store.put(make_fact())
    assert fake.items == {}


async def test_unknown_agent_is_a_store_error(fake: FakeLetta, make_store: MakeStore) -> None:
    store = make_store(agent_id="agent-00000000-0000-4000-8000-000000000000")
    with pytest.raises(StoreError, match="not found"):
        await store.put(make_fact())


def test_unset_key_variable_fails_at_build_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACS_NOT_SET", raising=False)
    settings = LettaSettings(
        agent_id=f"agent-{'0' * 8}-0000-4000-8000-{'0' * 12}", api_key_env="ACS_NOT_SET"
    )
    with pytest.raises(StoreError, match="ACS_NOT_SET is not set") as caught:
        build(settings, name="letta-main")
    assert caught.value.store == "letta-main"


def test_base_url_is_explicit_not_taken_from_the_sdk_variable(
    monkeypatch: pytest.MonkeyPatch, make_store: MakeStore, fake: FakeLetta
) -> None:
    monkeypatch.setenv("LETTA_BASE_URL", "http://127.0.0.1:9")
    assert str(make_store().client.base_url).rstrip("/") == fake.url
    defaults = LettaSettings(
        agent_id=f"agent-{'0' * 8}-0000-4000-8000-{'0' * 12}", api_key_env="LETTA_API_KEY"
    )
    assert defaults.base_url == "https://api.letta.com"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"agent_id": "bob"}, "agent_id"),
        ({"tags": ["fact:x"]}, "reserved"),
        ({"tags": ["agent-custody"]}, "reserved"),
        ({"tags": [" "]}, "empty"),
        ({"api_key": "inline-secret"}, "Extra inputs"),
        ({"timeout": 0}, "timeout"),
        ({"api_key_env": None}, "api_key_env is required for Letta Cloud"),
    ],
)
def test_settings_validation(changes: dict[str, Any], message: str) -> None:
    base: dict[str, Any] = {
        "agent_id": f"agent-{'1' * 8}-1111-4111-8111-{'1' * 12}",
        "api_key_env": "LETTA_API_KEY",
    }
    with pytest.raises(ValidationError, match=message):
        LettaSettings(**{**base, **changes})


async def test_registered_factory_builds_a_working_store(
    fake: FakeLetta, agent_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path the server takes from a ``[[stores]]`` table: spec -> settings -> factory."""
    monkeypatch.setenv("ACS_TEST_LETTA_KEY", "test-key")
    spec = PluginManager().store_spec("letta")
    settings = resolve_ref(spec.settings).model_validate(
        {"agent_id": agent_id, "base_url": fake.url, "api_key_env": "ACS_TEST_LETTA_KEY"}
    )
    store = resolve_ref(spec.factory)(settings, name="letta-archive")
    try:
        assert store.name == "letta-archive"
        fact = make_fact()
        assert (await store.put(fact)) in fake.items
    finally:
        store.client.close()


async def test_no_key_variable_sends_no_credentials(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LETTA_API_KEY", "ambient-key")
    with FakeLetta(api_key=None) as open_fake:
        agent = open_fake.add_agent()
        store = make_store(base_url=open_fake.url, agent_id=agent, api_key_env=None)
        await store.put(make_fact())
        assert "authorization" not in open_fake.requests_for("add")[0].headers
