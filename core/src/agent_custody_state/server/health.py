"""``GET /healthz`` and ``GET /readyz``: whether a server is alive, and whether it can take calls.

A load balancer or an orchestrator (Kubernetes probes) has no bearer token, and an MCP call
needs one; these two paths answer without one, and say nothing beyond what they are for
(docs/configuration.md, "Health and readiness"):

- ``/healthz`` (liveness): ``200 {"status":"ok"}`` while the process answers HTTP. No ledger
  call: a slow ledger must not get a live process restarted.
- ``/readyz`` (readiness): ``200 {"status":"ready"}`` when the server can take calls: it is not
  stopping (``draining``), and its ledger answers a cheap read (one lookup of a fact id no fact
  has; in crypto-shred mode also of a key id no key has, in its key store) made on the ledger's
  worker thread, so the worker is shown alive too. Otherwise
  ``503 {"status":"not_ready","reason":CODE}``, ``CODE`` being ``draining`` or
  ``ledger_unavailable``; the cause (which may name the ledger's location) goes to the server's
  log, once per change, never into the answer.

The ledger read is the one every call starts with (a JSONL ledger catches up under its shared
lock; SQL runs one indexed ``SELECT``): no write section, no write lock. Its outcome is kept
for ``CACHE_SECONDS``, and at most one read is outstanding at a time: a read still running
when ``PROBE_TIMEOUT`` has passed answers ``ledger_unavailable`` and later probes wait for
that same read rather than queue more behind it. So a flood of probes costs the ledger at most
about one read a second.

Both paths take ``GET`` and ``HEAD`` (anything else: ``405``), a declared body over
``max_request_bytes`` is refused unread (``413``) and no body is ever read; a foreign browser
``Origin`` gets ``403`` as at ``/mcp``. The ``Host`` header is not checked: an orchestrator
probes by the pod's address (``Host: 10.0.3.7:8790``), which no ``allowed_hosts`` names, and
what a page reaching a loopback server through DNS rebinding could read here is only whether
the server is ready. The connection limits (``header_timeout``, ``max_connections``) apply as
to every request; ``max_concurrency`` does not (a probe never waits for the calls in flight,
and an overloaded server is not reported down).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from agent_custody_state.ledger.keystore import KeyStore
from agent_custody_state.server.guard import HostPolicy
from agent_custody_state.server.intake import header, respond
from agent_custody_state.server.service import MemoryService

log = logging.getLogger(__name__)

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
#: How long a readiness outcome is reused before the ledger is asked again.
CACHE_SECONDS = 1.0
#: How long a probe waits for the ledger's answer before it says ``ledger_unavailable``.
PROBE_TIMEOUT = 2.0
DRAINING = "draining"
LEDGER_UNAVAILABLE = "ledger_unavailable"
#: The fact id looked up: a real lookup, whose answer (none) is thrown away.
PROBE_FACT_ID = "agent-custody-readiness-probe"
_METHODS = frozenset({"GET", "HEAD"})


def ledger_probe(service: MemoryService) -> Callable[[], Awaitable[None]]:
    """One cheap read of ``service``'s ledger, on its worker thread; in crypto-shred mode one
    of its key store too (a key id no key has): every value is read and written through it,
    so a key database that is down left the server ready while each call failed."""

    def read() -> None:
        backend = service.ledger.backend
        backend.get_assert(PROBE_FACT_ID)  # a closed ledger raises here
        keys = getattr(backend, "keys", None)  # ``ShreddingBackend``'s key store
        if isinstance(keys, KeyStore):
            keys.get({PROBE_FACT_ID})

    async def probe() -> None:
        await service.worker.run(read)

    return probe


class Readiness:
    """Whether the server can take calls: ``await check()`` is None, or the reason it cannot."""

    def __init__(
        self,
        probe: Callable[[], Awaitable[None]],
        *,
        cache_seconds: float = CACHE_SECONDS,
        timeout: float = PROBE_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.probe, self.clock = probe, clock
        self.cache_seconds, self.timeout = cache_seconds, timeout
        #: Set by the HTTP server (``follow_stop``): whether a stop has begun.
        self.draining: Callable[[], bool] = lambda: False
        self._known: tuple[float, str | None] | None = None  # (when, outcome) last learned
        self._running: asyncio.Task[str | None] | None = None
        self._reported: str | None = None  # the last outcome logged

    async def check(self) -> str | None:
        if self.draining():
            return DRAINING
        if self._known is not None and self.clock() - self._known[0] < self.cache_seconds:
            return self._known[1]
        if self._running is None:
            self._running = asyncio.ensure_future(self._read())
        running = self._running
        done, _ = await asyncio.wait({running}, timeout=self.timeout)
        if not done:  # the read goes on; the next probes wait for it, not for a new one
            self._learn(LEDGER_UNAVAILABLE, f"no answer within {self.timeout:g} s")
            return LEDGER_UNAVAILABLE
        return DRAINING if self.draining() else running.result()

    async def _read(self) -> str | None:
        try:
            await self.probe()
        except Exception as exc:  # whatever the backend raises: the ledger cannot answer
            self._learn(LEDGER_UNAVAILABLE, f"{type(exc).__name__}: {exc}")
            return LEDGER_UNAVAILABLE
        finally:
            self._running = None
        self._learn(None, "")
        return None

    def _learn(self, outcome: str | None, cause: str) -> None:
        self._known = (self.clock(), outcome)
        if outcome == self._reported:
            return
        self._reported = outcome
        if outcome is None:
            log.info("readiness: ready again (the ledger answers)")
        else:
            log.warning("readiness: not ready (%s): %s", outcome, cause)


async def _answer(
    scope: Scope, send: Send, status: int, body: Any, headers: list[tuple[bytes, bytes]]
) -> None:
    """``intake.respond``, never cached, and headers only for a HEAD request."""
    no_store = [(b"cache-control", b"no-store"), *headers]
    await respond(send, status, body, no_store, head=scope["method"] == "HEAD")


class HealthEndpoint:
    """One of the two paths, as a plain ASGI app (outside the guard: no token)."""

    def __init__(
        self, path: str, readiness: Readiness | None, hosts: HostPolicy, max_request_bytes: int
    ) -> None:
        self.path, self.readiness, self.hosts = path, readiness, hosts
        self.max_request_bytes = max_request_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.hosts.origin_ok(header(scope, b"origin")):
            error = {"error": "forbidden: cross-origin requests are refused"}
            await _answer(scope, send, 403, error, [])
            return
        if scope["method"] not in _METHODS:
            error = {"error": f"method not allowed: {self.path} takes GET and HEAD"}
            await _answer(scope, send, 405, error, [(b"allow", b"GET, HEAD")])
            return
        length = (header(scope, b"content-length") or "").strip()
        if length.isascii() and length.isdigit() and int(length) > self.max_request_bytes:
            error = {"error": "request body too large"}
            await _answer(scope, send, 413, error, [(b"connection", b"close")])
            return
        if self.readiness is None:
            await _answer(scope, send, 200, {"status": "ok"}, [])
            return
        reason = await self.readiness.check()
        if reason is None:
            await _answer(scope, send, 200, {"status": "ready"}, [])
        else:
            await _answer(scope, send, 503, {"status": "not_ready", "reason": reason}, [])


def health_routes(service: MemoryService, hosts: HostPolicy, max_request_bytes: int) -> list[Route]:
    """The routes of ``/healthz`` and ``/readyz`` (``follow_stop`` tells the second of a stop)."""
    readiness = Readiness(ledger_probe(service))
    return [
        Route(path, HealthEndpoint(path, ready, hosts, max_request_bytes), methods=None)
        for path, ready in ((HEALTH_PATH, None), (READY_PATH, readiness))
    ]


def follow_stop(app: Starlette, server: Any) -> Readiness | None:
    """Have ``app``'s ``/readyz`` answer ``draining`` once ``server`` (a ``MemoryHttpServer``)
    has begun to stop: ``request_stop``, ``close`` or a signal uvicorn caught, a SIGTERM's
    ``shutdown_delay`` included (``drain.py``). Its readiness."""
    for route in app.routes:
        endpoint = getattr(route, "app", None)
        if isinstance(endpoint, HealthEndpoint) and endpoint.readiness is not None:
            endpoint.readiness.draining = lambda: (
                server._stop_requested
                or bool(server._uvicorn is not None and server._uvicorn.stopping)
            )
            return endpoint.readiness
    return None
