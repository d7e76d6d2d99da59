"""Plugins are loaded through pluggy: marked hook implementations only, validated with
``check_pending``, chosen with the block and allow lists, and backends declare their behaviour."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.plugin import hookimpl
from agent_custody_state.plugins import PluginManager
from agent_custody_state.server.appender import Appender
from agent_custody_state.server.worker import worker_for

Register = Callable[..., None]


def test_a_misspelled_hook_is_caught_and_nothing_registers(
    isolated_plugins: PluginManager,
) -> None:
    class Misspelled:
        @hookimpl
        def register_store(self, register: Register) -> None:  # the hook is register_stores
            register("never", "x:y")

    isolated_plugins.register_plugin(Misspelled(), name="typo")
    info = isolated_plugins.plugins["typo"]
    assert info.error is not None and "register_store" in info.error
    assert "unknown hook" in info.error
    assert "never" not in isolated_plugins.stores
    assert not isolated_plugins.pm.is_registered(Misspelled)
    # The manager is still usable: the next plugin registers normally.

    class Fine:
        @hookimpl
        def register_stores(self, register: Register) -> None:
            register("fine", "x:y")

    isolated_plugins.register_plugin(Fine(), name="fine")
    assert isolated_plugins.plugins["fine"].error is None and "fine" in isolated_plugins.stores


def test_only_marked_implementations_are_called(isolated_plugins: PluginManager) -> None:
    called: list[str] = []

    class Unmarked:
        def register_stores(self, register: Register) -> None:  # no @hookimpl: not a hook
            called.append("unmarked")
            register("sneaky", "x:y")

    isolated_plugins.register_plugin(Unmarked(), name="unmarked")
    assert called == [] and "sneaky" not in isolated_plugins.stores
    assert isolated_plugins.plugins["unmarked"].registers == []


def test_hookimpl_options_are_honoured(isolated_plugins: PluginManager) -> None:
    """``specname`` lets a function of another name implement a hook (pluggy's option; a
    ``getattr`` lookup of the hook's name would miss it)."""

    class Renamed:
        @hookimpl(specname="register_stores")
        def add_my_stores(self, register: Register) -> None:
            register("renamed", "x:y", description="via specname")

    isolated_plugins.register_plugin(Renamed(), name="renamed")
    assert isolated_plugins.stores["renamed"].description == "via specname"
    assert isolated_plugins.stores["renamed"].plugin == "renamed"


def test_a_failed_registration_leaves_no_partial_state(isolated_plugins: PluginManager) -> None:
    class Half:
        @hookimpl
        def register_stores(self, register: Register) -> None:
            register("first", "x:y")
            raise RuntimeError("the second store's settings are broken")

    isolated_plugins.register_plugin(Half(), name="half")
    assert "first" not in isolated_plugins.stores
    assert "the second store's settings are broken" in (
        isolated_plugins.plugins["half"].error or ""
    )


def _dist(site: Path, name: str, module: str, source: str) -> None:
    # Installers write the directory with underscores (``acme_one-1.0.dist-info``); importlib
    # takes the name before the first dash, so dashes would make every acme-* one distribution.
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[agent_custody_state]\n{name} = {module}\n")
    (site / f"{module}.py").write_text(source)


STORE_PLUGIN = (
    "from agent_custody_state.plugin import hookimpl\n"
    "@hookimpl\n"
    "def register_stores(register):\n"
    "    register({name!r}, 'x:y')\n"
)


def _plugins_json(site: Path, *, status: int = 0, **env: str) -> dict[str, Any]:
    """``plugins --json`` by plugin name; ``status``: the exit status expected (1 when a
    plugin failed to load)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_CUSTODY_")}
    full.update(PYTHONPATH=str(site), **env)
    out = subprocess.run(
        [sys.executable, "-m", "agent_custody_state", "plugins", "--json"],
        capture_output=True,
        text=True,
        env=full,
    )
    assert out.returncode == status, out.stderr
    return {p["name"]: p for p in json.loads(out.stdout)}


def test_allow_list_loads_only_the_named_plugins(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _dist(site, "acme-one", "acme_one", STORE_PLUGIN.format(name="one"))
    _dist(site, "acme-two", "acme_two", STORE_PLUGIN.format(name="two"))
    both = _plugins_json(site)
    assert {"acme-one", "acme-two", "builtins"} <= set(both)
    only = _plugins_json(site, AGENT_CUSTODY_PLUGINS="acme-two")
    assert "acme-one" not in only and only["acme-two"]["registers"] == ["store two"]
    assert only["builtins"]["error"] is None  # the builtins always load unless blocked
    blocked = _plugins_json(
        site, AGENT_CUSTODY_PLUGINS="acme-two", AGENT_CUSTODY_BLOCK_PLUGINS="acme-two"
    )
    assert blocked["acme-two"]["error"] == "blocked"
    assert blocked["acme-two"]["status"] == "blocked"  # and no failure: the exit status is 0


def test_a_misspelled_hook_in_an_installed_plugin_is_reported(tmp_path: Path) -> None:
    site = tmp_path / "site"
    source = STORE_PLUGIN.format(name="x").replace("def register_stores", "def register_stors")
    _dist(site, "acme-typo", "acme_typo", source)
    data = _plugins_json(site, status=1)
    assert "register_stors" in data["acme-typo"]["error"]
    assert data["acme-typo"]["status"] == "failed"
    assert data["acme-typo"]["registers"] == []


class ThirdPartyBackend(MemoryBackend):
    """A backend from another package: it declares its behaviour, nothing looks up its name."""

    kind = "acme-log"
    min_batch = 7
    blocking = True
    shared = False


def test_a_third_party_backend_declares_its_behaviour(
    tmp_path: Path, isolated_plugins: PluginManager
) -> None:
    class Plugin:
        @hookimpl
        def register_event_backends(self, register: Register) -> None:
            register("acme-log", ThirdPartyBackend, schemes=("acme",), description="test")

    isolated_plugins.register_plugin(Plugin(), name="acme")
    with Ledger("acme://x") as ledger:
        assert ledger.backend.kind == "acme-log"
        worker = worker_for(ledger)
        try:
            assert worker.inline is False  # blocking: the ledger thread, like JSONL or SQLite
            assert Appender(ledger, worker).min_batch == 7
        finally:
            worker.close()
    with Ledger(MemoryBackend()) as ledger:
        worker = worker_for(ledger)
        assert worker.inline is True and Appender(ledger, worker).min_batch == 2
        worker.close()


def test_the_fallback_backend_is_declared_not_named(
    tmp_path: Path, isolated_plugins: PluginManager
) -> None:
    class Plugin:
        @hookimpl
        def register_event_backends(self, register: Register) -> None:
            register("acme-any", ThirdPartyBackend, fallback=True)

    without_builtins = PluginManager(load_entry_points=False, blocked={"builtins"})
    without_builtins.register_plugin(Plugin(), name="acme")
    assert without_builtins.backend_for(str(tmp_path / "ledger.log")).name == "acme-any"
    assert isolated_plugins.backend_for(str(tmp_path / "ledger.log")).name == "jsonl"


@pytest.mark.parametrize("hook", ["register_event_backends", "register_stores"])
def test_registration_hooks_take_name_first(hook: str, isolated_plugins: PluginManager) -> None:
    """One word per concept: both registrations take ``name`` (SPEC-era ``type_name`` is gone)."""
    seen: list[str] = []

    class Plugin:
        pass

    def impl(register: Register) -> None:
        register(name=f"{hook}-named", factory="x:y")
        seen.append(hook)

    setattr(Plugin, hook, staticmethod(hookimpl(impl)))
    isolated_plugins.register_plugin(Plugin(), name=hook)
    assert seen == [hook]
    registry = isolated_plugins.backends if "backends" in hook else isolated_plugins.stores
    assert f"{hook}-named" in registry
