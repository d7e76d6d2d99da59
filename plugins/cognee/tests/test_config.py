"""The README's ``[[stores]]`` example, through the core's config path, against the fake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_custody_state.config import ConfigError, StoreConfig
from agent_custody_state.storebuild import build_stores
from agent_custody_state_cognee.store import CogneeStore
from agent_custody_state_cognee.testing import FakeCognee
from agent_custody_state_conformance.readme import readme_store_tables
from agent_custody_state_conformance.stores import make_fact

README = Path(__file__).parents[1] / "README.md"


def readme_table() -> dict[str, Any]:
    (table,) = readme_store_tables(README)
    return table


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_readme_example_builds_a_working_store(
    anyio_backend: str, fake: FakeCognee, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = readme_table()
    monkeypatch.setenv(table["api_key_env"], "test-key")
    (store,) = build_stores([StoreConfig(**{**table, "url": fake.url})])
    assert isinstance(store, CogneeStore) and store.name == "cognee"
    external_id = await store.put(make_fact())
    dataset_id = external_id.split("/")[0]
    assert fake.datasets[dataset_id]["name"] == table["dataset_name"]


def test_unset_credential_variable_stops_startup_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = readme_table()
    monkeypatch.delenv(table["api_key_env"], raising=False)
    with pytest.raises(ConfigError, match=table["api_key_env"]):
        build_stores([StoreConfig(**table)])


def test_a_bad_table_names_the_store_and_field() -> None:
    with pytest.raises(ConfigError, match=r"stores\[0\] \(graph\).*exactly one of dataset_id"):
        build_stores([StoreConfig(name="graph", type="cognee", url="http://127.0.0.1:1")])
