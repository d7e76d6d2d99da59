"""Every hook a plugin can implement, typed and documented; nothing else lives here.

Hooks *register*; the core *acts*. A plugin hands the core factories by name, and the core decides
when to build them and in which order to call them. Write-through stores in particular are never
driven as a pluggy fan-out: custody needs a fixed order, compensation and verification.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:
    from agent_custody_state.ledger.ledger import Ledger
    from agent_custody_state.ledger.model import Event

PROJECT = "agent_custody_state"
hookspec = pluggy.HookspecMarker(PROJECT)
#: Marks a plugin's hook implementations (re-exported as ``agent_custody_state.hookimpl`` and
#: ``agent_custody_state.plugin.hookimpl``).
hookimpl = pluggy.HookimplMarker(PROJECT)


class RegisterEventBackend(Protocol):
    def __call__(
        self,
        name: str,
        factory: str | Any,
        *,
        schemes: tuple[str, ...] = (),
        suffixes: tuple[str, ...] = (),
        description: str = "",
        fallback: bool = False,
    ) -> None: ...


class RegisterStore(Protocol):
    def __call__(
        self,
        name: str,
        factory: str | Any,
        *,
        settings: str | Any | None = None,
        description: str = "",
    ) -> None: ...


@hookspec
def register_event_backends(register: RegisterEventBackend) -> None:
    """Register event backends (places that keep the ledger's events).

    Call ``register(name, factory, schemes=..., suffixes=..., description=...)`` once per backend.

    - ``name``: the backend's ``kind`` (``"sqlite"``); unique across all plugins, a duplicate is an
      error.
    - ``factory``: ``"module:Class"`` (imported only when a ledger of that kind is opened, so the
      plugin's entry-point module stays cheap) or the class itself. It is called as
      ``factory(location, **options)`` and must return an ``EventBackend``.
    - ``schemes``: URL schemes the backend serves (``("postgres", "postgresql")``).
    - ``suffixes``: path suffixes it serves, compared case-insensitively (``(".sqlite", ".db")``).
    - A backend with neither is reachable only as ``open_store(location, backend=name)``; the
      builtin JSONL backend takes every other path.

    Example::

        @hookimpl
        def register_event_backends(register):
            register("sqlite", "my_plugin.store:SqliteBackend", suffixes=(".sqlite", ".db"))
    """


@hookspec
def register_stores(register: RegisterStore) -> None:
    """Register write-through store types (retrieval stores that mirror the ledger).

    Call ``register(type_name, factory, settings=..., description=...)`` once per store type.

    - ``type_name``: the ``type`` used in a ``[[stores]]`` table of the server's config file
      (``"pgvector"``); unique across plugins.
    - ``factory``: ``"module:function"`` or a callable, imported only when a configured store uses
      this type. Called as ``factory(settings, name=...)`` with the validated settings model; it
      returns an object implementing the ``Store`` protocol (``agent_custody_state.stores``).
    - ``settings``: ``"module:Model"`` or a pydantic model class validating the table's keys.
      Secrets are never values in the file: the model names environment variables (``api_key_env``)
      and the factory reads them.

    Example::

        @hookimpl
        def register_stores(register):
            register("pgvector", "my_plugin.store:build", settings="my_plugin.settings:Settings")
    """


@hookspec
def event_appended(ledger: Ledger, event: Event) -> None:
    """Notification: ``event`` is durably in ``ledger`` (after fsync or commit).

    Called once per event, in append order, in the process that wrote it, after the write
    transaction has ended (a sweep notifies once per forget at its end). Use it for audit feeds,
    metrics or cache invalidation. It cannot veto or alter the event; an exception it raises is
    logged and ignored, because the write is already durable. Keep it fast: it runs on the
    writer's thread.
    """
