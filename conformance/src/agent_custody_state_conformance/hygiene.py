"""``PluginHygiene``: an installed plugin resolves, imports cheaply and names things uniquely.

Subclass it with three class attributes::

    class TestHygiene(PluginHygiene):
        entry_point = "events-sqlite"                 # name in the agent_custody_state group
        registers = {"event backend sqlite"}          # what `agent-custody-memory plugins` shows
        heavy_modules = ("sqlalchemy",)               # must NOT be imported by the entry point
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points
from typing import ClassVar

from agent_custody_state.plugins import ENTRY_POINT_GROUP, PluginManager

from .rules import ConformanceSuite, rule


class PluginHygiene(ConformanceSuite):
    """Hygiene rules for one installed plugin distribution."""

    __suite_root__ = True
    entry_point: str = ""
    registers: ClassVar[set[str] | frozenset[str]] = frozenset()
    heavy_modules: tuple[str, ...] = ()

    @rule("PH-1")
    def test_entry_point_resolves(self) -> None:
        """The entry point exists in the ``agent_custody_state`` group, loads, and registers
        exactly what the plugin declares.

        Troubleshooting: check ``[project.entry-points.agent_custody_state]`` in pyproject.toml
        and reinstall the distribution; run ``agent-custody-memory plugins`` to see the error.
        """
        names = [ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)]
        assert self.entry_point in names, f"{self.entry_point} not in {names}"
        manager = PluginManager()
        info = manager.plugins[self.entry_point]
        assert info.error is None, info.error
        assert set(info.registers) == set(self.registers)

    @rule("PH-2")
    def test_cheap_import(self) -> None:
        """Importing the entry-point module does not import the vendor SDK or driver.

        Troubleshooting: import heavy modules inside the factory (``"module:Class"`` strings in
        the registration), never at the top of the plugin's ``__init__.py``.
        """
        ep = next(e for e in entry_points(group=ENTRY_POINT_GROUP) if e.name == self.entry_point)
        code = (
            "import json, sys; import importlib; "
            f"importlib.import_module({ep.module!r}); "
            f"print(json.dumps([m for m in {list(self.heavy_modules)!r} if m in sys.modules]))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert json.loads(out.stdout) == [], f"imported at entry-point load: {out.stdout}"

    @rule("PH-3")
    def test_unique_names(self) -> None:
        """No two installed plugins register the same backend, store type or plugin name.

        Troubleshooting: rename the backend or store type; duplicates are never shadowed.
        """
        manager = PluginManager()
        assert manager.errors == []
