"""Checks that a store's settings model shows no password: in its ``repr`` and ``str``, and in
the ``ValidationError`` refusing a table.

A plugin's tests call them with a table holding a password where the model takes one (a
``base_url = "https://user:PASSWORD@proxy"``, a DSN inside a nested table)::

    from agent_custody_state_conformance.masking import assert_masked, assert_refused_quietly

    assert_masked(AcmeSettings(url="https://u:PASSWORD@acme"), "PASSWORD")
    assert_refused_quietly(AcmeSettings, {"url": "https://u:PASSWORD@acme"}, "PASSWORD")

The model takes ``plugin.MaskedRepr`` first among its bases (``repr``) and
``hide_input_in_errors=True`` in its ``model_config`` (pydantic's refusal quotes the input).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError


def assert_masked(settings: BaseModel, password: str) -> None:
    """``repr(settings)`` and ``str(settings)`` show ``***`` for ``password``; the value itself
    is unchanged (what the store connects with still holds it)."""
    for shown in (repr(settings), str(settings)):
        assert password not in shown, f"{type(settings).__name__} shows the password: {shown}"
        assert "***" in shown, f"{type(settings).__name__} shows no mask: {shown}"
    assert password in settings.model_dump_json(), "the masking changed the value itself"


def assert_refused_quietly(model: type[BaseModel], table: Mapping[str, Any], password: str) -> None:
    """``model`` refuses ``table`` (which holds ``password``) without quoting it in the error's
    text (what a traceback or a log shows; ``errors()`` keeps the input, for a program)."""
    with pytest.raises(ValidationError) as refused:
        model.model_validate(dict(table))
    error = refused.value
    for shown in (str(error), repr(error)):
        assert password not in shown, f"{model.__name__}'s refusal quotes the input: {shown}"
