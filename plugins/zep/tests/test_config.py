"""Configuring the Zep store: the settings model, the README's examples and the core's path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import API_KEY, KEY_ENV
from pydantic import ValidationError

from agent_custody_state.config import StoreConfig
from agent_custody_state.storebuild import build_stores
from agent_custody_state.stores import StoreError
from agent_custody_state_conformance.readme import readme_store_tables
from agent_custody_state_zep.settings import ZepSettings
from agent_custody_state_zep.store import ZepStore, build
from agent_custody_state_zep.testing import FakeZep

README = Path(__file__).parents[1] / "README.md"


def readme_stores() -> list[dict[str, Any]]:
    tables = readme_store_tables(README)
    assert len(tables) == 2
    return tables


@pytest.mark.parametrize("table", readme_stores(), ids=lambda t: t["name"])
def test_readme_examples_validate(table: dict[str, Any]) -> None:
    assert table["type"] == "zep"
    ZepSettings.model_validate({k: v for k, v in table.items() if k not in ("name", "type")})


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/api/v4"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000/api/v4"),
        ("https://api.getzep.com/api/v4/", "https://api.getzep.com/api/v4"),
        ("https://proxy.example/zep/api/v4", "https://proxy.example/zep/api/v4"),
    ],
)
def test_base_url_gets_the_v4_prefix(given: str, expected: str) -> None:
    graph = "3f0b6c1e-8a5d-4d5e-9a43-1c2b7de0a9f1"
    assert ZepSettings(base_url=given, graph_uuid=graph).base_url == expected


def test_settings_reject_mistakes() -> None:
    with pytest.raises(ValidationError, match="exactly one of graph_uuid, graph_id, user_id"):
        ZepSettings()
    with pytest.raises(ValidationError, match=r"\(got graph_id, user_id\)"):
        ZepSettings(graph_id="g", user_id="u")
    with pytest.raises(ValidationError, match="give a developer-assigned id as graph_id"):
        ZepSettings(graph_uuid="support-kb")
    with pytest.raises(ValidationError, match="http"):
        ZepSettings(user_id="u", base_url="api.getzep.com")
    with pytest.raises(ValidationError, match="Extra inputs"):
        ZepSettings(user_id="u", api_key="z_in_the_file")  # type: ignore[call-arg]


def test_unset_key_variable_fails_at_build_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACS_UNSET_ZEP_KEY", raising=False)
    with pytest.raises(StoreError) as caught:
        build({"user_id": "u", "api_key_env": "ACS_UNSET_ZEP_KEY"}, name="graph")
    assert caught.value.store == "graph"
    assert "ACS_UNSET_ZEP_KEY is not set" in caught.value.message


def test_config_tables_build_through_the_registered_plugin(
    fake: FakeZep, graph: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, API_KEY)
    table = StoreConfig.model_validate(
        {"name": "graph", "type": "zep", "graph_uuid": graph, "base_url": fake.url,
         "api_key_env": KEY_ENV}
    )  # fmt: skip
    (store,) = build_stores([table])
    try:
        assert isinstance(store, ZepStore) and store.name == "graph"
        assert store.graph.settings.base_url == fake.url + "/api/v4"
    finally:
        store.close()
