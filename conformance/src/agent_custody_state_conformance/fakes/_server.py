"""Shared machinery for the loopback vendor fakes.

Each fake is a stdlib ``ThreadingHTTPServer`` bound to ``127.0.0.1`` on a free port and
served from a daemon thread. This module holds everything the four vendors have in common:
routing, request recording, the auth and failure switches, the "still indexed after delete"
lag, and small helpers (JSON replies, multipart parsing, text scoring, filter comparators).
A vendor module only declares its routes and the shape of its error bodies.
"""

from __future__ import annotations

import json
import math
import re
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import Message
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Self
from urllib.parse import parse_qs, parse_qsl, unquote, urlsplit

__all__ = [
    "Abort",
    "FakeVendorServer",
    "FormPart",
    "Handler",
    "Reply",
    "Request",
    "compare",
    "fastapi_validation_error",
    "is_uuid",
    "iso_now",
    "json_reply",
    "similarity",
]

JSON = Any
Handler = Callable[["Request", dict[str, str]], "Reply"]


@dataclass(frozen=True)
class FormPart:
    """One part of a ``multipart/form-data`` body."""

    name: str
    value: bytes
    filename: str | None = None
    content_type: str | None = None

    @property
    def text(self) -> str:
        return self.value.decode("utf-8", errors="replace")


@dataclass
class Request:
    """A request as the fake received it; ``fake.requests`` holds these in arrival order.

    ``headers`` keys are lower-cased so tests can assert without caring about case.
    ``op`` is the fake's name for the operation the route performs (``"add"``, ``"delete"``...),
    or ``None`` when no route matched.
    """

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    op: str | None = None

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> JSON:
        """The body parsed as JSON (``None`` for an empty body); raises ``ValueError``."""
        if not self.body.strip():
            return None
        return json.loads(self.body)

    def arg(self, name: str, default: str | None = None) -> str | None:
        """The first value of a query parameter."""
        values = self.query.get(name)
        return values[0] if values else default

    def form(self) -> list[FormPart]:
        """The body parsed as a form, multipart or urlencoded (empty list for other types)."""
        content_type = self.headers.get("content-type", "")
        if content_type.lower().startswith("application/x-www-form-urlencoded"):
            pairs = parse_qsl(self.text, keep_blank_values=True)
            return [FormPart(name=k, value=v.encode()) for k, v in pairs]
        if not content_type.lower().startswith("multipart/form-data"):
            return []
        # The email parser understands MIME multipart; feed it the header it needs.
        head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
        message = BytesParser(policy=HTTP).parsebytes(head + self.body)
        parts: list[FormPart] = []
        for part in message.iter_parts() if message.is_multipart() else ():
            assert isinstance(part, Message)
            name = part.get_param("name", header="content-disposition")
            if not isinstance(name, str):
                continue
            payload = part.get_payload(decode=True)
            parts.append(
                FormPart(
                    name=name,
                    value=payload if isinstance(payload, bytes) else b"",
                    filename=part.get_filename(),
                    content_type=str(part["content-type"]) if part["content-type"] else None,
                )
            )
        return parts


@dataclass
class Reply:
    """What a route answers. ``body`` is JSON-encoded unless ``raw`` is given."""

    status: int
    body: JSON = None
    raw: bytes | None = None
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        if self.raw is not None:
            return self.raw
        return json.dumps(self.body).encode()


class Abort(Exception):
    """Raised inside a route to answer ``reply`` immediately (validation errors, 404s)."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.status)
        self.reply = reply


def json_reply(status: int, body: JSON, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status=status, body=body, headers=dict(headers or {}))


def fastapi_validation_error(
    status: int, location: list[str], message: str, **extra: JSON
) -> Reply:
    """The ``{"detail": [{type, loc, msg}]}`` body FastAPI servers (Letta, Cognee) use."""
    errors = [{"type": "value_error", "loc": location, "msg": message}]
    return json_reply(status, {"detail": errors, **extra})


def is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def iso_now() -> str:
    """Current UTC time as ISO 8601 with an explicit offset, as the vendors emit it."""
    return datetime.now(UTC).isoformat()


_WORD = re.compile(r"[a-z0-9]+")


def similarity(query: str, text: str) -> float:
    """A deterministic stand-in for semantic relevance, in ``[0, 1]``.

    Identical text scores 1.0; otherwise it is the cosine of the two word sets, so an
    unrelated query scores 0 and vendor thresholds (mem0's default 0.1) bite as they would.
    """
    if query.strip().lower() == text.strip().lower():
        return 1.0
    left, right = set(_WORD.findall(query.lower())), set(_WORD.findall(text.lower()))
    if not left or not right:
        return 0.0
    return round(len(left & right) / math.sqrt(len(left) * len(right)), 6)


def _ordered(actual: Any, expected: Any, test: Callable[[Any, Any], bool]) -> bool:
    try:
        return bool(test(actual, expected))
    except TypeError:
        return False


def compare(op: str, actual: Any, expected: Any) -> bool:
    """Evaluate one filter comparison; ``actual`` is ``None`` when the field is missing.

    Raises ``KeyError`` for an operator it does not know, so a vendor can turn that into its
    own 400.
    """
    match op:
        case "eq":
            return bool(actual == expected)
        case "ne":
            return bool(actual != expected)
        case "in":
            return isinstance(expected, list) and actual in expected
        case "nin":
            return isinstance(expected, list) and actual not in expected
        case "gt":
            return _ordered(actual, expected, lambda a, b: a > b)
        case "gte":
            return _ordered(actual, expected, lambda a, b: a >= b)
        case "lt":
            return _ordered(actual, expected, lambda a, b: a < b)
        case "lte":
            return _ordered(actual, expected, lambda a, b: a <= b)
        case "contains":
            if isinstance(actual, str) and isinstance(expected, str):
                return expected in actual
            return isinstance(actual, list) and expected in actual
        case "icontains":
            return isinstance(actual, str) and str(expected).lower() in actual.lower()
        case "is_null":
            return actual is None
        case "is_not_null":
            return actual is not None
    raise KeyError(op)


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
