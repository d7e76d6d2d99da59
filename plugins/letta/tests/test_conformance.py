"""The shared store suite and plugin hygiene, run on the Letta adapter against the Letta fake."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from agent_custody_state.stores import Store
from agent_custody_state_conformance.hygiene import PluginHygiene
from agent_custody_state_conformance.stores import LateWrite, StoreConformance
from agent_custody_state_letta.store import LettaStore
from agent_custody_state_letta.testing import FakeLetta


class TestLettaConformance(StoreConformance):
    capabilities = frozenset({"verify", "held", "lag", "fail", "relocate", "late"})

    @pytest.fixture
    def store(self, make_store: Callable[..., LettaStore]) -> Store:
        return make_store()

    @pytest.fixture
    def relocated_store(self, fake: FakeLetta, make_store: Callable[..., LettaStore]) -> Store:
        return make_store(agent_id=fake.add_agent())  # another agent, registered on the fake

    @pytest.fixture
    def backdoor(self, letta_backdoor: Any) -> Any:
        return letta_backdoor

    @pytest.fixture
    def lagging_store(self, fake: FakeLetta, make_store: Callable[..., LettaStore]) -> Store:
        fake.lag_checks = 2  # search/list keep a deleted passage for two more calls
        return make_store()

    @pytest.fixture
    def failing_store(self, fake: FakeLetta, make_store: Callable[..., LettaStore]) -> Store:
        fake.fail = True
        return make_store()

    @pytest.fixture
    def late_write(self, fake: FakeLetta, store: Store) -> LateWrite:
        # store_later: a gateway answers 504 while Letta is still embedding the passage.
        return LateWrite.on_fake(fake, store, doubt="ended without Letta's answer")


class TestLettaChunkedConformance(TestLettaConformance):
    """The whole suite again with every add answered by three passages."""

    @pytest.fixture
    def store(self, fake: FakeLetta, make_store: Callable[..., LettaStore]) -> Store:
        fake.chunks = 3
        return make_store()


class TestLettaHygiene(PluginHygiene):
    entry_point = "letta"
    registers = frozenset({"store letta"})
    heavy_modules = ("letta_client",)
    # PH-5 builds the store (the SDK's client makes no request until it is used).
    store_settings: ClassVar[dict[str, dict[str, Any]]] = {
        "letta": {
            "agent_id": "agent-00000000-0000-4000-8000-000000000000",
            "base_url": "http://127.0.0.1:9",
        }
    }
