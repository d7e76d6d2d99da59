"""The MCP memory server (SPEC 4): ten tools over a ledger, behind the receipts gateway.

Modules by role: ``tools`` (schemas), ``validation`` (argument checks), ``trust`` (``_meta`` and
caller roles), ``evidence``, ``handlers`` (one function per tool), ``sweeping``, ``service``
(checks, dispatch, signing), ``signing`` (DSSE envelopes, keys), ``worker`` (the ledger thread),
``appender`` (group commit of concurrent writes),
``app`` (the SDK server), ``stdio`` and ``http``/``guard`` (transports), ``runtime`` and
``commands`` (the command line), ``demo``.
"""

from __future__ import annotations

from .app import MemoryServer, create_memory_server
from .http import MemoryHttpServer, create_memory_http_server, serve_memory_http

__all__ = [
    "MemoryHttpServer", "MemoryServer", "create_memory_http_server", "create_memory_server",
    "serve_memory_http",
]
