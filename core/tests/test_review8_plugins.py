"""A third party's plugin, broken the ways people break one (eighth review): each mistake is a
one-line error naming the plugin, in ``plugins``, at ``serve`` start and in the hygiene suite.

Throwaway plugins are installed as a ``.dist-info`` with ``entry_points.txt`` on a private
``PYTHONPATH`` entry (with ``Requires-Dist`` lines, which ``test_plugin_loading``'s helper does
not write) and looked at from a child process, so the test process's plugins stay untouched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state.plugin import hookimpl
from agent_custody_state.plugins import PluginManager

Register = Callable[..., None]

STORE = (
    "from agent_custody_state.plugin import hookimpl\n"
    "@hookimpl\n"
    "def register_stores(register):\n"
    "    register({type!r}, {factory!r})\n"
)


def _dist(
    site: Path,
    name: str,
    module: str,
    source: str,
    *,
    entry: str = "",
    requires: tuple[str, ...] = (),
) -> None:
    """Install distribution ``name`` (entry point ``entry`` or ``name`` -> ``module``)."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    lines = [f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"]
    lines += [f"Requires-Dist: {r}\n" for r in requires]
    (info / "METADATA").write_text("".join(lines))
    (info / "entry_points.txt").write_text(f"[agent_custody_state]\n{entry or name} = {module}\n")
    (site / f"{module}.py").write_text(source)


def _run(site: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_CUSTODY_")}
    env["PYTHONPATH"] = str(site)
    return subprocess.run(
        [sys.executable, "-m", "agent_custody_state", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


def _plugins(site: Path) -> tuple[dict[str, Any], str]:
    out = _run(site, "plugins", "--json")
    return {p["name"]: p for p in json.loads(out.stdout)}, out.stderr


def test_a_hook_returning_its_registrations_fails_naming_the_hook(
    isolated_plugins: PluginManager,
) -> None:
    """A hook that returns what it means to register (instead of calling ``register``) used to
    load as "nothing", silently; it is now a failed plugin saying what to do."""

    class Returns:
        @hookimpl
        def register_stores(self, register: Register) -> Any:
            return {"acme-notes": "acme.store:build"}

    isolated_plugins.register_plugin(Returns(), name="acme-notes")
    error = isolated_plugins.plugins["acme-notes"].error or ""
    assert "register_stores returned dict: call register(...) instead" in error
    assert "plugin acme-notes: register_stores returned dict" in isolated_plugins.errors[0]


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"schemes": "notes"}, "schemes must be a tuple of valid texts, not 'notes'"),
        ({"suffixes": ".notes"}, "suffixes must be a tuple of valid texts, not '.notes'"),
        ({"schemes": ("notes://",)}, "schemes must be a tuple of valid texts, not ('notes://',)"),
        ({"suffixes": ("",)}, "suffixes must be a tuple of valid texts, not ('',)"),
        ({"factory": "acme.backend.NotesBackend"}, "is not 'module:attr' or callable"),
    ],
)
def test_a_backend_registration_of_the_wrong_shape_is_refused(
    isolated_plugins: PluginManager, options: dict[str, Any], problem: str
) -> None:
    """``schemes="notes"`` used to register the schemes n, o, t, e, s (and ``suffixes=".db"``
    every path ending in d, b or a dot): a ledger.sqlite went to the plugin's backend."""
    arguments = {"name": "notes", "factory": "acme.backend:NotesBackend", **options}

    class Shaped:
        @hookimpl
        def register_event_backends(self, register: Register) -> None:
            register(arguments.pop("name"), arguments.pop("factory"), **arguments)

    isolated_plugins.register_plugin(Shaped(), name="acme-notes")
    assert problem in (isolated_plugins.plugins["acme-notes"].error or "")
    assert "notes" not in isolated_plugins.backends
    assert isolated_plugins.backend_for("ledger.db.jsonl").name == "jsonl"


