"""Everything a plugin author imports, in one place.

An event backend or write-through store plugin imports from this module and from its own vendor
SDK, nothing else of ``agent_custody_state`` (the lint session's import contracts check this for
the plugins in this repository). What is here is the supported surface for plugins; the modules
behind it may move.

Event backends subclass :class:`EventBackend` (usually with :class:`ReentrantTransactions` for the
write section) and register through :func:`register_event_backends`; a backend that supports
crypto-shred mode returns a :class:`KeyStore` from ``EventBackend.keystore`` (a file one is
:class:`FileKeyStore`); stores implement the :class:`Store` protocol and register through
:func:`register_stores`; a store's settings model takes :class:`MaskedRepr` first among
its bases (its ``repr`` shows no password). See ``docs/hooks.md`` and ``docs/writing-plugins.md``.
"""

from __future__ import annotations

from agent_custody_state.backends.keystore_file import FileKeyStore, SidecarKeys
from agent_custody_state.fastjson import loads as json_loads
from agent_custody_state.hookspecs import RegisterEventBackend, RegisterStore, hookimpl
from agent_custody_state.ledger.arguments import (
    MAX_KEY_BYTES,
    MAX_TOPIC_BYTES,
    key_problem,
    topic_problem,
)
from agent_custody_state.ledger.backend import EventBackend, EventBackendError, KeyName
from agent_custody_state.ledger.chain import ChainHead
from agent_custody_state.ledger.checkpoints import CheckpointLog
from agent_custody_state.ledger.files import (
    PRIVATE_MODE,
    check_folder,
    create_private,
    open_private,
    refuse_hard_links,
)
from agent_custody_state.ledger.forks import watch as watch_forks
from agent_custody_state.ledger.keystore import KEY_BYTES, KeyStore, KeyStoreError
from agent_custody_state.ledger.model import (
    AssertEvent,
    ConfirmEvent,
    Event,
    Fact,
    ForgetEvent,
    Forgotten,
    HoldEvent,
    ReleaseEvent,
    RetractEvent,
    Source,
    event_from_dict,
    event_from_json,
    forget_assert,
    shape_problem,
)
from agent_custody_state.ledger.modemark import ModeFile, ModeMark
from agent_custody_state.ledger.sections import ReentrantTransactions
from agent_custody_state.ledger.stored import ChunkRead, LedgerChanged, StoredChunk
from agent_custody_state.lockwait import DEFAULT_LOCK_TIMEOUT, LockWaitTimeout, lock_timeout
from agent_custody_state.lockwait import exclusive as lock_exclusive
from agent_custody_state.lockwait import held_by as lock_held_by
from agent_custody_state.maskedrepr import MaskedRepr
from agent_custody_state.plugins import resolve_ref
from agent_custody_state.processes import HeldLock, locks_on
from agent_custody_state.stores.base import (
    Store,
    StoreError,
    Verification,
    custody_metadata,
    fact_text,
    guard_logger,
)
from agent_custody_state.stores.kit import (
    ConfigPath,
    call_sdk,
    holdable_text,
    original_text,
    poll,
    public_url,
    run_sync,
    secret_from_env,
)
from agent_custody_state.stores.residual import (
    embedding_provider,
    postgres_table,
    process_memory,
    service_copies,
    sqlite_file,
)
from agent_custody_state.stores.residual import window as residual_window
from agent_custody_state.stores.unanswered import StatusOf, Unanswered, http_status, may_have_landed
from agent_custody_state.stores.withheld import withholding
from agent_custody_state.timeutil import wire_time_key

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "KEY_BYTES",
    "MAX_KEY_BYTES",
    "MAX_TOPIC_BYTES",
    "PRIVATE_MODE",
    "AssertEvent",
    "ChainHead",
    "CheckpointLog",
    "ChunkRead",
    "ConfigPath",
    "ConfirmEvent",
    "Event",
    "EventBackend",
    "EventBackendError",
    "Fact",
    "FileKeyStore",
    "ForgetEvent",
    "Forgotten",
    "HeldLock",
    "HoldEvent",
    "KeyName",
    "KeyStore",
    "KeyStoreError",
    "LedgerChanged",
    "LockWaitTimeout",
    "MaskedRepr",
    "ModeFile",
    "ModeMark",
    "ReentrantTransactions",
    "RegisterEventBackend",
    "RegisterStore",
    "ReleaseEvent",
    "RetractEvent",
    "SidecarKeys",
    "Source",
    "StatusOf",
    "Store",
    "StoreError",
    "StoredChunk",
    "Unanswered",
    "Verification",
    "call_sdk",
    "check_folder",
    "create_private",
    "custody_metadata",
    "embedding_provider",
    "event_from_dict",
    "event_from_json",
    "fact_text",
    "forget_assert",
    "guard_logger",
    "holdable_text",
    "hookimpl",
    "http_status",
    "json_loads",
    "key_problem",
    "lock_exclusive",
    "lock_held_by",
    "lock_timeout",
    "locks_on",
    "may_have_landed",
    "open_private",
    "original_text",
    "poll",
    "postgres_table",
    "process_memory",
    "public_url",
    "refuse_hard_links",
    "residual_window",
    "resolve_ref",
    "run_sync",
    "secret_from_env",
    "service_copies",
    "shape_problem",
    "sqlite_file",
    "topic_problem",
    "watch_forks",
    "wire_time_key",
    "withholding",
]
