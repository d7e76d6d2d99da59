"""Connections that never finish their headers cannot lock the gateway out (issue 11 item 4).

uvicorn holds a new connection for as long as the client likes before its request headers are
complete: its keep-alive timer only starts after a response. A slowloris client opening
connections and dribbling header bytes therefore keeps every one of them, until the process runs
out of file descriptors and then cannot accept the gateway either. ``uvicorn``'s own
``limit_concurrency`` does not help: it counts those connections, but only answers 503 to a
request whose headers are complete, so the silent ones fill it and the gateway gets the 503s.

``guarded_protocol`` subclasses uvicorn's httptools protocol (``httptools`` is a dependency of
the core) with three rules:

- **header timeout**: a connection must deliver complete request headers within
  ``header_timeout`` seconds of opening, and each later request within ``header_timeout`` of its
  first byte (an idle keep-alive connection is uvicorn's own 5 s timer's business); the unread
  rest of a body the server answered early (413) must arrive as quickly. Else it is closed.
  Headers are also capped at ``MAX_HEADER_BYTES`` (431 past it). A body the app is reading is
  timed by the guard (``body_timeout``).
- **connection limit**: past ``max_connections`` open connections, a new one first closes a
  connection with no response pending (silent, idle, or still sending headers: nothing is lost
  but a slot), preferring those that never completed a request, the longest waiting first;
  if every connection is busy with a request, the new one is answered 503 and closed. The limit
  and the listen backlog are kept below the process's open-file limit (``effective_limits``),
  so accepting does not fail for lack of descriptors.
- **accept errors** (``EMFILE`` "Too many open files" and the like, from the event loop's accept
  loop) are logged at most once per ``ACCEPT_LOG_INTERVAL`` with a count, never as a traceback
  per attempt: Python 3.11's accept loop reports the error once per backlog slot, every time.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger("agent_custody_state.server.http")

DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_MAX_CONNECTIONS = 512
DEFAULT_BACKLOG = 256
#: Descriptors kept free for everything but client connections (ledger, stores, logs, pipes).
FD_RESERVE = 64
MAX_HEADER_BYTES = 64 * 1024
ACCEPT_LOG_INTERVAL = 10.0


def _raw_response(status: str, body: bytes = b"", *headers: bytes) -> bytes:
    """A whole HTTP/1.1 response that closes the connection, written before any request."""
    head = [
        b"HTTP/1.1 " + status.encode(),
        *headers,
        b"connection: close",
        b"content-length: " + str(len(body)).encode(),
    ]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


_REFUSED = _raw_response(
    "503 Service Unavailable",
    b'{"error":"too many connections: every one is busy; retry soon"}',
    b"content-type: application/json",
    b"retry-after: 1",
)
_TOO_LONG = _raw_response("431 Request Header Fields Too Large")


@dataclass
class ConnectionStats:
    """What the guards did, for tests and benchmarks (``MemoryHttpServer.connections``)."""

    open: int = 0
    slow_closed: int = 0  # header timeout or header size
    evicted: int = 0  # closed to make room for a new connection
    refused: int = 0  # answered 503: every connection was busy
    accept_errors: int = 0


def file_limit() -> int | None:
    """The soft open-file limit of this process, or None when unlimited or unknown."""
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY else int(soft)


def effective_limits(max_connections: int, backlog: int) -> tuple[int, int]:
    """``(max_connections, backlog)`` lowered to fit under the open-file limit.

    The event loop accepts up to ``backlog`` connections in one go before any of them can make
    room by closing an old one, so the connections held plus one backlog's worth, plus
    ``FD_RESERVE`` descriptors for everything else, must fit, or accepting fails with EMFILE.
    """
    limit = file_limit()
    if limit is None:
        return max_connections, backlog
    room = max(limit - FD_RESERVE, 2)
    backlog = max(1, min(backlog, room // 4))
    return max(1, min(max_connections, room - backlog)), backlog


def guarded_protocol(
    header_timeout: float, max_connections: int, stats: ConnectionStats
) -> type[HttpToolsProtocol]:
    """The uvicorn protocol class enforcing the rules above (pass it as ``Config(http=...)``)."""

    class GuardedHttpProtocol(HttpToolsProtocol):
        """Times the header phase; counts as *waiting* whenever no response is pending."""

        _in_headers = False  # the parser is between a message's start and its headers' end
        _served = False  # a request has been answered on this connection
        _since = 0.0  # when the connection last started waiting (opened, or answered)
        _header_bytes = 0
        _timer: asyncio.TimerHandle | None = None

        def _waiting(self) -> bool:
            """No response pending: silent, idle, in the headers of a new request, or draining
            the unread body of a request already answered."""
            return self.cycle is None or self.cycle.response_complete

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            stats.open = len(self.connections)
            self._since = self.loop.time()
            self._arm()  # the first request's headers are due within header_timeout
            if len(self.connections) > max_connections and not self._evict_one():
                stats.refused += 1
                transport.write(_REFUSED)
                transport.close()

        def _evict_one(self) -> bool:
            waiting = [
                c
                for c in self.connections
                if c is not self
                and isinstance(c, type(self))
                and c._waiting()
                and not c.transport.is_closing()
            ]
            if not waiting:
                return False
            stats.evicted += 1
            # Connections that never got a request through go first (a slowloris never does;
            # an idle gateway connection has), the longest waiting first.
            min(waiting, key=lambda c: (c._served, c._since)).transport.close()
            return True

        def _arm(self) -> None:
            if self._timer is None:
                self._timer = self.loop.call_later(header_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _too_slow(self) -> None:
            self._timer = None
            if self.transport.is_closing():
                return
            if not self._waiting():
                self._arm()  # a pipelined request's headers: judged once the answer is out
                return
            stats.slow_closed += 1
            self.transport.close()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._in_headers = True
            self._header_bytes = 0
            self._arm()  # a request's headers are due within header_timeout of its first byte

        def on_headers_complete(self) -> None:
            self._in_headers = False
            self._disarm()
            super().on_headers_complete()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if not self._in_headers or self.transport.is_closing():
                return
            self._header_bytes += len(data)
            if self._header_bytes > MAX_HEADER_BYTES:
                stats.slow_closed += 1
                self.transport.write(_TOO_LONG)
                self.transport.close()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            if self._waiting():
                # A drained body: uvicorn's keep-alive timer was cancelled by its bytes, so a
                # fresh deadline stands in for it until the next request begins.
                self._disarm()
                self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._served = True
            if self._waiting() and not self.transport.is_closing():
                self._since = self.loop.time()
                if self.cycle is not None and self.cycle.more_body:
                    self._arm()  # answered early (413): the rest of the body must come in time

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)
            stats.open = len(self.connections)

    return GuardedHttpProtocol


class AcceptErrorLog:
    """An event loop exception handler that rate-limits "accept() out of system resource"."""

    def __init__(self, stats: ConnectionStats, interval: float = ACCEPT_LOG_INTERVAL) -> None:
        self.stats, self.interval = stats, interval
        self._last = float("-inf")
        self._unlogged = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if "accept" not in str(context.get("message", "")):
            loop.default_exception_handler(context)
            return
        self.stats.accept_errors += 1
        self._unlogged += 1
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        exc = context.get("exception")
        log.error(
            "cannot accept connections: %s (%d time%s since the last report); raise the open-file "
            "limit (ulimit -n) or lower max_connections",
            exc if exc is not None else context.get("message"),
            self._unlogged,
            "" if self._unlogged == 1 else "s",
        )
        self._last, self._unlogged = now, 0
