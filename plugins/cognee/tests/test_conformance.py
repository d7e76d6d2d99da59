"""The shared store suite and plugin hygiene, run on the Cognee adapter against the Cognee fake."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest

from agent_custody_state.stores import Store
from agent_custody_state_cognee.store import CogneeStore
from agent_custody_state_cognee.testing import FakeCognee
from agent_custody_state_conformance.hygiene import PluginHygiene
from agent_custody_state_conformance.stores import LateWrite, StoreConformance


class TestCogneeConformance(StoreConformance):
    """X-Api-Key auth, a dataset named in the settings (created by the first write)."""

    capabilities = frozenset({"verify", "held", "lag", "fail", "relocate", "late"})

    @pytest.fixture
    def store(self, make_store: Callable[..., CogneeStore]) -> Store:
        return make_store()

    @pytest.fixture
    def backdoor(self, cognee_backdoor: Any) -> Any:
        return cognee_backdoor

    @pytest.fixture
    def relocated_store(self, make_store: Callable[..., CogneeStore]) -> Iterator[Store]:
        # ``where`` names the server only (the external id names the dataset): another server.
        with FakeCognee() as other:
            yield make_store(url=other.url)

    @pytest.fixture
    def lagging_store(self, fake: FakeCognee, make_store: Callable[..., CogneeStore]) -> Store:
        fake.lag_checks = 2  # the listing keeps a deleted item for two more calls
        return make_store()

    @pytest.fixture
    def failing_store(self, fake: FakeCognee, make_store: Callable[..., CogneeStore]) -> Store:
        fake.fail = True
        return make_store(dataset_id="7d1c1f7e-3b0a-4c39-9a51-1f0e7a8b9c2d")

    @pytest.fixture
    def late_write(self, fake: FakeCognee, store: Store) -> LateWrite:
        # store_later: a gateway answers 504 while Cognee is still ingesting the item.
        return LateWrite.on_fake(fake, store, doubt="without Cognee naming the item")


class TestCogneeByIdWithTokenConformance(TestCogneeConformance):
    """Bearer-token auth, an existing dataset given by id."""

    @pytest.fixture
    def store(self, fake: FakeCognee, make_store: Callable[..., CogneeStore]) -> Store:
        fake.api_key = None  # only the bearer token opens this server
        dataset_id = fake._dataset_named("existing")["id"]
        return make_store(
            dataset_id=dataset_id, api_key_env=None, token_env="ACS_TEST_COGNEE_TOKEN"
        )


class TestCogneeHygiene(PluginHygiene):
    entry_point = "cognee"
    registers = frozenset({"store cognee"})
    heavy_modules = ("httpx",)
    # PH-5 builds the store (no request is made until it is used).
    store_settings: ClassVar[dict[str, dict[str, Any]]] = {
        "cognee": {"url": "http://127.0.0.1:9", "dataset_name": "hygiene"}
    }
