"""The shared store suite on the Zep store, through the real ``zep-cloud`` 4.x SDK on the
loopback Zep v4 fake: a named graph addressed by UUID, and a user's graph found by lookup with
ingestion and deletion left pending for a few task polls."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from conftest import API_KEY
from zep_cloud import Zep

from agent_custody_state.stores import StoreError
from agent_custody_state_conformance.hygiene import PluginHygiene
from agent_custody_state_conformance.stores import LateWrite, StoreConformance
from agent_custody_state_zep.store import ZepStore
from agent_custody_state_zep.testing import FakeZep


def create_user(fake: FakeZep, user_id: str) -> None:
    """Create a Zep user (and so its graph) on the fake, through the SDK."""
    Zep(api_key=API_KEY, base_url=fake.url + "/api/v4").user.create(user_id=user_id)


class FakeBackdoor:
    """Reads the fake's primary episode records directly, never through the SDK."""

    def __init__(self, fake: FakeZep) -> None:
        self.fake = fake

    def find(self, fact_id: str) -> dict[str, Any] | None:
        with self.fake.lock:
            episodes = [
                e
                for e in self.fake.items.values()
                if (e["metadata"] or {}).get("factId") == fact_id
            ]
        assert len(episodes) <= 1, f"fact {fact_id} is held by {len(episodes)} episodes"
        if not episodes:
            return None
        episode = episodes[0]
        data = json.loads(episode["content"])
        assert data["factId"] == fact_id and episode["source"] == "json"
        return {"id": episode["uuid"], "value": data["value"], "metadata": episode["metadata"]}


class TestZepGraph(StoreConformance):
    """A named graph given by its UUID; tasks complete at once."""

    capabilities = frozenset({"verify", "held", "lag", "fail", "relocate", "late"})

    @pytest.fixture
    def store(self, make_store: Callable[..., ZepStore]) -> ZepStore:
        return make_store()

    @pytest.fixture
    def backdoor(self, fake: FakeZep) -> FakeBackdoor:
        return FakeBackdoor(fake)

    @pytest.fixture
    def relocated_store(self, fake: FakeZep, make_store: Callable[..., ZepStore]) -> ZepStore:
        return make_store(graph_uuid=fake.create_graph("other"))

    @pytest.fixture
    def lagging_store(self, fake: FakeZep, make_store: Callable[..., ZepStore]) -> ZepStore:
        fake.lag_checks = 2  # list and edge search keep the episode for two more reads
        return make_store()

    @pytest.fixture
    def failing_store(self, fake: FakeZep, make_store: Callable[..., ZepStore]) -> ZepStore:
        fake.fail = True
        return make_store(max_retries=0)  # the SDK would retry every 500 twice, with back-off

    @pytest.fixture
    def late_write(self, fake: FakeZep, make_store: Callable[..., ZepStore]) -> LateWrite:
        # store_later: a gateway answers 504 while Zep is still creating the episode; the SDK
        # must not retry it (a retry would create a second episode at once).
        store = make_store(max_retries=0)
        return LateWrite.on_fake(fake, store, doubt="ended without Zep's answer")

    @pytest.mark.xfail(
        reason="Zep caps episode data at 10,000 characters; the ~16 KB fact is refused with a "
        "StoreError naming the limit (test_store.py checks unicode within the cap)",
        raises=StoreError,
        strict=True,
    )
    async def test_awkward_value_round_trip(self, store: Any, backdoor: Any) -> None:
        await super().test_awkward_value_round_trip(store, backdoor)


class TestZepUserGraphPendingTasks(TestZepGraph):
    """A user's graph found by ``user_id``; ingestion and deletion pending for two task polls."""

    @pytest.fixture
    def fake(self, fake: FakeZep) -> FakeZep:
        fake.task_polls_pending = 2
        fake.ingest_polls_pending = 2
        create_user(fake, "support-team")
        return fake

    @pytest.fixture
    def make_store(self, make_store: Callable[..., ZepStore]) -> Callable[..., ZepStore]:
        return lambda **settings: make_store(**{"user_id": "support-team", **settings})

    @pytest.fixture
    def relocated_store(self, fake: FakeZep, make_store: Callable[..., ZepStore]) -> ZepStore:
        create_user(fake, "other-team")
        return make_store(user_id="other-team")


class TestHygiene(PluginHygiene):
    entry_point = "zep"
    registers = {"store zep"}  # noqa: RUF012 - the suite's own class attribute
    heavy_modules = ("zep_cloud",)
