"""Fixtures for the Zep plugin's tests: the loopback Zep v4 fake and stores built on it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

os.environ.pop("ZEP_API_KEY", None)  # a developer's real key must never be used here

from agent_custody_state_zep.settings import ZepSettings
from agent_custody_state_zep.store import ZepStore, build
from agent_custody_state_zep.testing import FakeZep

API_KEY = "test-key"
KEY_ENV = "ACS_TEST_ZEP_API_KEY"


@pytest.fixture
def fake() -> Iterator[FakeZep]:
    with FakeZep(api_key=API_KEY) as server:
        yield server


@pytest.fixture
def graph(fake: FakeZep) -> str:
    return fake.create_graph("custody")


@pytest.fixture
def make_store(
    fake: FakeZep, graph: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., ZepStore]]:
    """Build stores on the fake through the plugin's factory (closed at teardown).

    The fake's base URL is given as a bare origin: the settings add ``/api/v4``.
    """
    monkeypatch.setenv(KEY_ENV, API_KEY)
    built: list[ZepStore] = []

    def make(**settings: Any) -> ZepStore:
        values: dict[str, Any] = {"base_url": fake.url, "api_key_env": KEY_ENV}
        if not {"graph_id", "user_id", "graph_uuid"} & set(settings):
            values["graph_uuid"] = graph
        values.update(settings)
        name = values.pop("name", "zep")
        store = build(ZepSettings(**values), name=name)
        built.append(store)
        return store

    yield make
    for store in built:
        store.close()
