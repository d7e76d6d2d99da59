"""agent-custody-state: governed memory for AI agents.

The public API (SPEC section 7): ``Ledger``, ``open_store``, ``LedgerError``, the fact and event
models, ``create_memory_server`` and ``serve_memory_http``; ``hookimpl`` for plugins.
"""

from __future__ import annotations

from typing import Any

import pluggy

hookimpl = pluggy.HookimplMarker("agent_custody_state")

from .canonical import canonical_json, value_digest  # noqa: E402
from .eventstore import EventStore, EventStoreError  # noqa: E402
from .ledger.errors import LedgerError  # noqa: E402
from .ledger.ledger import Ledger  # noqa: E402
from .ledger.model import (  # noqa: E402
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
from .ledger.queries import SweepResult  # noqa: E402
from .ledger.retention import RetentionPolicy  # noqa: E402
from .plugins import open_store  # noqa: E402

__version__ = "0.1.0"


def create_memory_server(ledger: Ledger, **kwargs: Any) -> Any:
    """Build the MCP memory server over a ledger (see ``agent_custody_state.server``)."""
    from .server.app import create_memory_server as _create

    return _create(ledger, **kwargs)


def serve_memory_http(ledger: Ledger, **kwargs: Any) -> Any:
    """Serve the memory server over Streamable HTTP (see ``agent_custody_state.server``)."""
    from .server.http import serve_memory_http as _serve

    return _serve(ledger, **kwargs)


__all__ = [
    "AssertEvent", "ConfirmEvent", "Event", "EventStore", "EventStoreError", "Fact",
    "ForgetEvent", "Forgotten", "HoldEvent", "Ledger", "LedgerError", "ReleaseEvent",
    "RetentionPolicy", "RetractEvent", "Source", "SweepResult", "canonical_json",
    "create_memory_server", "hookimpl", "open_store", "serve_memory_http", "value_digest",
]
