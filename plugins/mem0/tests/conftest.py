"""Fixtures for the mem0 plugin's tests: the loopback platform fake and stores built on it.

mem0 reads ``MEM0_TELEMETRY`` and ``MEM0_DIR`` when first imported; test modules import mem0
(for its exception types) before any store is built, so both are decided here first.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ["MEM0_TELEMETRY"] = "false"
os.environ["MEM0_DIR"] = tempfile.mkdtemp(prefix="acs-mem0-dir-")
os.environ.pop("MEM0_API_KEY", None)  # a developer's real key must never be used here

from agent_custody_state_mem0.settings import Mem0Settings
from agent_custody_state_mem0.store import Mem0Store, build
from agent_custody_state_mem0.testing import FakeMem0

API_KEY = "test-key"
KEY_ENV = "ACS_TEST_MEM0_API_KEY"
EMBED_DIMS = 16


@pytest.fixture
def fake() -> Iterator[FakeMem0]:
    with FakeMem0(api_key=API_KEY) as server:
        yield server


@pytest.fixture
def make_store(
    fake: FakeMem0, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Mem0Store]]:
    """Build platform stores on the fake through the plugin's factory (closed at teardown)."""
    monkeypatch.setenv(KEY_ENV, API_KEY)
    built: list[Mem0Store] = []

    def make(**settings: Any) -> Mem0Store:
        values: dict[str, Any] = {"user_id": "u-test", "host": fake.url, "api_key_env": KEY_ENV}
        values.update(settings)
        name = values.pop("name", "mem0")
        store = build(Mem0Settings(**values), name=name)
        built.append(store)
        return store

    yield make
    for store in built:
        store.close()


def fake_embedder() -> Any:
    """A deterministic offline embedder (used by name from ``local_objects``)."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    return DeterministicFakeEmbedding(size=EMBED_DIMS)


def local_settings(directory: Path, **changes: Any) -> dict[str, Any]:
    """Settings for a real local ``Memory``: embedded qdrant on disk, fake embeddings."""
    values: dict[str, Any] = {
        "mode": "local",
        "user_id": "u-local",
        "local_config": {
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "path": str(directory / "qdrant"),
                    "collection_name": "custody",
                    "embedding_model_dims": EMBED_DIMS,
                    "on_disk": True,
                },
            },
            "embedder": {"provider": "langchain", "config": {}},
            "history_db_path": str(directory / "history.db"),
        },
        "local_objects": {"embedder.config.model": "conftest:fake_embedder"},
    }
    values.update(changes)
    return values
