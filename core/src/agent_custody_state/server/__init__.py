"""The MCP memory server (SPEC 4): ten tools over a ledger, behind the receipts gateway.

MCP only: the custody flows live in ``agent_custody_state.stores.flows``; this package turns tool
calls into flow calls and reports into tool results. Modules by role: ``tools`` (schemas),
``validation`` (argument checks), ``trust`` (``_meta`` and caller roles), ``evidence``,
``handlers`` (one function per tool), ``shapes`` (reports -> tool JSON), ``service`` (checks,
dispatch, signing), ``signing`` (DSSE envelopes, keys), ``worker`` (the ledger thread),
``appender`` (group commit of concurrent writes), ``app`` (the SDK server), ``stdio`` and
``http``/``guard`` (transports), ``runtime`` (from a config to a running server).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_custody_state.server.app import MemoryServer, create_memory_server
    from agent_custody_state.server.http import (
        MemoryHttpServer,
        create_memory_http_server,
        serve_memory_http,
    )

# The names below are imported on first use: ``agent_custody_state.server.shapes`` (which the
# command line prints with) must not pull in the MCP SDK, Starlette and uvicorn.
_LAZY = {
    "MemoryServer": "agent_custody_state.server.app",
    "create_memory_server": "agent_custody_state.server.app",
    "MemoryHttpServer": "agent_custody_state.server.http",
    "create_memory_http_server": "agent_custody_state.server.http",
    "serve_memory_http": "agent_custody_state.server.http",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "MemoryHttpServer",
    "MemoryServer",
    "create_memory_http_server",
    "create_memory_server",
    "serve_memory_http",
]
