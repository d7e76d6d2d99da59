"""``FakeVendorServer``: the base every loopback vendor fake subclasses.

Each fake is a stdlib ``ThreadingHTTPServer`` bound to ``127.0.0.1`` on a free port and served
from a daemon thread. This module holds what every vendor has in common: routing, request
recording, the auth and failure switches, the "still indexed after delete" lag, and the storage
helpers vendor modules build on. A vendor module only declares its routes and the shape of its
error bodies.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Self
from urllib.parse import parse_qs, unquote, urlsplit

from .messages import Abort, Handler, Reply, Request, json_reply

__all__ = ["FakeVendorServer"]


@dataclass(frozen=True)
class _Route:
    method: str
    pattern: re.Pattern[str]
    op: str
    handler: Handler


@dataclass
class _Ghost:
    """A deleted item that search/list still returns for ``remaining`` more calls."""

    record: dict[str, Any]
    remaining: int


def _compile(template: str) -> re.Pattern[str]:
    """Turn ``/v1/memories/{memory_id}/`` into a regex with named groups."""
    regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template))
    return re.compile(f"^{regex}$")


class FakeVendorServer:
    """Base class of every fake: a context manager that serves one vendor's REST API.

    Switches (all may be flipped while the server runs):

    * ``fail``: every route answers the vendor's 500 error shape.
    * ``fail_on``: a set of operation names (``"add"``, ``"delete"``, ``"search"``...) that
      answer 500; other routes keep working.
    * ``fail_next``: the next N routed requests answer 500, then the fake recovers (lets a
      test watch an SDK's retries succeed).
    * ``lag_checks``: after a removal, the item keeps appearing in search/list results for
      the next N search/list calls (a lagging index), while reads by id already 404.
    * ``dedupe``: only meaningful where the vendor deduplicates by content.

    Backdoor views for assertions: ``requests`` (every request, in order), ``items``
    (id -> stored record), ``deleted`` (ids removed, in order).
    """

    #: Name used in thread names and reprs.
    vendor: ClassVar[str] = "vendor"
    #: Path prefix every route lives under (e.g. ``/api/v4`` for Zep).
    prefix: ClassVar[str] = ""
    #: ``Authorization`` scheme carrying ``api_key`` (``"Token"``, ``"Bearer"``...);
    #: ``None`` leaves the check to an ``authorized`` override.
    auth_scheme: ClassVar[str | None] = None
    #: Longest request target (path and query, as sent) the vendor's front accepts; longer
    #: ones answer 414, as a proxy would (nginx's default is 8 KiB). ``None``: no limit.
    max_request_target: ClassVar[int | None] = None

    def __init__(self, *, api_key: str | None = "test-key") -> None:
        self.api_key = api_key
        self.fail = False
        self.fail_on: set[str] = set()
        self.fail_next = 0
        self.lag_checks = 0
        self.dedupe = True
        self.requests: list[Request] = []
        self.items: dict[str, dict[str, Any]] = {}
        self.deleted: list[str] = []
        # One re-entrant lock serialises every route, so handlers can read-modify-write
        # state without thinking about the server's worker threads.
        self.lock = threading.RLock()
        self._ghosts: dict[str, _Ghost] = {}
        self._order: dict[str, int] = {}
        self._counter = 0
        self._routes: list[_Route] = [
            _Route(method, _compile(self.prefix + template), op, handler)
            for method, template, op, handler in self.routes()
        ]
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- what a vendor module provides -------------------------------------------------

    def routes(self) -> Iterable[tuple[str, str, str, Handler]]:
        """``(method, path template, op name, handler)`` for every route of the vendor."""
        raise NotImplementedError

    def error(self, status: int, message: str, code: str | None = None) -> Reply:
        """The vendor's error body for ``status`` (used for 400/401/404/500 alike)."""
        return json_reply(status, {"detail": message})

    def authorized(self, request: Request) -> bool:
        """Whether the request carries the credentials this vendor expects.

        By default: ``Authorization: <auth_scheme> <api_key>``; no ``api_key`` means open.
        """
        if self.api_key is None or self.auth_scheme is None:
            return True
        return request.headers.get("authorization") == f"{self.auth_scheme} {self.api_key}"

    def auth_exempt(self, op: str) -> bool:
        """Routes reachable without credentials (health checks)."""
        return False

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> Self:
        if self._server is not None:
            return self
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(self))
        server.daemon_threads = True
        self._server = server
        # A short poll interval keeps shutdown (and so every test's teardown) quick.
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name=f"fake-{self.vendor}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"fake {self.vendor} is not running; use it as a context manager")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Bare origin, e.g. ``http://127.0.0.1:43121`` (no trailing slash, no prefix)."""
        return f"http://127.0.0.1:{self.port}"

    def __repr__(self) -> str:
        where = self.url if self._server is not None else "stopped"
        return f"<{type(self).__name__} {where} items={len(self.items)}>"

    # -- request log helpers ------------------------------------------------------------

    def requests_for(self, op: str) -> list[Request]:
        """Recorded requests that hit the route named ``op``."""
        return [r for r in self.requests if r.op == op]

    # -- storage helpers for vendor modules ----------------------------------------------

    def _store(self, item_id: str, record: dict[str, Any]) -> None:
        if item_id not in self._order:
            self._counter += 1
            self._order[item_id] = self._counter
        self.items[item_id] = record
        # Re-adding an id (dedupe) ends any lingering ghost of it.
        self._ghosts.pop(item_id, None)

    def _remove(self, item_id: str) -> dict[str, Any] | None:
        """Delete an item; with ``lag_checks`` it lingers in search/list for a while."""
        record = self.items.pop(item_id, None)
        if record is not None:
            self.deleted.append(item_id)
            if self.lag_checks > 0:
                self._ghosts[item_id] = _Ghost(record, self.lag_checks)
        return record

    def _indexed(self) -> list[dict[str, Any]]:
        """Records a search/list call sees: live items plus lagging ghosts, oldest first.

        Call it exactly once per search/list request: each call uses up one lag check.
        """
        rows = [(self._order[i], r) for i, r in self.items.items()]
        rows += [(self._order.get(i, 0), g.record) for i, g in self._ghosts.items()]
        for item_id in list(self._ghosts):
            ghost = self._ghosts[item_id]
            ghost.remaining -= 1
            if ghost.remaining <= 0:
                del self._ghosts[item_id]
        return [record for _, record in sorted(rows, key=lambda pair: pair[0])]

    @staticmethod
    def _new_uuid() -> str:
        return str(uuid.uuid4())

    def _body(self, request: Request) -> dict[str, Any]:
        """The JSON object body, or the vendor's 400 when it is not one."""
        try:
            body = request.json()
        except ValueError:
            raise Abort(self.error(400, "request body is not valid JSON")) from None
        if body is None:
            return {}
        if not isinstance(body, dict):
            raise Abort(self.error(400, "request body must be a JSON object"))
        return body

    # -- dispatch -----------------------------------------------------------------------

    def _dispatch(self, request: Request) -> Reply:
        path_matched = False
        for route in self._routes:
            match = route.pattern.match(request.path)
            if match is None:
                continue
            path_matched = True
            if route.method != request.method:
                continue
            request.op = route.op
            params = {k: unquote(v) for k, v in match.groupdict().items()}
            return self._run(route, request, params)
        if path_matched:
            return self.error(405, "Method Not Allowed")
        return self.error(404, "Not Found")

    def _run(self, route: _Route, request: Request, params: dict[str, str]) -> Reply:
        with self.lock:
            if not self.auth_exempt(route.op) and not self.authorized(request):
                return self.error(401, "Unauthorized")
            if self.fail or route.op in self.fail_on or self.fail_next > 0:
                self.fail_next = max(0, self.fail_next - 1)
                return self.error(500, "Internal Server Error")
            try:
                return route.handler(request, params)
            except Abort as abort:
                return abort.reply