def test_a_store_factory_that_is_not_a_reference_is_refused(
    isolated_plugins: PluginManager,
) -> None:
    class Settings:
        @hookimpl
        def register_stores(self, register: Register) -> None:
            register("acme-notes", "acme.store:build", settings=42)

    isolated_plugins.register_plugin(Settings(), name="acme")
    error = isolated_plugins.plugins["acme"].error or ""
    assert "store type 'acme-notes': settings 42 is not 'module:attr' or callable" in error


def test_a_plugin_pinned_to_another_core_is_not_loaded(tmp_path: Path) -> None:
    """Installed with ``--no-deps`` (or the core upgraded under it), a plugin made for another
    core used to load as if compatible; it now fails, naming its pin and the installed core.
    A requirement of an extra (``test``) is not the plugin's."""
    site = tmp_path / "site"
    source = STORE.format(type="old-notes", factory="acme_old:build")
    _dist(site, "acme-old", "acme_old", source, requires=("agent-custody-state-core<0.1",))
    fine = STORE.format(type="new-notes", factory="acme_new:build")
    requires = (
        "agent-custody-state-core>=0.1,<0.2",
        'agent-custody-state-core==0.0.1; extra == "test"',
    )
    _dist(site, "acme-new", "acme_new", fine, requires=requires)
    plugins, stderr = _plugins(site)
    assert plugins["acme-old"]["status"] == "failed", stderr
    assert plugins["acme-old"]["error"].startswith(
        "incompatible: acme-old 1.0 requires agent-custody-state-core<0.1 but 0.1"
    )
    assert plugins["acme-new"]["status"] == "loaded" and plugins["acme-new"]["error"] is None


class _Dist:
    name, version = "acme-notes", "1.0"

    def __init__(self, *requires: str) -> None:
        self.requires = list(requires)


@pytest.mark.parametrize(
    ("requirement", "loads"),
    [
        ("agent-custody-state-core>=0.1,<0.2", True),
        ("agent-custody-state-core (>=0.1, <0.2)", True),
        ("agent_custody_state.core[fast]==0.1.*", True),
        ("agent-custody-state-core~=0.1.0", True),
        ("agent-custody-state-core==0.1", True),
        ("agent-custody-state-core", True),
        ('agent-custody-state-core<0.1; extra == "test"', True),
        ("agent-custody-state-core<0.1", False),
        ("agent-custody-state-core~=0.0.1", False),
        ("agent-custody-state-core==0.2.*", False),
        ("Agent-Custody-State-Core!=0.1.0", False),
        ("agent-custody-state-corex<0.1", True),
    ],
)
def test_pins_are_read_as_installers_read_them(
    requirement: str, loads: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With core 0.1.0 installed, the pin check reads the forms an installer writes."""
    from agent_custody_state import plugins

    monkeypatch.setattr(plugins, "_version", lambda dist: "0.1.0")
    assert (plugins._pinned_elsewhere(_Dist(requirement)) is None) == loads


def test_a_plugin_name_used_twice_names_both_distributions_at_serve_start(
    tmp_path: Path,
) -> None:
    """Two distributions with one entry-point name: the problem names both, and a ``serve``
    whose table wants the skipped one's store type says why it is not installed."""
    site = tmp_path / "site"
    _dist(
        site, "acme-one", "acme_one", STORE.format(type="one", factory="acme_one:b"), entry="acme"
    )
    _dist(
        site, "acme-two", "acme_two", STORE.format(type="two", factory="acme_two:b"), entry="acme"
    )
    _dist(
        site, "acme-core", "acme_core", STORE.format(type="three", factory="x:y"), entry="builtins"
    )
    out = _run(site, "plugins")
    assert out.returncode == 1
    assert "plugin name 'acme' is used twice (acme-one and acme-two)" in out.stdout
    assert "plugin name 'builtins' is used twice (agent-custody-state-core and acme-core)" in (
        out.stdout
    )
    config = tmp_path / "memory.toml"
    config.write_text('ledger = "ledger.jsonl"\n[[stores]]\nname = "s"\ntype = "two"\n')
    served = _run(site, "serve", "--config", str(config), cwd=tmp_path)
    assert served.returncode == 1
    problem = served.stderr.strip().splitlines()[-1]
    assert "unknown store type 'two'" in problem
    assert "plugin name 'acme' is used twice (acme-one and acme-two)" in problem


def _pytest(folder: Path, name: str, source: str) -> str:
    """pytest's report on the test file ``name`` (``source``) run in ``folder``, with the
    distributions ``_dist`` installed in ``folder / "site"`` and no ``AGENT_CUSTODY_*``."""
    (folder / name).write_text(source)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_CUSTODY_")}
    env["PYTHONPATH"] = str(folder / "site")
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", name],
        capture_output=True,
        text=True,
        env=env,
        cwd=folder,
        timeout=120,
    )
    return out.stdout


