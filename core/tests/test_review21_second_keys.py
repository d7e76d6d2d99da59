"""Twenty-first review, second wave: a relative path setting is anchored to the config file's
folder under every key the settings model accepts.

``setting_keys`` read the field's alias only. A model with ``populate_by_name=True`` (or
``validate_by_name=True``) also accepts the field's name, and a table writing ``key_file =
"k.pem"`` validated, but the path was left relative: the store read it from the working
directory, not beside the config file. With ``validate_by_alias=False`` only the name is
accepted, and it was never anchored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from agent_custody_state.cli.ledger_commands import _settings_schema
from agent_custody_state.config import _anchor_settings
from agent_custody_state.plugin import ConfigPath
from agent_custody_state.settingkeys import setting_keys


class ByName(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    key_file: ConfigPath | None = Field(default=None, alias="key-file", description="a key")


class ValidateByName(BaseModel):
    model_config = ConfigDict(validate_by_name=True)
    key_file: ConfigPath | None = Field(default=None, alias="key-file", description="a key")


class NameOnly(BaseModel):
    model_config = ConfigDict(validate_by_name=True, validate_by_alias=False)
    key_file: ConfigPath | None = Field(default=None, alias="key-file", description="a key")


class SerializationOnly(BaseModel):
    key_file: ConfigPath | None = Field(
        default=None, serialization_alias="key-file", description="a key"
    )


@pytest.mark.parametrize("model", [ByName, ValidateByName, NameOnly, SerializationOnly])
def test_the_name_key_is_anchored_when_the_model_accepts_it(model: Any) -> None:
    anchored = _anchor_settings({"key_file": "k.pem"}, model, Path("/cfg"))
    assert model.model_validate(anchored).key_file == str(Path("/cfg") / "k.pem")


@pytest.mark.parametrize("model", [ByName, ValidateByName])
def test_the_alias_key_is_still_anchored(model: Any) -> None:
    anchored = _anchor_settings({"key-file": "k.pem"}, model, Path("/cfg"))
    assert model.model_validate(anchored).key_file == str(Path("/cfg") / "k.pem")


def test_keys_follow_the_model_config() -> None:
    field = ByName.model_fields["key_file"]
    assert setting_keys("key_file", field) == ("key-file",)  # no model: the alias alone
    assert setting_keys("key_file", field, ByName) == ("key-file", "key_file")
    assert setting_keys("key_file", NameOnly.model_fields["key_file"], NameOnly) == ("key_file",)
    assert setting_keys("key_file", SerializationOnly.model_fields["key_file"]) == ("key_file",)


def test_plugins_shows_the_key_the_model_accepts() -> None:
    (shown,) = _settings_schema(NameOnly)["settings"]
    assert shown["name"] == "key_file"  # the alias is refused by this model
    NameOnly.model_validate({shown["name"]: "/k.pem"})
