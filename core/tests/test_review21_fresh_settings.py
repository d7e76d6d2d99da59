"""Twenty-first review, fresh eyes: ``agent-custody-memory plugins`` and PH-6 name a store
setting by the key a ``[[stores]]`` table writes, its alias when it has one.

A third-party settings model described with ``use_attribute_docstrings`` whose field
``api_token`` has the alias ``api-token``: the table is validated by the alias
(``storebuild``: ``model_validate``), so ``api_token = ...`` is refused, yet ``plugins`` listed
``api_token`` and PH-6 named ``acme.api_token``: an operator copying the key was refused. A
``validation_alias`` alone is the key alike.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from agent_custody_state.cli.ledger_commands import _settings_schema
from agent_custody_state.plugins import StoreSpec
from agent_custody_state_conformance import PluginHygiene

SETTINGS = '''
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class Settings(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)

    api_token: str = Field(alias="api-token")
    """the vendor's token"""
    notes: Path = Field(default=Path("notes.json"), alias="notes-file")
    """where the notes are kept"""
    region: str = "eu"
    """the vendor's region"""
    bare: str = Field(default="x", alias="bare-key")
    legacy: str = Field(default="", validation_alias="legacy-key")
'''


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The settings model, imported from a file (attribute docstrings are read from source)."""
    (tmp_path / "acme_fresh21.py").write_text(SETTINGS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module("acme_fresh21").Settings


def test_plugins_lists_the_key_a_table_writes(model: Any) -> None:
    fields = {f["name"]: f for f in _settings_schema(model)["settings"]}
    assert sorted(fields) == ["api-token", "bare-key", "legacy-key", "notes-file", "region"]
    assert fields["api-token"]["description"] == "the vendor's token"
    assert fields["notes-file"]["path"] is True
    shown = {name: "value" for name, f in fields.items() if f["required"]}
    model.model_validate(shown)  # the keys shown are the keys accepted
    with pytest.raises(ValidationError):
        model.model_validate({"api_token": "value"})


class _Hygiene(PluginHygiene):
    """PH-6 over one registered store type, without an installed distribution."""

    entry_point = "acme-fresh21"
    spec: StoreSpec

    def _loaded(self) -> Any:
        return SimpleNamespace(stores={self.spec.name: self.spec})


def test_ph6_names_the_undescribed_key_as_a_table_writes_it(model: Any) -> None:
    suite = _Hygiene()
    suite.spec = StoreSpec("acme", "acme_fresh21:build", model, "", "acme-fresh21")
    with pytest.raises(AssertionError) as caught:
        suite.test_settings_are_described()
    message = "settings without a description: acme.bare-key, acme.legacy-key\n"
    assert str(caught.value).startswith(message)
    assert "api" not in str(caught.value)  # described by its docstring, alias or not


def test_an_aliased_path_setting_is_anchored_at_the_config_files_folder(model: Any) -> None:
    """The anchoring looked the value up by the field's name: ``notes-file = "notes.json"`` in
    a table was left relative, so it was read from the current folder, not the config's."""
    from pydantic import AliasChoices, BaseModel, Field

    from agent_custody_state.config import _anchor_settings

    folder = Path("/etc/custody")
    anchored = _anchor_settings({"notes-file": "notes.json", "region": "x"}, model, folder)
    assert anchored == {"notes-file": str(folder / "notes.json"), "region": "x"}

    class Choices(BaseModel):
        data: Path = Field(validation_alias=AliasChoices("data-dir", "data_dir"))

    anchored = _anchor_settings({"data_dir": "d"}, Choices, folder)
    assert anchored == {"data_dir": str(folder / "d")}
