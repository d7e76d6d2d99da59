"""A plugin's broken store registration is named at start (``storebuild``), not later.

A misspelt factory or settings reference said "cannot start: AttributeError ... (ledger ...);
check the location", pointing at the ledger; a factory returning ``None`` or a coroutine failed
inside the store set with a traceback. Each is now one ``ConfigError`` naming the table and the
plugin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from agent_custody_state import hookimpl
from agent_custody_state.config import ConfigError, load_config
from agent_custody_state.ledger.model import Fact
from agent_custody_state.storebuild import build_stores
from agent_custody_state.stores.inprocess import InProcessStore


def make_fact() -> Fact:
    return Fact("f1", "acct:42", "plan", "pro", "org", "agent", valid_from="2026-01-01")


class Settings(BaseModel):
    label: str = "x"


async def _coroutine_factory(settings: Settings, *, name: str) -> Any:
    return InProcessStore(name)


def _register(isolated: Any, factory: Any, settings: Any = Settings) -> None:
    class Plugin:
        @hookimpl
        def register_stores(self, register: Callable[..., None]) -> None:
            register("notes", factory, settings=settings)

    isolated.register_plugin(Plugin(), name="notes-plugin")


def _build() -> list[Any]:
    return build_stores(load_config(None, stores=[{"name": "n", "type": "notes"}]).stores)


@pytest.mark.parametrize(
    ("factory", "said"),
    [
        (lambda settings, *, name: None, "returned NoneType, not a store"),
        (_coroutine_factory, "returned coroutine, not a store"),
        ("agent_custody_state.stores.inprocess:NoSuchStore", "AttributeError"),
    ],
)
def test_a_broken_factory_is_named_with_its_plugin(
    isolated_plugins: Any, factory: Any, said: str
) -> None:
    _register(isolated_plugins, factory)
    with pytest.raises(ConfigError) as caught:
        _build()
    assert said in str(caught.value) and "notes-plugin" in str(caught.value)


def test_a_misspelt_settings_reference_is_named_with_its_plugin(isolated_plugins: Any) -> None:
    _register(isolated_plugins, InProcessStore, "agent_custody_state.stores.inprocess:Nope")
    with pytest.raises(ConfigError) as caught:
        _build()
    assert str(caught.value).startswith("stores[0] (n): the notes store (plugin notes-plugin)")
    assert "AttributeError" in str(caught.value)
