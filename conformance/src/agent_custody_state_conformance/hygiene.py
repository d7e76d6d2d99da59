"""``PluginHygiene``: an installed plugin resolves, imports cheaply and names things uniquely.

Subclass it with three class attributes (and, for a store plugin, a fourth)::

    class TestHygiene(PluginHygiene):
        entry_point = "events-sqlite"                 # name in the agent_custody_state group
        registers = {"event backend sqlite"}          # what `agent-custody-memory plugins` shows
        heavy_modules = ("sqlalchemy",)               # must NOT be imported by the entry point
        store_settings = {"acme-notes": {"path": "notes.json"}}   # a [[stores]] table's keys
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from importlib.metadata import entry_points
from typing import Any, ClassVar

import pytest

from agent_custody_state.plugins import (
    ENTRY_POINT_GROUP,
    BackendSpec,
    PluginManager,
    StoreSpec,
    resolve_ref,
)
from agent_custody_state.stores import Store

from .rules import ConformanceSuite, rule


class PluginHygiene(ConformanceSuite):
    """Hygiene rules for one installed plugin distribution."""

    __suite_root__ = True
    entry_point: str = ""
    registers: ClassVar[set[str] | frozenset[str]] = frozenset()
    heavy_modules: tuple[str, ...] = ()
    #: For rule PH-5: the keys of a ``[[stores]]`` table (without ``name``/``type``) per store
    #: type, valid without a network or a secret (the factory is called, the store not used).
    store_settings: ClassVar[dict[str, dict[str, Any]]] = {}

    def _loaded(self) -> PluginManager:
        names = [ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)]
        assert self.entry_point in names, (
            f"no entry point {self.entry_point!r} in the {ENTRY_POINT_GROUP} group (there are "
            f"{sorted(names)}): is the plugin installed (pip install -e .)?"
        )
        manager = PluginManager()
        info = manager.plugins.get(self.entry_point)
        assert info is not None, f"plugin {self.entry_point} not loaded: {manager.errors}"
        assert info.error is None, f"plugin {self.entry_point}: {info.error}"
        return manager

    @rule("PH-1")
    def test_entry_point_resolves(self) -> None:
        """The entry point exists in the ``agent_custody_state`` group, loads, and registers
        exactly what the plugin declares.

        Troubleshooting: check ``[project.entry-points.agent_custody_state]`` in pyproject.toml
        and reinstall the distribution; run ``agent-custody-memory plugins`` to see the error.
        """
        got = set(self._loaded().plugins[self.entry_point].registers)
        assert got == set(self.registers), (
            f"plugin {self.entry_point} registers {sorted(got)}; the test class declares "
            f"registers = {sorted(self.registers)}"
        )

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
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        last = (out.stderr.strip().splitlines() or ["no error output"])[-1]
        assert out.returncode == 0, f"importing {ep.module} failed: {last}"
        assert json.loads(out.stdout) == [], f"imported at entry-point load: {out.stdout}"

    @rule("PH-3")
    def test_unique_names(self) -> None:
        """No two installed plugins register the same backend, store type or plugin name.

        Troubleshooting: rename the backend or store type; duplicates are never shadowed.
        """
        manager = PluginManager()
        assert manager.errors == [], "; ".join(manager.errors)

    @rule("PH-4")
    def test_registered_references_load(self) -> None:
        """Every factory and settings model the plugin registers as ``"module:attribute"``
        imports: a factory is callable, a settings model is a pydantic model class.

        Troubleshooting: the entry point loads without them (they are imported only when a
        ledger or a ``[[stores]]`` table uses the type), so a misspelt module or attribute
        shows only here or at the server's start; fix the text in the registration.
        """
        manager = self._loaded()
        specs: list[BackendSpec | StoreSpec] = [*manager.backends.values()]
        specs += manager.stores.values()
        for spec in [s for s in specs if s.plugin == self.entry_point]:
            for part in ("factory", "settings"):
                ref = getattr(spec, part, None)
                if ref is None:
                    continue
                try:
                    obj, problem = resolve_ref(ref), None
                except Exception as exc:
                    obj, problem = None, f"{type(exc).__name__}: {exc}"
                if problem is not None:
                    pytest.fail(f"{spec.name}: {part} {ref!r} does not load: {problem}", False)
                ok = callable(obj) if part == "factory" else hasattr(obj, "model_validate")
                assert ok, f"{spec.name}: {part} {ref!r} is {obj!r}, not a {part} (see hooks.md)"

    @rule("PH-5")
    def test_factory_builds_a_store(self) -> None:
        """Each store type in ``store_settings`` builds, as the server builds it (settings
        validated by the registered model, then ``factory(settings, name=...)``), an object
        implementing the ``Store`` protocol whose ``name`` is the name given; skipped for a
        plugin that gives no ``store_settings``.

        Troubleshooting: the factory must return the store (not ``None``, not a coroutine:
        it is a plain function) and pass ``name`` on to it.
        """
        if not self.store_settings:  # ``registers`` says whether there is a store to build
            stores = any(what.startswith("store ") for what in self.registers)
            pytest.skip(
                "the test class gives no store_settings"
                if stores
                else "the plugin registers no store type"
            )
        manager = self._loaded()
        for type_name, table in self.store_settings.items():
            spec = manager.store_spec(type_name)
            model = resolve_ref(spec.settings) if spec.settings is not None else None
            settings = model.model_validate(table) if model is not None else table
            store = resolve_ref(spec.factory)(settings, name="hygiene-check")
            if inspect.iscoroutine(store):
                store.close()
                pytest.fail(f"{type_name}: the factory is async; it must return the store")
            assert isinstance(store, Store), (
                f"{type_name}: the factory returned {store!r}, which lacks put/remove/name"
            )
            assert store.name == "hygiene-check", f"{type_name}: store.name is {store.name!r}"

    @rule("PH-6")
    def test_settings_are_described(self) -> None:
        """Every key of every store settings model the plugin registers has a description, which
        ``agent-custody-memory plugins`` shows an operator writing a ``[[stores]]`` table.

        Troubleshooting: give each field ``Field(description=...)``, or write a docstring under
        it and set ``use_attribute_docstrings=True`` in the model's ``model_config``.
        """
        from agent_custody_state.settingkeys import setting_key  # the key plugins shows

        models = {
            spec.name: resolve_ref(spec.settings)
            for spec in self._loaded().stores.values()
            if spec.plugin == self.entry_point and spec.settings is not None
        }
        bare = [
            f"{name}.{setting_key(field, info, model)}"
            for name, model in models.items()
            for field, info in model.model_fields.items()
            if not (info.description or "").strip()
        ]
        assert not bare, f"settings without a description: {', '.join(bare)}"
