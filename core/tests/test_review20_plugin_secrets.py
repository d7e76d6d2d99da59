"""Twentieth review, last part: the plugins' settings models show no password.

The core's configuration models mask URL passwords, ``password=`` parameters and registered
secrets in their ``repr`` and ``str`` (``MaskedRepr``); the plugins' settings did not: a
``repr`` of Letta's, Zep's, Cognee's, mem0's or LangGraph's settings printed
``https://user:PASSWORD@...`` as configured, and pydantic's refusal of a table quoted it (its
``input_value``). ``MaskedRepr`` is now part of ``agent_custody_state.plugin`` and every plugin's
settings model takes it, with ``hide_input_in_errors``. This session has no plugin installed:
the models are read from their source here; each plugin's own
``test_review20_plugin_secrets.py`` checks its model's behaviour.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from agent_custody_state import plugin

ROOT = Path(__file__).resolve().parents[2]
_MODEL_BASES = {"BaseModel", "BaseSettings"}


def _settings_models() -> list[tuple[str, ast.ClassDef]]:
    """Every pydantic model class in the plugins' sources, as ``(path, class)``."""
    found = []
    for path in sorted(ROOT.glob("plugins/*/src/**/*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                names = {b.id for b in node.bases if isinstance(b, ast.Name)}
                if names & _MODEL_BASES:
                    found.append((str(path.relative_to(ROOT)), node))
    return found


MODELS = _settings_models()


def test_the_plugins_settings_models_are_found() -> None:
    plugins = {path.split("/")[1] for path, _ in MODELS}
    assert {"cognee", "langgraph", "letta", "mem0", "pgvector", "zep"} <= plugins


@pytest.mark.parametrize(
    ("path", "node"), MODELS, ids=[f"{p.split('/')[1]}:{n.name}" for p, n in MODELS]
)
def test_every_plugin_settings_model_masks_its_repr_and_refusals(
    path: str, node: ast.ClassDef
) -> None:
    first = node.bases[0]
    assert isinstance(first, ast.Name) and first.id == "MaskedRepr", (
        f"{path}: {node.name} must take plugin.MaskedRepr first among its bases"
    )
    config = [
        keyword
        for statement in node.body
        if isinstance(statement, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "model_config" for t in statement.targets)
        and isinstance(statement.value, ast.Call)
        for keyword in statement.value.keywords
    ]
    hidden = [k for k in config if k.arg == "hide_input_in_errors"]
    assert hidden and isinstance(hidden[0].value, ast.Constant) and hidden[0].value.value is True, (
        f"{path}: {node.name}'s model_config needs hide_input_in_errors=True"
    )


class _AcmeSettings(plugin.MaskedRepr, BaseModel):
    """A third party's settings model, written as the plugin docs say."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    url: str
    dataset: str | None = None

    @model_validator(mode="after")
    def _dataset(self) -> _AcmeSettings:
        if not self.dataset:
            raise ValueError("give dataset")
        return self


def test_masked_repr_is_part_of_the_plugin_surface() -> None:
    assert "MaskedRepr" in plugin.__all__
    settings = _AcmeSettings(url="https://u:Hunter2Secret@acme.example", dataset="d")
    assert "Hunter2Secret" not in repr(settings) and "Hunter2Secret" not in str(settings)
    assert "https://u:***@acme.example" in repr(settings)
    assert settings.url == "https://u:Hunter2Secret@acme.example"
    with pytest.raises(ValidationError) as refused:
        _AcmeSettings.model_validate({"url": "https://u:Hunter2Secret@acme.example"})
    assert "Hunter2Secret" not in str(refused.value)
