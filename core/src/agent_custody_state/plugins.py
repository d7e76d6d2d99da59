"""The plugin manager: builtins and entry points, loaded defensively, registries by name.

Plugins are found through the ``agent_custody_state`` entry-point group. Each entry point is
imported on its own; one that fails is recorded (and shown by ``agent-custody-memory plugins``)
and becomes an error only when something asks for what it would have registered. Duplicate names
are an error, never silent shadowing. Builtins (JSONL, in-memory) register through the same hook.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import pluggy

from . import hookspecs
from .eventstore import EventStore

ENTRY_POINT_GROUP = "agent_custody_state"
BLOCK_ENV = "AGENT_CUSTODY_BLOCK_PLUGINS"

#: SPEC 3's routing: which backend name serves a location, before plugins claim other schemes.
_SPEC_SUFFIX_DISTRIBUTION = {"sqlite": "agent-custody-state-events-sqlite",
                             "postgres": "agent-custody-state-events-postgres"}


class PluginError(Exception):
    """A plugin problem a user must fix (missing backend, duplicate name, failed import)."""


@dataclass
class BackendSpec:
    name: str
    factory: str | Any
    schemes: tuple[str, ...]
    suffixes: tuple[str, ...]
    description: str
    plugin: str


@dataclass
class StoreSpec:
    type_name: str
    factory: str | Any
    settings: str | Any | None
    description: str
    plugin: str


@dataclass
class PluginInfo:
    name: str
    distribution: str
    version: str
    registers: list[str] = field(default_factory=list)
    error: str | None = None


def resolve_ref(ref: str | Any) -> Any:
    """Import ``"module:attr"`` lazily; pass other objects through."""
    if not isinstance(ref, str):
        return ref
    module, _, attr = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else []:
        obj = getattr(obj, part)
    return obj


class PluginManager:
    """Holds the pluggy manager, what each plugin registered and what failed to load."""

    def __init__(self, *, load_entry_points: bool = True, blocked: set[str] | None = None):
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        env_blocked = {b.strip() for b in os.environ.get(BLOCK_ENV, "").split(",") if b.strip()}
        self.blocked = (blocked or set()) | env_blocked
        self.plugins: dict[str, PluginInfo] = {}
        self.backends: dict[str, BackendSpec] = {}
        self.stores: dict[str, StoreSpec] = {}
        self.errors: list[str] = []
        self._register_module("builtins", "agent_custody_state.builtins", "agent-custody-state-core")
        if load_entry_points:
            self._load_entry_points()

    @property
    def hook(self) -> Any:
        return self.pm.hook

    def _version(self, dist: str) -> str:
        try:
            from importlib.metadata import version

            return version(dist)
        except Exception:
            return "unknown"

    def _register_module(self, name: str, module_name: str, dist: str) -> None:
        info = PluginInfo(name, dist, self._version(dist))
        self.plugins[name] = info
        if name in self.blocked:
            info.error = "blocked"
            return
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # defensive: one broken plugin must not break the rest
            info.error = f"import failed: {type(exc).__name__}: {exc}"
            return
        self.register_plugin(module, name=name, info=info)

    def register_plugin(self, plugin: Any, *, name: str, info: PluginInfo | None = None) -> None:
        """Register a plugin object (a module or instance with hookimpls); used by tests too."""
        info = info or self.plugins.setdefault(name, PluginInfo(name, "(in process)", ""))
        try:
            self.pm.register(plugin, name=name)
            self._collect(plugin, info)
        except Exception as exc:
            if self.pm.is_registered(plugin):
                self.pm.unregister(plugin)
            info.error = f"registration failed: {exc}"
            self.errors.append(f"plugin {name}: {exc}")

    def _collect(self, plugin: Any, info: PluginInfo) -> None:
        backends: list[BackendSpec] = []
        stores: list[StoreSpec] = []

        def register_backend(name: str, factory: Any, *, schemes: tuple[str, ...] = (),
                             suffixes: tuple[str, ...] = (), description: str = "") -> None:
            if name in self.backends or any(b.name == name for b in backends):
                owner = self.backends[name].plugin if name in self.backends else info.name
                raise PluginError(f"event backend {name!r} is registered twice ({owner} and "
                                  f"{info.name})")
            backends.append(BackendSpec(name, factory, tuple(s.lower() for s in schemes),
                                        tuple(s.lower() for s in suffixes), description,
                                        info.name))

        def register_store(type_name: str, factory: Any, *, settings: Any = None,
                           description: str = "") -> None:
            if type_name in self.stores or any(s.type_name == type_name for s in stores):
                owner = self.stores[type_name].plugin if type_name in self.stores else info.name
                raise PluginError(f"store type {type_name!r} is registered twice ({owner} and "
                                  f"{info.name})")
            stores.append(StoreSpec(type_name, factory, settings, description, info.name))

        impl = getattr(plugin, "register_event_backends", None)
        if impl is not None:
            impl(register=register_backend)
        impl = getattr(plugin, "register_stores", None)
        if impl is not None:
            impl(register=register_store)
        for b in backends:
            self.backends[b.name] = b
            info.registers.append(f"event backend {b.name}")
        for s in stores:
            self.stores[s.type_name] = s
            info.registers.append(f"store {s.type_name}")

    def _load_entry_points(self) -> None:
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist = ep.dist.name if ep.dist is not None else "unknown"
            if ep.name in self.plugins:
                self.errors.append(f"plugin name {ep.name!r} is used twice ({dist})")
                continue
            info = PluginInfo(ep.name, dist, ep.dist.version if ep.dist else "unknown")
            self.plugins[ep.name] = info
            if ep.name in self.blocked:
                info.error = "blocked"
                continue
            try:
                module = ep.load()
            except Exception as exc:
                info.error = f"import failed: {type(exc).__name__}: {exc}"
                continue
            self.register_plugin(module, name=ep.name, info=info)

    # -- backends ------------------------------------------------------------------------------

    def backend_for(self, location: str, backend: str | None = None) -> BackendSpec:
        """Pick the backend for a location (SPEC 3), or explain what to install."""
        if backend is not None:
            if backend not in self.backends:
                raise PluginError(self._missing("event backend", backend))
            return self.backends[backend]
        match = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://", location) or re.match(
            r"^([a-zA-Z][a-zA-Z0-9+.-]*):$", location
        )
        if match:
            scheme = match.group(1).lower()
            for spec in self.backends.values():
                if scheme in spec.schemes:
                    return spec
            wanted = "postgres" if scheme in ("postgres", "postgresql") else None
            raise PluginError(
                f"no event backend serves {scheme}:// locations"
                + (f"; install {_SPEC_SUFFIX_DISTRIBUTION[wanted]} (pip install "
                   f"'agent-custody-state[postgres]')" if wanted else "")
                + self._failed_note()
            )
        lowered = location.lower()
        for spec in self.backends.values():
            if any(lowered.endswith(s) for s in spec.suffixes):
                return spec
        if lowered.endswith((".sqlite", ".db")):
            raise PluginError(
                f"{location} is a SQLite location but no SQLite event backend is installed; "
                "install agent-custody-state-events-sqlite" + self._failed_note()
            )
        return self.backends["jsonl"]

    def _failed_note(self) -> str:
        failed = [f"{p.name} ({p.error})" for p in self.plugins.values()
                  if p.error and p.error != "blocked"]
        return f" (plugins that failed to load: {', '.join(failed)})" if failed else ""

    def _missing(self, what: str, name: str) -> str:
        known = ", ".join(sorted(self.backends if what == "event backend" else self.stores))
        return f"unknown {what} {name!r}; installed: {known or 'none'}" + self._failed_note()

    def open_store(self, location: str | os.PathLike[str], *, backend: str | None = None,
                   **options: Any) -> EventStore:
        spec = self.backend_for(os.fspath(location), backend)
        factory = resolve_ref(spec.factory)
        return factory(os.fspath(location), **options)  # type: ignore[no-any-return]

    def store_spec(self, type_name: str) -> StoreSpec:
        if type_name not in self.stores:
            raise PluginError(self._missing("store type", type_name))
        return self.stores[type_name]


_default: PluginManager | None = None
_lock = threading.Lock()


def get_plugin_manager() -> PluginManager:
    """The process-wide manager (built on first use)."""
    global _default
    with _lock:
        if _default is None:
            _default = PluginManager()
        return _default


def set_plugin_manager(manager: PluginManager | None) -> None:
    """Replace the process-wide manager (tests isolate themselves from installed plugins)."""
    global _default
    with _lock:
        _default = manager


def open_store(location: str | os.PathLike[str], **options: Any) -> EventStore:
    """Open an event store for a location, choosing the backend through the plugins (SPEC 3)."""
    return get_plugin_manager().open_store(location, **options)
