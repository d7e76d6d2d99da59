"""The plugin manager: builtins and entry points, loaded defensively, hooks called through pluggy.

Plugins are found through the ``agent_custody_state`` entry-point group. Each entry point is
imported on its own; one that fails (import error, a misspelt hook caught by pluggy's
``check_pending``, a duplicate name, a registration of the wrong shape, a pin on another core)
is recorded, shown by ``agent-custody-memory plugins``, and becomes an error only when something
asks for what it would have registered. Builtins (JSONL, in-memory) register through the same
hooks, under the plugin name ``builtins``.

Two environment variables choose what loads: ``AGENT_CUSTODY_BLOCK_PLUGINS`` (comma-separated
names never loaded) and ``AGENT_CUSTODY_PLUGINS`` (when set, only these entry points load; the
builtins always do unless blocked).
"""

from __future__ import annotations

import importlib
import operator
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points, version
from typing import Any

import pluggy

import agent_custody_state.hookspecs as hookspecs
from agent_custody_state.backendoptions import check_options
from agent_custody_state.ledger import host as ledger_host
from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.listeners import call_each

ENTRY_POINT_GROUP = "agent_custody_state"
BLOCK_ENV = "AGENT_CUSTODY_BLOCK_PLUGINS"
ONLY_ENV = "AGENT_CUSTODY_PLUGINS"
BUILTINS = "builtins"
CORE_DISTRIBUTIONS = ("agent-custody-state-core", "agent-custody-state")  # a plugin may pin

#: Install hints for the backends SPEC 3 routes to plugins of this project, by name or scheme.
_PG = "install agent-custody-state-events-postgres (pip install 'agent-custody-state[postgres]')"
INSTALL_HINTS = {"postgres": _PG, "postgresql": _PG}
INSTALL_HINTS["sqlite"] = "install agent-custody-state-events-sqlite"


class PluginError(Exception):
    """A plugin problem a user must fix (missing backend, duplicate name, failed import)."""


@dataclass
class BackendSpec:
    """An event backend as registered: how to build it and which locations it serves."""

    name: str
    factory: str | Any
    schemes: tuple[str, ...]
    suffixes: tuple[str, ...]
    description: str
    plugin: str
    fallback: bool = False


@dataclass
class StoreSpec:
    """A write-through store type as registered: its factory and settings model."""

    name: str
    factory: str | Any
    settings: str | Any | None
    description: str
    plugin: str

    @property
    def type_name(self) -> str:
        """The ``type`` of a ``[[stores]]`` table (the registered name)."""
        return self.name


@dataclass
class PluginInfo:
    """One plugin as ``agent-custody-memory plugins`` shows it."""

    name: str
    distribution: str
    version: str
    registers: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def blocked(self) -> bool:
        return self.error == "blocked"


def resolve_ref(ref: str | Any) -> Any:
    """Import ``"module:attr"`` lazily; pass other objects through."""
    if not isinstance(ref, str):
        return ref
    module, _, attr = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else []:
        obj = getattr(obj, part)
    return obj


def _names(variable: str) -> set[str]:
    return {n.strip() for n in os.environ.get(variable, "").split(",") if n.strip()}


def _checked(what: str, name: Any, factory: Any, settings: Any) -> str:
    """Refuse a registration of the wrong shape, naming it; returns ``"<what> '<name>'"``."""
    for part, ref in (("factory", factory), ("settings", settings)):
        shaped = isinstance(ref, str) and re.fullmatch(r"[\w.]+:[\w.]+", ref)
        if not (shaped or callable(ref) or (ref is None and part == "settings")):
            raise PluginError(f"{what} {name!r}: {part} {ref!r} is not 'module:attr' or callable")
    return f"{what} {name!r}"


def _words(what: str, values: Any, pattern: str) -> tuple[str, ...]:
    """Schemes or suffixes, lowercased; a bare text (``"ab"`` would serve ``a``, ``b``) refused."""
    listed = isinstance(values, tuple | list | set | frozenset)
    if not listed or any(not isinstance(v, str) or not re.fullmatch(pattern, v) for v in values):
        raise PluginError(f"{what} must be a tuple of valid texts, not {values!r}")
    return tuple(v.lower() for v in values)


def _pinned_elsewhere(dist: Any) -> str | None:
    """Why ``dist`` must not load: it pins another core (``--no-deps``, a core upgrade)."""
    for line in getattr(dist, "requires", None) or []:
        found = re.fullmatch(r"([\w.-]+)\s*(?:\[[^\]]*\])?\s*\(?([^;()]*)\)?", line.strip())
        name = re.sub(r"[-_.]+", "-", found.group(1)).lower() if found else ""
        installed = _version(name) if found and name in CORE_DISTRIBUTIONS else "unknown"
        wanted = found.group(2).replace(" ", "") if found else ""
        if installed != "unknown" and not all(_meets(installed, c) for c in wanted.split(",")):
            why = f"requires {name}{wanted} but {installed} is installed"
            return f"incompatible: {dist.name} {dist.version} {why}; install a release made for it"
    return None


