"""agent-custody-state: governed memory for AI agents.

The public API (SPEC section 7): ``Ledger``, ``open_store``, ``LedgerError``, the fact and event
models, ``create_memory_server`` and ``serve_memory_http``; ``hookimpl`` for plugins.

Vocabulary: an *event backend* keeps the ledger's events (JSONL, SQLite, PostgreSQL, ...); a
*store* is a write-through retrieval store (mem0, Zep, pgvector, ...). SPEC section 7 pins three
older names for the event side, kept as aliases: ``open_store`` is :func:`open_backend`,
``EventStore`` is :class:`EventBackend`, ``EventStoreError`` is :class:`EventBackendError`.
"""

from __future__ import annotations

from typing import Any

from agent_custody_state.canonical import canonical_json
from agent_custody_state.hookspecs import hookimpl
from agent_custody_state.ledger.arguments import value_digest
from agent_custody_state.ledger.backend import EventBackend, EventBackendError
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.ledger import Ledger
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
)
from agent_custody_state.ledger.queries import SweepResult
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.ledger.retention import RetentionPolicy
from agent_custody_state.plugins import open_backend
from agent_custody_state.version import __version__

#: SPEC section 7 names (aliases of the event-backend names above).
EventStore = EventBackend
EventStoreError = EventBackendError
open_store = open_backend


def create_memory_server(ledger: Ledger, **kwargs: Any) -> Any:
    """Build the MCP memory server over a ledger (see ``agent_custody_state.server``)."""
    from agent_custody_state.server.app import create_memory_server as _create

    return _create(ledger, **kwargs)


def serve_memory_http(ledger: Ledger, **kwargs: Any) -> Any:
    """Serve the memory server over Streamable HTTP (see ``agent_custody_state.server``)."""
    from agent_custody_state.server.http import serve_memory_http as _serve

    return _serve(ledger, **kwargs)


__all__ = [
    "AssertEvent",
    "AssertRequest",
    "ConfirmEvent",
    "Event",
    "EventBackend",
    "EventBackendError",
    "EventStore",
    "EventStoreError",
    "Fact",
    "ForgetEvent",
    "Forgotten",
    "HoldEvent",
    "Ledger",
    "LedgerError",
    "ReleaseEvent",
    "RetentionPolicy",
    "RetractEvent",
    "Source",
    "SweepResult",
    "__version__",
    "canonical_json",
    "create_memory_server",
    "hookimpl",
    "open_backend",
    "open_store",
    "serve_memory_http",
    "value_digest",
]
