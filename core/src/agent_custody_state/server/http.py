"""Streamable HTTP: the memory server at ``/mcp`` behind the guard, served by uvicorn.

``build_http_app`` makes the Starlette app (``/mcp``; ``/healthz`` and ``/readyz``, tokenless,
for probes: ``health.py``; with OAuth the RFC 9728 metadata under
``/.well-known/oauth-protected-resource``; other paths 404); ``MemoryHttpServer`` runs it, in
the caller's event loop (``await server.serve()``) or on a background thread
(``serve_memory_http``, for embedding and tests). A non-loopback address is refused without a
bearer token (``binding.py``): an unauthenticated memory server on a network would let anyone
read and erase it.

``stateless=True`` keeps no session between requests (the SDK's stateless session manager): any
of several server processes on one ledger can answer any request, and resource subscriptions
(which live in one process) are not offered.

Against one client locking everyone else out: each token holds a bounded number of sessions
(``sessions.py``), connections must send their headers in time and are capped below the
open-file limit, and accept errors are logged at a bounded rate (``connections.py``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Sequence
from typing import Any

import anyio
import uvicorn
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agent_custody_state.ledger.arguments import bool_arg
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.server import drain, health
from agent_custody_state.server.app import MemoryServer, create_memory_server
from agent_custody_state.server.binding import allowed_host_names, listen
from agent_custody_state.server.binding import check_bind as check_bind  # cli.serve
from agent_custody_state.server.binding import is_loopback as is_loopback  # server.runtime
from agent_custody_state.server.connections import (
    DEFAULT_BACKLOG,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    AcceptErrorLog,
    ConnectionStats,
    effective_limits,
    guarded_protocol,
)
from agent_custody_state.server.drain import DRAIN_SECONDS, DrainingServer, outlast
from agent_custody_state.server.foreign import watched
from agent_custody_state.server.guard import BearerToken, HostPolicy, HttpGuard, normalize_tokens
from agent_custody_state.server.intake import DEFAULT_BODY_TIMEOUT
from agent_custody_state.server.oauth import JwtVerifier, OAuthSettings
from agent_custody_state.server.sessions import (
    DEFAULT_SESSION_IDLE_TIMEOUT,
    DEFAULT_SESSIONS_PER_TOKEN,
    SessionLimiter,
)
from agent_custody_state.stores.finish import FINISH_SECONDS

log = logging.getLogger(__name__)

DEFAULT_PORT = 8790
DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_CONCURRENCY = 8  # past this, queueing costs more latency than a retry


async def _not_found(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"error": "not found: the memory server answers only at /mcp"}, 404)


def build_http_app(
    server: MemoryServer,
    *,
    tokens: Sequence[BearerToken],
    host: str = "127.0.0.1",
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] = (),
    sessions_per_token: int = DEFAULT_SESSIONS_PER_TOKEN,
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    oauth: OAuthSettings | None = None,
    stateless: bool = False,
) -> tuple[Starlette, HttpGuard]:
    """The ASGI app serving ``server`` at ``/mcp``, and the guard in front of it."""
    bool_arg(stateless, "stateless")  # "no" would read as True
    check_bind(host, has_tokens=bool(tokens) or oauth is not None)
    if max_request_bytes <= 0 or max_concurrency <= 0:
        raise ValueError("max_request_bytes and max_concurrency must be positive")
    if session_idle_timeout <= 0 or body_timeout <= 0:
        raise ValueError("session_idle_timeout and body_timeout must be positive")
    manager = StreamableHTTPSessionManager(
        app=server,
        json_response=True,
        max_request_body_size=max_request_bytes,
        session_idle_timeout=session_idle_timeout,
        # Every token (and the tokenless caller) is held to its share, so the table is never
        # full for anyone: see sessions.py. OAuth principals are not known in advance: each is
        # held to its share too, and the table gets the SDK's default room for them.
        max_sessions=sessions_per_token * (len(tokens) + 1) + (10_000 if oauth else 0),
        stateless=stateless,
    )
    inner: Any = StreamableHTTPASGIApp(manager)
    if not stateless:
        # The SDK's table of live sessions (private; without it ended ones wait for eviction)
        live = getattr(manager, "_server_instances", None)
        alive = (lambda session: session in live) if isinstance(live, dict) else None
        inner = SessionLimiter(inner, sessions_per_token, alive)
    guard = HttpGuard(
        inner,
        tokens=tokens,
        hosts=HostPolicy(allowed_host_names(host, allowed_hosts), allowed_origins),
        max_request_bytes=max_request_bytes,
        max_concurrency=max_concurrency,
        body_timeout=body_timeout,
        oauth=JwtVerifier(oauth) if oauth is not None else None,
    )
    # Every method reaches the guard: Host, Origin and the token are checked before a method
    # the endpoint does not serve is refused (405), as for every other request (SPEC 4.5).
    routes = [Route("/mcp", endpoint=guard, methods=None)]
    routes += health.health_routes(server.memory, guard.hosts, max_request_bytes)
    if oauth is not None:
        routes += metadata_routes(oauth)
    watcher = None if stateless else getattr(server, "notifier", None)  # other processes' appends
    app = Starlette(
        routes=routes,
        exception_handlers={404: _not_found},
        lifespan=lambda _app: watched(manager.run(), watcher),
    )
    app.router.redirect_slashes = False  # /mcp/ is another path: 404, not a 307 to /mcp
    app.state.mcp_sessions = manager  # a stop ends its sessions' GET streams (drain.py)
    return app, guard


def metadata_routes(oauth: OAuthSettings) -> list[Route]:
    """RFC 9728 metadata at the path-suffixed place and, for clients that look only there, at
    the bare well-known path; public (a client reads it before it has a token)."""
    document = oauth.metadata()

    async def metadata(request: Request) -> JSONResponse:
        return JSONResponse(document, headers={"access-control-allow-origin": "*"})

    paths = dict.fromkeys([oauth.metadata_path, "/.well-known/oauth-protected-resource"])
    return [Route(path, endpoint=metadata, methods=["GET"]) for path in paths]


class MemoryHttpServer:
    """A running (or ready-to-run) HTTP memory server; ``url`` is known once it is bound."""

    def __init__(
        self,
        app: Starlette,
        guard: HttpGuard,
        *,
        host: str,
        port: int,
        memory: MemoryServer,
        header_timeout: float = DEFAULT_HEADER_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        backlog: int = DEFAULT_BACKLOG,
        shutdown_delay: float = 0.0,
    ) -> None:
        if header_timeout <= 0 or max_connections < 1 or backlog < 1:
            raise ValueError("header_timeout, max_connections and backlog must be positive")
        self.app, self.guard, self.memory = app, guard, memory
        self.host, self.port, self.shutdown_delay = host, port, drain.checked_delay(shutdown_delay)
        self.header_timeout = header_timeout
        self.max_connections, self.backlog = effective_limits(max_connections, backlog)
        if self.max_connections < max_connections:
            log.warning(
                "max_connections lowered from %d to %d (backlog %d) to stay under the "
                "open-file limit (ulimit -n)",
                max_connections,
                self.max_connections,
                self.backlog,
            )
        self.connections = ConnectionStats()
        self._uvicorn: DrainingServer | None = None
        self._stop_requested = False
        self._thread: threading.Thread | None = None
        self.socket: socket.socket | None = None  # the listening socket, once bound
        self.readiness = health.follow_stop(app, self)  # /readyz: "draining" once a stop begins

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/mcp"

    async def serve(self, *, on_bound: Any = None, sock: socket.socket | None = None) -> None:
        """Serve until ``close()`` (or a signal when on the main thread).

        ``sock``: a socket from :func:`listen` (the command line binds before it opens the
        ledger, so a taken port leaves nothing behind); else one is bound now. ``on_bound(self)``
        is called once the socket listens; connections made from then on wait in the backlog
        until the app has started.
        """
        if sock is None:
            sock = listen(self.host, self.port, self.backlog)
        self.port = sock.getsockname()[1]
        self.guard.hosts.port = self.port  # an Origin must name this port (SPEC 4.5)
        self.socket = sock
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            log_config=None,  # uvicorn's records go through the server's log (--log-format)
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=3,
            server_header=False,
            backlog=self.backlog,
            http=guarded_protocol(self.header_timeout, self.max_connections, self.connections),
        )
        asyncio.get_running_loop().set_exception_handler(AcceptErrorLog(self.connections))
        self._uvicorn = drain.memory_server(config, self.memory, self.shutdown_delay, self.app)
        self._uvicorn.should_exit = self._stop_requested
        if on_bound is not None:
            on_bound(self)
        draining = self.readiness.draining if self.readiness is not None else None
        try:
            async with self.memory.resuming(draining):  # owed work, while serving
                await self._uvicorn.serve(sockets=[sock])
        finally:
            sock.close()
        # A call uvicorn cancelled still finishes its flow (drain.py): not cut by the loop's end.
        await outlast(self._uvicorn.serving, FINISH_SECONDS)

    def start(self, timeout: float = 10) -> MemoryHttpServer:
        """Serve on a background thread; return once bound."""
        bound = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                anyio.run(lambda: self.serve(on_bound=lambda _s: bound.set()))
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
                bound.set()

        self._thread = threading.Thread(target=run, name="memory-http", daemon=True)
        self._thread.start()
        if not bound.wait(timeout) or failure:
            raise RuntimeError(f"the HTTP memory server did not start: {failure or 'timeout'}")
        return self

    def request_stop(self, sig: int | None = None) -> None:
        """Stop (safe from a signal handler); ``sig`` as uvicorn takes it (``stop_signal``)."""
        if self._uvicorn is None:
            self._stop_requested = True  # ``serve`` returns as soon as it has started
        else:
            self._uvicorn.stop_signal(sig)

    def close(self) -> None:
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        if self._thread is not None:
            # the calls in flight are answered first; a flow cut off from its call still ends
            self._thread.join(DRAIN_SECONDS + FINISH_SECONDS + 10)
            self._thread = None

    def __enter__(self) -> MemoryHttpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def create_memory_http_server(
    ledger: Ledger,
    *,
    port: int = DEFAULT_PORT,
    host: str = "127.0.0.1",
    tokens: Any = None,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] = (),
    sessions_per_token: int = DEFAULT_SESSIONS_PER_TOKEN,
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT,
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    backlog: int = DEFAULT_BACKLOG,
    oauth: OAuthSettings | None = None,
    stateless: bool = False,
    shutdown_delay: float = 0.0,
    **server_options: Any,
) -> MemoryHttpServer:
    """Build (not start) the HTTP server; ``server_options`` go to ``create_memory_server``.
    ``stateless`` is a bool (``LedgerError`` otherwise), checked before anything is built."""
    bool_arg(stateless, "stateless")  # "no" would read as True: stateless, no subscriptions
    memory = create_memory_server(ledger, subscriptions=not stateless, **server_options)
    app, guard = build_http_app(
        memory,
        tokens=normalize_tokens(tokens),
        host=host,
        max_request_bytes=max_request_bytes,
        max_concurrency=max_concurrency,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        sessions_per_token=sessions_per_token,
        session_idle_timeout=session_idle_timeout,
        body_timeout=body_timeout,
        oauth=oauth,
        stateless=stateless,
    )
    return MemoryHttpServer(
        app,
        guard,
        host=host,
        port=port,
        memory=memory,
        header_timeout=header_timeout,
        max_connections=max_connections,
        backlog=backlog,
        shutdown_delay=shutdown_delay,
    )


def serve_memory_http(
    ledger: Ledger,
    *,
    port: int = DEFAULT_PORT,
    host: str = "127.0.0.1",
    tokens: Any = None,
    **options: Any,
) -> MemoryHttpServer:
    """Serve the memory server over Streamable HTTP on a background thread (SPEC 7).

    ``tokens``: ``{token: "gateway" | "direct"}``, or a list of tokens (gateway role) /
    ``(token, role)`` pairs / ``BearerToken``. Returns the running server: ``.url``, ``.port``,
    ``.close()``; it is a context manager. ``port=0`` picks a free port. Other options:
    ``max_request_bytes``, ``max_concurrency``, ``allowed_hosts``, ``allowed_origins``,
    ``sessions_per_token``, ``session_idle_timeout``, ``header_timeout``, ``body_timeout``,
    ``max_connections``, ``backlog``, ``oauth`` (``OAuthSettings``), ``stateless`` and every
    ``create_memory_server`` option (``shutdown_delay`` is inert here: a thread hears no signal).
    """
    server = create_memory_http_server(ledger, port=port, host=host, tokens=tokens, **options)
    return server.start()


__all__ = [
    "MemoryHttpServer",
    "build_http_app",
    "create_memory_http_server",
    "listen",
    "serve_memory_http",
]
