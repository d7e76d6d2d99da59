"""The mem0 store on the real open-source ``Memory`` (embedded qdrant, offline embeddings)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import local_settings

from agent_custody_state.stores import StoreError, fact_text
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_mem0.store import Mem0Store, build

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Mem0Store]:
    store = build(local_settings(tmp_path, agent_id="bot"), name="mem0-local")
    yield store
    store.close()


async def test_equal_texts_stay_verbatim_and_separate(store: Mem0Store) -> None:
    memory = store.backend._memory  # type: ignore[attr-defined]
    first, second = make_fact(), make_fact()
    first_id, second_id = await store.put(first), await store.put(second)
    assert first_id != second_id
    for memory_id, fact in ((first_id, first), (second_id, second)):
        record = memory.get(memory_id)
        assert record["memory"] == fact_text(fact)  # no marker: nothing was merged
        assert record["metadata"]["factId"] == fact.fact_id
        assert (record["user_id"], record["agent_id"]) == ("u-local", "bot")
    await store.remove(first_id, first)
    assert memory.get(first_id) is None
    assert await store.verify_removed(first_id, first) is True
    assert await store.verify_removed(second_id, second) is False


async def test_memories_survive_a_restart(tmp_path: Path) -> None:
    fact = make_fact()
    store = build(local_settings(tmp_path), name="mem0-local")
    memory_id = await store.put(fact)
    store.close()
    again = build(local_settings(tmp_path), name="mem0-local")
    try:
        assert await again.verify_removed(memory_id, fact) is False
        await again.remove(memory_id, fact)
        assert await again.verify_removed(memory_id, fact) is True
    finally:
        again.close()


def test_a_broken_local_config_fails_at_build(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    settings["local_config"]["vector_store"]["provider"] = "no-such-store"
    with pytest.raises(StoreError, match="local mem0 did not start"):
        build(settings, name="mem0-local")