HYGIENE_TEST = """
from agent_custody_state_conformance import PluginHygiene

class TestHygiene(PluginHygiene):
    entry_point = "acme-notes"
    registers = frozenset({"store acme-notes"})
    store_settings = {"acme-notes": {}}

class TestBrokenHygiene(PluginHygiene):
    entry_point = "acme-broken"
    registers = frozenset({"store acme-broken"})
"""

BROKEN_STORE = """
from agent_custody_state.plugin import hookimpl

def build(settings, *, name):
    return None          # forgot the return of the store

@hookimpl
def register_stores(register):
    register("acme-notes", "acme_notes:build", settings="acme_notes:NoSettings")
"""


def test_hygiene_catches_an_unloadable_settings_model_and_a_factory_returning_none(
    tmp_path: Path,
) -> None:
    """The suite used to pass a plugin whose registered settings model or factory did not
    load (only ``serve`` found out); PH-4 and PH-5 fail it, and each failure names its rule.
    PH-2 on an entry point that does not import says why (it said only "exit status 1")."""
    site = tmp_path / "site"
    _dist(site, "acme-notes", "acme_notes", BROKEN_STORE)
    _dist(site, "acme-broken", "acme_broken", "import acme_sdk_not_installed\n")
    report = _pytest(tmp_path, "test_hygiene.py", HYGIENE_TEST)
    assert "7 failed, 4 passed, 1 skipped" in report, report
    assert "importing acme_broken failed: ModuleNotFoundError: No module named 'acme_sdk_not" in (
        report
    )
    assert "settings 'acme_notes:NoSettings' does not load: AttributeError" in report
    assert "PH-4: Every factory and settings model" in report  # the rule's own section
    assert "[PH-4]" in report  # the failure's message starts with its rule
    assert "FAILED test_hygiene.py::TestHygiene::test_factory_builds_a_store" in report


BARE_SETTINGS = """
from pydantic import BaseModel, Field
from agent_custody_state.plugin import hookimpl

class Settings(BaseModel):
    path: str = Field(description="the notes file")
    token_env: str | None = None     # no description: plugins shows an empty column

def build(settings, *, name):
    raise AssertionError("not built by PH-6")

@hookimpl
def register_stores(register):
    register("acme-bare", "acme_bare:build", settings="acme_bare:Settings")
"""


def test_hygiene_names_each_setting_without_a_description(tmp_path: Path) -> None:
    """PH-6 (twenty-first review): ``plugins`` showed empty descriptions for every key of two
    bundled stores; the rule now fails a settings model with an undescribed key, naming it."""
    site = tmp_path / "site"
    _dist(site, "acme-bare", "acme_bare", BARE_SETTINGS)
    report = _pytest(
        tmp_path,
        "test_bare.py",
        "from agent_custody_state_conformance import PluginHygiene\n"
        "class TestBare(PluginHygiene):\n"
        "    entry_point = 'acme-bare'\n"
        "    registers = frozenset({'store acme-bare'})\n",
    )
    assert "FAILED test_bare.py::TestBare::test_settings_are_described" in report, report
    assert "settings without a description: acme-bare.token_env" in report
    assert "acme-bare.path" not in report
