"""One plugin's ``event_appended`` hook that raises does not silence the others
(``agent_custody_state.listeners``): pluggy stops at the first exception, so an audit plugin
called after a raising one never heard of the event, though docs/hooks.md promises that a
hook's exception "is logged and ignored"."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.plugin import hookimpl
from agent_custody_state.plugins import PluginManager


class Audit:
    def __init__(self) -> None:
        self.heard: list[str] = []

    @hookimpl
    def event_appended(self, event: Any) -> None:
        self.heard.append(event.event_id)


class Broken:
    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def event_appended(self, ledger: Any, event: Any) -> None:
        self.calls += 1
        raise RuntimeError("the broken plugin's own bug")


class Wrapping:
    def __init__(self) -> None:
        self.around = 0

    @hookimpl(wrapper=True)
    def event_appended(self, ledger: Any, event: Any) -> Any:
        self.around += 1
        return (yield)


def _write(ledger: Ledger, n: int) -> list[str]:
    return [
        ledger.assert_fact(
            space="s", actor="a", subject=f"acct:{i}", predicate="plan", value=i
        ).event_id
        for i in range(n)
    ]


@pytest.mark.parametrize("broken_first", [True, False])
def test_a_raising_hook_leaves_the_others_hearing(
    isolated_plugins: PluginManager, caplog: pytest.LogCaptureFixture, broken_first: bool
) -> None:
    audit, broken = Audit(), Broken()
    plugins = [("broken", broken), ("audit", audit)]
    for name, plugin in plugins if broken_first else plugins[::-1]:
        isolated_plugins.register_plugin(plugin, name=name)
    with caplog.at_level(logging.ERROR), Ledger("memory:") as ledger:
        written = _write(ledger, 3)
        written += [
            e.event_id
            for e in ledger.assert_many(
                [dict(space="s", actor="a", subject="acct:9", predicate="p", value=1)]
            )
        ]
    assert audit.heard == written
    assert broken.calls == 4
    failures = [r for r in caplog.records if "the broken plugin's own bug" in (r.exc_text or "")]
    assert len(failures) == 4
    assert all("plugin broken" in r.getMessage() for r in failures)


def test_with_a_wrapper_the_hook_is_one_pluggy_call(isolated_plugins: PluginManager) -> None:
    audit, wrapping = Audit(), Wrapping()
    isolated_plugins.register_plugin(audit, name="audit")
    isolated_plugins.register_plugin(wrapping, name="wrapping")
    with Ledger("memory:") as ledger:
        written = _write(ledger, 2)
    assert audit.heard == written and wrapping.around == 2
