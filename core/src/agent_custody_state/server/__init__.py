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

from agent_custody_state.server.app import MemoryServer, create_memory_server
from agent_custody_state.server.http import (
    MemoryHttpServer,
    create_memory_http_server,
    serve_memory_http,
)

__all__ = [
    "MemoryHttpServer",
    "MemoryServer",
    "create_memory_http_server",
    "create_memory_server",
    "serve_memory_http",
]
