"""Relative paths in store settings resolve against the config file's folder, as the ledger's
do (issue 14.3); which settings are paths is declared by the plugin's settings model
(``ConfigPath`` or ``pathlib.Path``), never by store name. ``plugins --json`` shows it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agent_custody_state import hookimpl
from agent_custody_state.cli import main
from agent_custody_state.config import load_config
from agent_custody_state.plugin import ConfigPath
from agent_custody_state.storebuild import build_stores


class Settings(BaseModel):
    db: ConfigPath
    cache: ConfigPath | None = None
    folder: Path | None = None
    dsn: ConfigPath | None = None
    label: str = "not/a/path"


@pytest.fixture
def built(isolated_plugins: Any) -> list[Settings]:
    seen: list[Settings] = []

    class Store:
        def __init__(self, name: str) -> None:
            self.name = name

        async def put(self, fact: Any) -> str:
            return fact.fact_id

        async def remove(self, external_id: str, fact: Any) -> None:
            return None

    def factory(settings: Settings, *, name: str) -> Store:
        seen.append(settings)
        return Store(name)

    class Plugin:
        @hookimpl
        def register_stores(self, register: Callable[..., None]) -> None:
            register("files", factory, settings=Settings, description="keeps files")

    isolated_plugins.register_plugin(Plugin(), name="file-stores")
    return seen


def test_relative_path_settings_follow_the_config_file(
    tmp_path: Path, built: list[Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    config = etc / "memory.toml"
    config.write_text(
        "[[stores]]\n"
        'name = "notes"\ntype = "files"\n'
        'db = "data/notes.sqlite"\ncache = "/var/cache/notes"\nfolder = "blobs"\n'
        'dsn = "sqlite:///elsewhere.db"\nlabel = "team/notes"\n'
    )
    monkeypatch.chdir(tmp_path)
    build_stores(load_config(config).stores)
    settings = built[0]
    assert settings.db == str(etc / "data" / "notes.sqlite")
    assert settings.cache == "/var/cache/notes"  # absolute: as written
    assert settings.folder == etc / "blobs"  # typed pathlib.Path: a path too
    assert settings.dsn == "sqlite:///elsewhere.db"  # a URL is no relative path
    assert settings.label == "team/notes"  # not declared a path: untouched


def test_a_table_from_the_environment_stays_relative_to_the_working_directory(
    tmp_path: Path, built: list[Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "etc" / "memory.toml"
    config.parent.mkdir()
    config.write_text('[[stores]]\nname = "notes"\ntype = "files"\ndb = "from-file.db"\n')
    monkeypatch.setenv(
        "AGENT_CUSTODY_STORES", json.dumps([{"name": "notes", "type": "files", "db": "env.db"}])
    )
    build_stores(load_config(config).stores)
    assert built[0].db == "env.db"


def test_plugins_json_lists_store_settings(
    built: list[Settings], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plugins", "--json"]) == 0
    plugins = {p["name"]: p for p in json.loads(capsys.readouterr().out)}
    store = plugins["file-stores"]["stores"][0]
    assert (store["type"], store["description"]) == ("files", "keeps files")
    fields = {f["name"]: f for f in store["settings"]}
    assert fields["db"] == {
        "name": "db",
        "type": fields["db"]["type"],
        "required": True,
        "default": None,
        "description": "",
        "path": True,
    }
    assert [n for n, f in fields.items() if f["path"]] == ["db", "cache", "folder", "dsn"]
    assert fields["label"]["default"] == "not/a/path" and not fields["label"]["required"]
    assert plugins["file-stores"]["status"] == "loaded"
    builtins = plugins["builtins"]
    assert [s["type"] for s in builtins["stores"]] == ["memory"]
    assert {b["name"] for b in builtins["eventBackends"]} == {"jsonl", "memory"}


def test_plugins_text_lists_settings_and_a_broken_settings_model(
    isolated_plugins: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    class Plugin:
        @hookimpl
        def register_stores(self, register: Callable[..., None]) -> None:
            register("vendor", "x:y", settings="no_such_vendor_sdk.settings:Model")

    isolated_plugins.register_plugin(Plugin(), name="vendor-store")
    assert main(["plugins"]) == 0  # the plugin loaded; only its settings need the SDK
    out = capsys.readouterr().out
    assert "settings: (unavailable: ModuleNotFoundError" in out
    assert "settings: lag_checks?, fail?" in out
