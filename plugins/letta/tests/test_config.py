"""The README's ``[[stores]]`` example, through the core's config path, against the fake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_custody_state.config import ConfigError, StoreConfig
from agent_custody_state.storebuild import build_stores
from agent_custody_state_conformance.readme import readme_store_tables
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_letta.store import LettaStore
from agent_custody_state_letta.testing import FakeLetta

README = Path(__file__).parents[1] / "README.md"


def readme_table() -> dict[str, Any]:
    (table,) = readme_store_tables(README)
    return table


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_readme_example_builds_a_working_store(
    anyio_backend: str, fake: FakeLetta, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = readme_table()
    fake.add_agent(table["agent_id"])
    monkeypatch.setenv(table["api_key_env"], "test-key")
    (store,) = build_stores([StoreConfig(**{**table, "base_url": fake.url})])
    assert isinstance(store, LettaStore) and store.name == "letta"
    try:
        passage_id = await store.put(make_fact())
        assert "support-bot" in fake.items[passage_id]["tags"]
    finally:
        store.client.close()


def test_unset_key_variable_stops_startup_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    table = readme_table()
    monkeypatch.delenv(table["api_key_env"], raising=False)
    with pytest.raises(ConfigError, match=table["api_key_env"]):
        build_stores([StoreConfig(**table)])
    # Letta Cloud without a key variable is refused at startup too, not at the first write.
    del table["api_key_env"]
    with pytest.raises(ConfigError, match="api_key_env is required for Letta Cloud"):
        build_stores([StoreConfig(**table)])


def test_a_bad_table_names_the_store_and_field() -> None:
    with pytest.raises(ConfigError, match=r"stores\[0\] \(letta\).*agent_id"):
        build_stores([StoreConfig(name="letta", type="letta", agent_id="nope")])
