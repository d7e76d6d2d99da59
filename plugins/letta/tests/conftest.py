"""Fixtures: a loopback Letta fake with one agent, and stores built the way the server builds them.

Stores are made by the registered factory (``build``) from validated settings, so the tests go
through the real ``letta-client`` (``Letta(base_url=fake.url, max_retries=0)``) over HTTP.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_custody_state_letta.settings import LettaSettings
from agent_custody_state_letta.store import LettaStore, build
from agent_custody_state_letta.tags import custody_from_tags
from agent_custody_state_letta.testing import FakeLetta

# A developer's own Letta settings must not redirect the SDK during tests.
for _name in ("LETTA_API_KEY", "LETTA_BASE_URL", "LETTA_CUSTOM_HEADERS"):
    os.environ.pop(_name, None)

KEY = "test-key"
KEY_ENV = "ACS_TEST_LETTA_KEY"


class LettaBackdoor:
    """Reads the fake's primary data (not its lagging search index) by the ``fact:`` tag."""

    def __init__(self, fake: FakeLetta, agent_id: str) -> None:
        self.fake = fake
        self.archive = fake.agents[agent_id]["archive_id"]

    def passages(self, fact_id: str) -> list[dict[str, Any]]:
        with self.fake.lock:
            return [
                p
                for p in self.fake.items.values()
                if p["archive_id"] == self.archive and f"fact:{fact_id}" in p["tags"]
            ]

    def find(self, fact_id: str) -> dict[str, Any] | None:
        passages = self.passages(fact_id)
        if not passages:
            return None
        return {
            "id": ",".join(p["id"] for p in passages),
            "text": "".join(p["text"] for p in passages),
            "metadata": custody_from_tags(passages[0]["tags"]),
            "tags": passages[0]["tags"],
        }


@pytest.fixture
def fake() -> Iterator[FakeLetta]:
    with FakeLetta(api_key=KEY) as server:
        yield server


@pytest.fixture
def agent_id(fake: FakeLetta) -> str:
    return fake.add_agent()


@pytest.fixture
def make_store(
    fake: FakeLetta, agent_id: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., LettaStore]]:
    monkeypatch.setenv(KEY_ENV, KEY)
    made: list[LettaStore] = []

    def make(name: str = "letta", **settings: Any) -> LettaStore:
        options: dict[str, Any] = {
            "agent_id": agent_id,
            "base_url": fake.url,
            "api_key_env": KEY_ENV,
            "max_retries": 0,
            **settings,
        }
        store = build(LettaSettings(**options), name=name)
        made.append(store)
        return store

    yield make
    for store in made:
        store.client.close()


@pytest.fixture
def letta_backdoor(fake: FakeLetta, agent_id: str) -> LettaBackdoor:
    return LettaBackdoor(fake, agent_id)
