"""Configuring the mem0 store: the settings model, secrets from named variables, the README's
examples through the core's config path, and what importing mem0 is allowed to do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import API_KEY, KEY_ENV
from pydantic import ValidationError

from agent_custody_state.config import StoreConfig
from agent_custody_state.storebuild import build_stores
from agent_custody_state.stores import StoreError
from agent_custody_state_conformance.readme import readme_store_tables
from agent_custody_state_mem0.local import PLACEHOLDER_LLM, local_config
from agent_custody_state_mem0.settings import Mem0Settings
from agent_custody_state_mem0.store import Mem0Store, build
from agent_custody_state_mem0.testing import FakeMem0

README = Path(__file__).parents[1] / "README.md"


def readme_stores() -> list[dict[str, Any]]:
    tables = readme_store_tables(README)
    assert len(tables) == 2
    return tables


@pytest.mark.parametrize("table", readme_stores(), ids=lambda t: t["name"])
def test_readme_examples_validate(table: dict[str, Any]) -> None:
    settings = {k: v for k, v in table.items() if k not in ("name", "type")}
    assert table["type"] == "mem0"
    parsed = Mem0Settings.model_validate(settings)
    assert parsed.user_id == "support-team"


def test_settings_reject_what_does_not_apply() -> None:
    with pytest.raises(ValidationError, match="user_id"):
        Mem0Settings.model_validate({})
    with pytest.raises(ValidationError, match="Extra inputs"):
        Mem0Settings(user_id="u", api_key="sk-in-the-file")  # type: ignore[call-arg]
    with pytest.raises(
        ValidationError, match="local_config do\\(es\\) not apply to mode 'platform'"
    ):
        Mem0Settings(user_id="u", local_config={"vector_store": {}})
    with pytest.raises(ValidationError, match="host, app_id do\\(es\\) not apply to mode 'local'"):
        Mem0Settings(user_id="u", mode="local", host="http://x", app_id="a")
    with pytest.raises(ValidationError, match="api_key_env"):
        Mem0Settings(user_id="u", api_key_env="")


def test_unset_key_variable_fails_at_build_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACS_UNSET_MEM0_KEY", raising=False)
    with pytest.raises(StoreError) as caught:
        build(Mem0Settings(user_id="u", api_key_env="ACS_UNSET_MEM0_KEY"), name="recall")
    assert caught.value.store == "recall"
    assert "ACS_UNSET_MEM0_KEY is not set" in caught.value.message


def test_config_tables_build_through_the_registered_plugin(
    fake: FakeMem0, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``[[stores]]`` table goes through the entry point, the settings model and ``build``."""
    monkeypatch.setenv(KEY_ENV, API_KEY)
    table = StoreConfig.model_validate(
        {"name": "recall", "type": "mem0", "user_id": "u", "host": fake.url, "api_key_env": KEY_ENV}
    )
    (store,) = build_stores([table])
    try:
        assert isinstance(store, Mem0Store) and store.name == "recall"
    finally:
        store.close()


def test_local_config_adds_secrets_objects_and_a_placeholder_llm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACS_TEST_EMBED_KEY", "sk-embed")
    table = {"vector_store": {"provider": "qdrant", "config": {"path": "/tmp/q"}}}
    settings = Mem0Settings(
        user_id="u",
        mode="local",
        local_config=table,
        local_env={"embedder.config.api_key": "ACS_TEST_EMBED_KEY"},
        local_objects={"embedder.config.model": "conftest:fake_embedder"},
    )
    config = local_config(settings, "mem0")
    assert config["embedder"]["config"]["api_key"] == "sk-embed"
    assert type(config["embedder"]["config"]["model"]).__name__ == "DeterministicFakeEmbedding"
    assert config["llm"] == PLACEHOLDER_LLM
    assert "embedder" not in table  # the settings' own table is not modified
    own_llm = {"provider": "ollama", "config": {"model": "llama3"}}
    mine = settings.model_copy(update={"local_config": {**table, "llm": own_llm}})
    assert local_config(mine, "mem0")["llm"] == own_llm

    monkeypatch.delenv("ACS_TEST_EMBED_KEY")
    with pytest.raises(StoreError, match="ACS_TEST_EMBED_KEY is not set"):
        local_config(settings, "mem0")


def test_importing_mem0_through_the_store_is_quiet(tmp_path: Path) -> None:
    """Telemetry off and mem0's files kept out of ``~`` unless the settings say otherwise."""
    code = """
import json, os, sys
os.environ["ACS_K"] = "k"
from agent_custody_state_mem0.store import build
build({"user_id": "u", "api_key_env": "ACS_K", "host": "http://127.0.0.1:9"})
from mem0.memory import telemetry
print(json.dumps([os.environ["MEM0_TELEMETRY"], os.environ["MEM0_DIR"], telemetry.MEM0_TELEMETRY]))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEM0_")}
    env.update(HOME=str(tmp_path / "home"), TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "home").mkdir()
    (tmp_path / "tmp").mkdir()
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    flag, directory, effective = json.loads(out.stdout.strip().splitlines()[-1])
    assert (flag, effective) == ("false", False)
    assert Path(directory).parent == tmp_path / "tmp"
    assert (Path(directory) / "config.json").exists()
    assert not (tmp_path / "home" / ".mem0").exists()