def _meets(version: str, clause: str) -> bool:
    """Whether ``version`` meets one clause (``>=0.1``, ``==0.1.*``, ``~=0.1``); else pass."""
    match = re.fullmatch(r"(~=|==|!=|<=|>=|<|>)(\d+(?:\.\d+)*)(\.\*)?", clause)
    if match is None or not re.fullmatch(r"\d+(\.\d+)*", version):
        return True
    op, want, star = match.group(1), [int(p) for p in match.group(2).split(".")], match.group(3)
    have, keep = [int(p) for p in version.split(".")], len(want) - (op == "~=")
    have, padded = (v + [0] * (12 - len(v)) for v in (have, want))  # 0.1 == 0.1.0
    if star or op == "~=":
        inside = have[:keep] == want[:keep]
        return inside and have >= padded if op == "~=" else inside == (op == "==")
    compare = {"==": "eq", "!=": "ne", "<=": "le", ">=": "ge", "<": "lt", ">": "gt"}[op]
    return bool(getattr(operator, compare)(have, padded))


class PluginManager:
    """Holds the pluggy manager, what each plugin registered and what failed to load."""

    def __init__(
        self,
        *,
        load_entry_points: bool = True,
        blocked: set[str] | None = None,
        only: set[str] | None = None,
    ) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.blocked = (blocked or set()) | _names(BLOCK_ENV)
        self.only = only if only is not None else (_names(ONLY_ENV) or None)
        self.plugins: dict[str, PluginInfo] = {}
        self.backends: dict[str, BackendSpec] = {}
        self.stores: dict[str, StoreSpec] = {}
        self.errors: list[str] = []
        self._register_module(BUILTINS, "agent_custody_state.builtins", "agent-custody-state-core")
        if load_entry_points:
            self._load_entry_points()

    @property
    def hook(self) -> Any:
        return self.pm.hook

    def _register_module(self, name: str, module_name: str, dist: str) -> None:
        info = PluginInfo(name, dist, _version(dist))
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
        """Register a plugin object (a module or instance with hookimpls); used by tests too.

        Its hooks are validated (``check_pending``: a hookimpl naming no known hook is an error)
        and its registration hooks called; on any failure the plugin is unregistered again and
        the failure recorded on its ``PluginInfo``.
        """
        info = info or self.plugins.setdefault(name, PluginInfo(name, "(in process)", ""))
        try:
            self.pm.register(plugin, name=name)
            self.pm.check_pending()
            self._collect(plugin, info)
        except Exception as exc:
            if self.pm.is_registered(plugin):
                self.pm.unregister(plugin)
            info.error = f"registration failed: {exc}"
            self.errors.append(f"plugin {name}: {exc}")

    def _impls(self, hook: str, plugin: Any) -> list[Callable[..., Any]]:
        caller = getattr(self.pm.hook, hook)
        return [impl.function for impl in caller.get_hookimpls() if impl.plugin is plugin]

    def _collect(self, plugin: Any, info: PluginInfo) -> None:
        """Call the plugin's registration hooks; keep what they register only if all succeed."""
        backends: dict[str, BackendSpec] = {}
        stores: dict[str, StoreSpec] = {}

        def register_backend(
            name: str,
            factory: Any,
            *,
            schemes: tuple[str, ...] = (),
            suffixes: tuple[str, ...] = (),
            description: str = "",
            fallback: bool = False,
        ) -> None:
            what = _checked("event backend", name, factory, None)
            self._unique("event backend", name, self.backends, backends, info)
            backends[name] = BackendSpec(
                name,
                factory,
                _words(f"{what}: schemes", schemes, r"[a-zA-Z][a-zA-Z0-9+.-]*"),
                _words(f"{what}: suffixes", suffixes, r"\S+"),
                description,
                info.name,
                fallback,
            )

        def register_store(
            name: str, factory: Any, *, settings: Any = None, description: str = ""
        ) -> None:
            _checked("store type", name, factory, settings)
            self._unique("store type", name, self.stores, stores, info)
            stores[name] = StoreSpec(name, factory, settings, description, info.name)

        hooks = {"register_event_backends": register_backend, "register_stores": register_store}
        for hook, register in hooks.items():
            for impl in self._impls(hook, plugin):
                if (returned := impl(register=register)) is not None:
                    kind = type(returned).__name__
                    raise PluginError(f"{hook} returned {kind}: call register(...) instead")
        self.backends.update(backends)
        self.stores.update(stores)
        info.registers += [f"event backend {n}" for n in backends] + [f"store {n}" for n in stores]

    @staticmethod
    def _unique(
        what: str, name: str, known: dict[str, Any], pending: dict[str, Any], info: PluginInfo
    ) -> None:
        if name in known or name in pending:
            owner = known[name].plugin if name in known else info.name
            raise PluginError(f"{what} {name!r} is registered twice ({owner} and {info.name})")

    def _load_entry_points(self) -> None:
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist = ep.dist.name if ep.dist is not None else "unknown"
            if ep.name in self.plugins:
                twice = f"({self.plugins[ep.name].distribution} and {dist}); {dist}'s not loaded"
                self.errors.append(f"plugin name {ep.name!r} is used twice {twice}")
                continue
            if self.only is not None and ep.name not in self.only:
                continue  # not asked for: not loaded, not listed
            info = PluginInfo(ep.name, dist, ep.dist.version if ep.dist else "unknown")
            self.plugins[ep.name] = info
            info.error = "blocked" if ep.name in self.blocked else _pinned_elsewhere(ep.dist)
            if info.error is not None:
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
            hint = INSTALL_HINTS["postgres"] if scheme in ("postgres", "postgresql") else None
            raise PluginError(
                f"no event backend serves {scheme}:// locations"
                + (f"; {hint}" if hint else "")
                + self._failed_note()
            )
        lowered = location.lower()
        for spec in self.backends.values():
            if any(lowered.endswith(s) for s in spec.suffixes):
                return spec
        if lowered.endswith((".sqlite", ".db")):
            raise PluginError(
                f"{location} is a SQLite location but no SQLite event backend is installed; "
                + INSTALL_HINTS["sqlite"]
                + self._failed_note()
            )
        fallback = next((s for s in self.backends.values() if s.fallback), None)
        if fallback is None:
            raise PluginError(f"no event backend serves {location}" + self._failed_note())
        return fallback

    def _failed_note(self) -> str:
        failed = [
            f"{p.name} ({p.error})" for p in self.plugins.values() if p.error and not p.blocked
        ] + [e for e in self.errors if e.startswith("plugin name ")]
        return f" (plugins that failed to load: {', '.join(failed)})" if failed else ""

    def _missing(self, what: str, name: str) -> str:
        known = ", ".join(sorted(self.backends if what == "event backend" else self.stores))
        hint = INSTALL_HINTS.get(name, "") if what == "event backend" else ""  # not installed
        hint = f"; {hint}" if hint and not (hint is _PG and "postgres" in self.backends) else ""
        return f"unknown {what} {name!r}; installed: {known or 'none'}{hint}" + self._failed_note()

    def open_backend(
        self, location: str | os.PathLike[str], *, backend: str | None = None, **options: Any
    ) -> EventBackend:
        """Open the event backend serving ``location`` (``backend=`` names one); an option its
        factory does not take is a ``TypeError`` (``backendoptions``)."""
        spec = self.backend_for(os.fspath(location), backend)
        check_options(spec.name, factory := resolve_ref(spec.factory), options)
        return factory(os.fspath(location), **options)  # type: ignore[no-any-return]

    open_store = open_backend  # SPEC section 7's name

    def store_spec(self, name: str) -> StoreSpec:
        """The registered store type ``name`` (the ``type`` of a ``[[stores]]`` table)."""
        if name not in self.stores:
            raise PluginError(self._missing("store type", name))
        return self.stores[name]

    # -- notifications -------------------------------------------------------------------------

    def event_appended(self, ledger: Any, event: Any) -> None:
        """Call every plugin's ``event_appended`` hook, each on its own (``listeners``)."""
        call_each(self.pm.hook.event_appended, ledger=ledger, event=event)

    def listens(self) -> bool:
        """Whether any plugin implements ``event_appended`` (asked once per append)."""
        return bool(self.pm.hook.event_appended.get_hookimpls())


def _version(dist: str) -> str:
    try:
        return version(dist)
    except Exception:
        return "unknown"


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


def open_backend(location: str | os.PathLike[str], **options: Any) -> EventBackend:
    """Open the event backend for a location, chosen through the plugins (SPEC 3)."""
    return get_plugin_manager().open_backend(location, **options)


open_store = open_backend  # SPEC section 7's name for :func:`open_backend`

# The ledger opens locations and announces events through the process-wide manager by default.
ledger_host.set_default_host(get_plugin_manager)