def _handler_class(fake: FakeVendorServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        # HTTP/1.1 keeps httpx's pooled connections alive between calls.
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes; without TCP_NODELAY, Nagle plus the
        # client's delayed ACK add ~40 ms to every keep-alive request.
        disable_nagle_algorithm = True
        server_version = f"fake-{fake.vendor}"

        def log_message(self, format: str, *args: Any) -> None:
            return  # keep test output quiet

        def _read_body(self) -> bytes:
            if "chunked" in self.headers.get("transfer-encoding", "").lower():
                chunks: list[bytes] = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            length = int(self.headers.get("content-length") or 0)
            return self.rfile.read(length) if length else b""

        def _serve(self) -> None:
            limit = fake.max_request_target
            if limit is not None and len(self.path) > limit:
                self._read_body()
                self._send(Reply(414, raw=b"414 Request-URI Too Large", content_type="text/plain"))
                return
            split = urlsplit(self.path)
            request = Request(
                method=self.command,
                path=split.path,
                query=parse_qs(split.query, keep_blank_values=True),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=self._read_body(),
            )
            with fake.lock:
                fake.requests.append(request)
            try:
                reply = fake._dispatch(request)
            except Exception as exc:  # a bug in a fake must still answer, not hang the SDK
                reply = fake.error(500, f"fake {fake.vendor} crashed: {exc!r}")
            self._send(reply)

        def _send(self, reply: Reply) -> None:
            payload = reply.encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    return _Handler
