"""Every hook a plugin can implement, typed and documented; nothing else lives here.

Hooks *register*; the core *acts*. A plugin hands the core factories by name, and the core decides
when to build them and in which order to call them. Write-through stores in particular are never
driven as a pluggy fan-out: custody needs a fixed order, compensation and verification.

``docs/hooks.md`` is generated from this module (``python tests/hookdoc.py > docs/hooks.md``) and a
repository test keeps it current, so the docstrings below are the reference. They use pytest's
conventions: ``:param:`` for each argument, the return value's meaning, and the version a hook
appeared in.
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
    """The ``register`` callable :func:`register_event_backends` receives."""

    def __call__(
        self,
        name: str,
        factory: str | Any,
        *,
        schemes: tuple[str, ...] = (),
        suffixes: tuple[str, ...] = (),
        description: str = "",
        fallback: bool = False,
    ) -> None:
        """Register one event backend.

        :param name: The backend's ``kind`` (``"sqlite"``); unique across all plugins, a duplicate
            is an error naming both plugins.
        :param factory: ``"module:Class"`` (imported only when a ledger of this kind is opened, so
            the entry-point module stays cheap) or the class itself. Called as
            ``factory(location, **options)``; returns an ``EventBackend``.
        :param schemes: URL schemes served (``("postgres", "postgresql")``).
        :param suffixes: Path suffixes served, compared case-insensitively
            (``(".sqlite", ".db")``).
        :param description: One line for ``agent-custody-memory plugins``.
        :param fallback: Serve every path no other backend claims (the builtin JSONL backend
            does; a second fallback is chosen only if the first is blocked).
        """


class RegisterStore(Protocol):
    """The ``register`` callable :func:`register_stores` receives."""

    def __call__(
        self,
        name: str,
        factory: str | Any,
        *,
        settings: str | Any | None = None,
        description: str = "",
    ) -> None:
        """Register one write-through store type.

        :param name: The ``type`` of a ``[[stores]]`` table in the server's config file
            (``"pgvector"``); unique across plugins.
        :param factory: ``"module:function"`` or a callable, imported only when a configured store
            uses this type. Called as ``factory(settings, name=...)`` with the validated settings
            model; returns an object implementing the ``Store`` protocol.
        :param settings: ``"module:Model"`` or a pydantic model class validating the table's keys.
            Secrets are never values in the file: the model names environment variables
            (``api_key_env``) and the factory reads them, failing with the variable's name.
            A field typed ``ConfigPath`` (from ``agent_custody_state.plugin``) or
            ``pathlib.Path`` names a file or folder: a relative value written in the config
            file is resolved against the file's folder before validation.
        :param description: One line for ``agent-custody-memory plugins``.
        """


@hookspec
def register_event_backends(register: RegisterEventBackend) -> None:
    """Register event backends: places that keep the ledger's events.

    Call ``register(name, factory, ...)`` once per backend (see ``RegisterEventBackend``).
    Locations are routed as SPEC section 3 says: a ``scheme://`` URL to the backend claiming the
    scheme, a path to the backend claiming its suffix, every other path to the fallback backend
    (the builtin JSONL one). A SQLite or PostgreSQL location with no backend installed is an
    error naming the distribution to install, never a silent fallback. A backend declares how
    the layers above should treat it on its class (``min_batch``, ``blocking``, ``shared``), never
    by its name being known to the core.

    :param register: Call it once per backend.
    :return: None; a plugin whose hook returns anything else fails to load (call ``register``).

    Example::

        from agent_custody_state.plugin import hookimpl

        @hookimpl
        def register_event_backends(register):
            register("sqlite", "my_plugin.backend:SqliteBackend", suffixes=(".sqlite", ".db"))

    .. versionadded:: 0.1.0
    """


@hookspec
def register_stores(register: RegisterStore) -> None:
    """Register write-through store types: retrieval stores that mirror the ledger.

    Call ``register(name, factory, ...)`` once per store type (see ``RegisterStore``). The core
    builds a store only when a ``[[stores]]`` table of the config names its type, and drives it
    itself (``stores.flows``): puts in configuration order with compensation, removals with
    verification. ``agent-custody-memory plugins`` lists each type with its settings.

    :param register: Call it once per store type.
    :return: None; a plugin whose hook returns anything else fails to load (call ``register``).

    Example::

        from agent_custody_state.plugin import hookimpl

        @hookimpl
        def register_stores(register):
            register("pgvector", "my_plugin.store:build", settings="my_plugin.settings:Settings")

    .. versionadded:: 0.1.0
    """


@hookspec
def event_appended(ledger: Ledger, event: Event) -> None:
    """Notification: ``event`` is durably in ``ledger`` (after fsync or commit).

    Called once per event, in append order, in the process that wrote it, after the write
    transaction has ended (a sweep notifies once per forget at its end). Use it for audit feeds,
    metrics or cache invalidation. It runs on the writer's thread: keep it fast.

    :param ledger: The ledger that appended the event.
    :param event: The event, exactly as stored (a forget's assert is already erased).
    :return: Nothing. It cannot veto or alter the event; an exception it raises is logged and
        ignored, because the write is already durable.

    .. versionadded:: 0.1.0
    """
