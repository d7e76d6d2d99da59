"""Building the configured write-through stores (``[[stores]]`` tables).

Every table is first validated by the settings model its plugin registered (secrets named by
``*_env`` keys must be set; relative paths resolve against the config file's folder), then the
stores are built in order by their factories. Each failure is one ``ConfigError`` naming the
table and what is wrong with it: a plugin's misspelt factory or settings reference, or a factory
that returns something that is not a store, names the plugin rather than failing later (or
pointing at the ledger).
"""

from __future__ import annotations

import inspect
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from pydantic import ValidationError

from agent_custody_state.config import (
    ConfigError,
    StoreConfig,
    _anchor_settings,
    _describe,
    env_secret,
)
from agent_custody_state.stores.base import Store

#: The store types of this project's own plugins, each the root distribution's extra of that name.
PROJECT_STORES = ("mem0", "zep", "pgvector", "letta", "langgraph", "cognee")


def install_hint(store_type: str) -> str:
    """``"; install ... (pip install ...)"`` for one of this project's store types whose
    distribution is not installed, else ``""`` (one installed but failing to load is named by the
    plugin manager's own note, and a third party's type is not ours to name)."""
    dist = f"agent-custody-state-{store_type}"
    if store_type not in PROJECT_STORES:
        return ""
    try:
        version(dist)
    except PackageNotFoundError:
        return f"; install {dist} (pip install 'agent-custody-state[{store_type}]')"
    return ""


def _reference(spec: Any, ref: Any, where: str, table: StoreConfig) -> Any:
    """A registered ``module:attr`` (or the object itself), loaded; failures name the plugin."""
    from agent_custody_state.plugins import resolve_ref

    try:
        return resolve_ref(ref)
    except ImportError as exc:
        raise ConfigError(f"{where}: the {table.type} store cannot be loaded: {exc}") from None
    except Exception as exc:  # a misspelt attribute, a module raising at import
        raise ConfigError(
            f"{where}: the {table.type} store (plugin {spec.plugin}) cannot be loaded: "
            f"{type(exc).__name__}: {exc}"
        ) from None


def build_stores(configs: list[StoreConfig]) -> list[Any]:
    """Validate every ``[[stores]]`` table through its plugin, then build the stores in order."""
    from agent_custody_state.plugins import PluginError, get_plugin_manager

    manager = get_plugin_manager()
    names = [c.name for c in configs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"stores: names must be unique; repeated: {', '.join(repeated)}")
    planned: list[tuple[StoreConfig, Any, Any, str]] = []
    for index, table in enumerate(configs):
        where = f"{table._file}: " if table._file is not None else ""
        where += f"stores[{index}] ({table.name})"
        try:
            spec = manager.store_spec(table.type)
        except PluginError as exc:
            raise ConfigError(f"{where}: {exc}{install_hint(table.type)}") from None
        raw = table.settings()
        for key, value in raw.items():
            if key.endswith("_env") and isinstance(value, str):
                env_secret(value, f"{where} {key}")
        model = _reference(spec, spec.settings, where, table) if spec.settings else None
        try:
            raw = _anchor_settings(raw, model, table._folder)
            settings = model.model_validate(raw) if model is not None else raw
        except ValidationError as exc:
            raise ConfigError(f"{where}: {_describe(exc, model)}") from None
        planned.append((table, spec, settings, where))
    stores = []
    for table, spec, settings, where in planned:
        factory = _reference(spec, spec.factory, where, table)
        failed = f"store {table.name} ({table.type}) failed to start"
        try:
            store = factory(settings, name=table.name)
            if not isinstance(store, Store):  # None, a coroutine: StoreSet would fail obscurely
                kind = type(store).__name__
                if inspect.iscoroutine(store):  # an ``async def`` factory: never run
                    store.close()
                raise ConfigError(
                    f"{failed}: the factory of plugin {spec.plugin} returned {kind}, not a store"
                )
            if not table.mirror:
                store.mirror = False  # type: ignore[attr-defined]  # read by StoreSet.mirroring()
        except ConfigError:
            raise
        except Exception as exc:
            raise ConfigError(f"{failed}: {exc}") from exc
        stores.append(store)
    return stores
