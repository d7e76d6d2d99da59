"""Cognee specifics the shared suite does not cover: the wire format, dedupe, auth, settings."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from agent_custody_state.plugins import PluginManager, resolve_ref
from agent_custody_state.stores import StoreError, StoreSet, VerifyPolicy, custody_metadata
from agent_custody_state_cognee.settings import CogneeSettings
from agent_custody_state_cognee.store import CogneeStore, build, content_for
from agent_custody_state_cognee.testing import FakeCognee
from agent_custody_state_conformance.stores import make_fact

pytestmark = pytest.mark.anyio

MakeStore = Callable[..., CogneeStore]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_add_request_shape(fake: FakeCognee, make_store: MakeStore) -> None:
    store = make_store()
    fact = make_fact(value={"tier": "pro"})
    external_id = await store.put(fact)
    sent = fake.requests_for("add")[0]
    assert sent.headers["x-api-key"] == "test-key"
    assert "authorization" not in sent.headers
    parts = {p.name: p for p in sent.form()}
    assert set(parts) == {"data", "labels", "external_metadata", "datasetName"}
    assert parts["data"].content_type == "text/plain"
    assert parts["data"].filename == f"agent-custody-{fact.fact_id}.txt"
    assert parts["data"].text == content_for(fact)
    assert parts["data"].text.startswith('acct:42 plan: {"tier":"pro"}\n\n')
    assert json.loads(parts["labels"].text) == [f"agent-custody:{fact.fact_id}"]
    assert json.loads(parts["external_metadata"].text) == [custody_metadata(fact)]
    assert parts["datasetName"].text == "custody"
    dataset_id, data_id = external_id.split("/")
    assert fake.items[data_id]["datasetId"] == dataset_id
    assert fake.datasets[dataset_id]["name"] == "custody"


async def test_a_dataset_name_resolves_once(fake: FakeCognee, make_store: MakeStore) -> None:
    store = make_store(dataset_name="team")
    first = await store.put(make_fact())
    second = await store.put(make_fact())
    assert first.split("/")[0] == second.split("/")[0] == store.dataset_id
    later = {p.name: p.text for p in fake.requests_for("add")[1].form()}
    assert later.get("datasetId") == store.dataset_id and "datasetName" not in later


async def test_putting_the_same_fact_again_reuses_its_item(
    fake: FakeCognee, make_store: MakeStore
) -> None:
    """Cognee's content dedupe is harmless for one fact (a retried put) and no longer joins
    two facts, because the uploaded content names the fact."""
    store = make_store()
    fact = make_fact()
    assert await store.put(fact) == await store.put(fact)
    twin = make_fact()
    assert await store.put(twin) != await store.put(fact)
    assert len(fake.items) == 2


async def test_delete_status_proves_nothing_the_listing_does(
    fake: FakeCognee, make_store: MakeStore
) -> None:
    store = make_store()
    fact = make_fact()
    dataset_id, data_id = (await store.put(fact)).split("/")
    # A wrong id is "deleted" with a 200 too; the listing still holds the fact.
    wrong = f"{dataset_id}/{uuid.uuid4()}"
    report = await StoreSet([store], VerifyPolicy(attempts=2, delay=0.001)).remove_all(
        fact.with_(external={"cognee": wrong})
    )
    assert report.removed_from == ["cognee"]
    assert report.verification == {"cognee": "stillIndexed"}
    assert data_id in fake.items


async def test_verify_finds_the_fact_under_another_data_id(
    fake: FakeCognee, make_store: MakeStore
) -> None:
    store = make_store()
    fact = make_fact()
    external_id = await store.put(fact)
    await store.remove(external_id, fact)
    assert await store.verify_removed(external_id, fact) is True
    # Re-added by someone else with our metadata: different content, so a new data id.
    other = make_fact(fact_id=fact.fact_id, value="changed")
    await store.put(other)
    assert await store.verify_removed(external_id, fact) is False


async def test_verify_reads_every_page(fake: FakeCognee, make_store: MakeStore) -> None:
    store = make_store(page_size=2)
    facts = [make_fact(subject=f"acct:{i}") for i in range(5)]
    ids = [await store.put(f) for f in facts]
    assert await store.verify_removed(ids[-1], facts[-1]) is False
    offsets = [r.arg("offset") for r in fake.requests_for("list")]
    assert offsets == ["0", "2", "4"]


async def test_missing_data_ingestion_info_falls_back_to_listing() -> None:
    """An older server (or a background run) omits the ids; the item is found by listing."""
    fact = make_fact()
    dataset_id, data_id = str(uuid.uuid4()), str(uuid.uuid4())

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(
                200, json={"status": "PipelineRunCompleted", "dataset_id": dataset_id}
            )
        item = {"id": data_id, "externalMetadata": custody_metadata(fact)}
        return httpx.Response(200, json=[{"id": str(uuid.uuid4()), "externalMetadata": {}}, item])

    store = CogneeStore(
        "cognee",
        "http://cognee.test",
        dataset_name="custody",
        transport=httpx.MockTransport(answer),
    )
    assert await store.put(fact) == f"{dataset_id}/{data_id}"


async def test_server_errors_name_the_store_and_the_fact(
    fake: FakeCognee, make_store: MakeStore
) -> None:
    store = make_store(name="graph")
    fact = make_fact()
    fake.fail_on = {"add"}
    with pytest.raises(StoreError) as caught:
        await store.put(fact)
    assert caught.value.store == "graph"
    assert fact.fact_id in caught.value.message and "HTTP 500" in caught.value.message


async def test_unreachable_server_is_a_store_error(make_store: MakeStore) -> None:
    store = make_store(url="http://127.0.0.1:9", timeout=2)
    with pytest.raises(StoreError, match="ConnectError"):
        await store.put(make_fact())


async def test_malformed_external_id_is_a_store_error(make_store: MakeStore) -> None:
    with pytest.raises(StoreError, match="not a Cognee external id"):
        await make_store().remove("passage-1", make_fact())


async def test_wrong_key_is_refused(
    fake: FakeCognee, make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACS_WRONG", "nope")
    with pytest.raises(StoreError, match="HTTP 401"):
        await make_store(api_key_env="ACS_WRONG").put(make_fact())
    assert fake.items == {}


async def test_bearer_token(fake: FakeCognee, make_store: MakeStore) -> None:
    fake.api_key = None
    store = make_store(api_key_env=None, token_env="ACS_TEST_COGNEE_TOKEN")
    await store.put(make_fact())
    sent = fake.requests_for("add")[0]
    assert sent.headers["authorization"] == "Bearer test-token"
    assert "x-api-key" not in sent.headers


async def test_open_server_needs_no_credentials(make_store: MakeStore) -> None:
    with FakeCognee(api_key=None, token=None) as open_fake:
        store = make_store(url=open_fake.url, api_key_env=None)
        fact = make_fact()
        external_id = await store.put(fact)
        await store.remove(external_id, fact)
        assert await store.verify_removed(external_id, fact) is True
        assert "x-api-key" not in open_fake.requests[0].headers


@pytest.mark.parametrize("variable", ["api_key_env", "token_env"])
def test_unset_credential_variable_fails_at_build_naming_it(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ACS_NOT_SET", raising=False)
    settings = CogneeSettings(
        url="http://127.0.0.1:8000", dataset_name="d", **{variable: "ACS_NOT_SET"}
    )
    with pytest.raises(StoreError, match="ACS_NOT_SET is not set") as caught:
        build(settings, name="cognee-main")
    assert caught.value.store == "cognee-main"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({}, "exactly one of dataset_id and dataset_name"),
        ({"dataset_name": "a", "dataset_id": str(uuid.uuid4())}, "exactly one"),
        ({"dataset_id": "not-a-uuid"}, "dataset_id"),
        ({"dataset_name": "a", "api_key_env": "A", "token_env": "B"}, "at most one"),
        ({"dataset_name": "a", "url": "127.0.0.1:8000"}, "http"),
        ({"dataset_name": "a", "api_key": "inline-secret"}, "Extra inputs"),
    ],
)
def test_settings_validation(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        CogneeSettings(**{"url": "http://127.0.0.1:8000", **settings})


async def test_registered_factory_builds_a_working_store(
    fake: FakeCognee, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path the server takes from a ``[[stores]]`` table: spec -> settings -> factory."""
    monkeypatch.setenv("ACS_TEST_COGNEE_KEY", "test-key")
    spec = PluginManager().store_spec("cognee")
    settings = resolve_ref(spec.settings).model_validate(
        {"url": fake.url + "/", "dataset_name": "custody", "api_key_env": "ACS_TEST_COGNEE_KEY"}
    )
    store = resolve_ref(spec.factory)(settings, name="cognee-graph")
    assert store.name == "cognee-graph"
    external_id = await store.put(make_fact())
    assert external_id.split("/")[1] in fake.items
