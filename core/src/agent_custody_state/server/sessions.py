"""One token cannot fill the session table (issue 11 item 4).

The SDK's session manager keeps one global table (10,000 sessions by default) and answers
``503 Too many open sessions`` once it is full, for 30 minutes of idle timeout: one token could
fill it in seconds and lock the gateway out. ``SessionLimiter`` sits between the guard and the
SDK and keeps a book per token (the guard binds each request to its token's user object):

- each token holds at most ``per_token`` sessions; opening one more ends that token's oldest
  session first (through the SDK's own ``DELETE``, so the SDK forgets it the normal way);
- requests opening a session count against the token while they are in flight, so a burst of
  concurrent opens cannot overshoot; past the cap with nothing to evict, the open is refused;
- the SDK's global table is sized ``per_token`` times the number of tokens (plus the anonymous
  caller), so with every token held to its share the table can never be full: a direct token
  cannot take the room a gateway token needs.

A session the SDK ended on its own (idle timeout, client ``DELETE``) leaves the book when a
request for it is answered 404 or 200 to ``DELETE``, or when its turn for eviction comes, or when
the books are swept (``alive``: whether the SDK still has a session; each time the number of
books has doubled). A book holding no session leaves at once: OAuth principals are not known in
advance, and one that comes once must not stay in memory for the server's life. A book holds
its owner (the user object), so the owner's ``id`` is never reused while the book exists.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

DEFAULT_SESSIONS_PER_TOKEN = 64
DEFAULT_SESSION_IDLE_TIMEOUT = 300.0
_FIRST_SWEEP = 64  # books held before the first sweep of sessions the SDK has ended
_SESSION_HEADER = b"mcp-session-id"


@dataclass
class _Book:
    """One token's sessions, oldest first, and its opening requests in flight."""

    owner: Any = None
    open: OrderedDict[str, None] = field(default_factory=OrderedDict)
    opening: int = 0

    @property
    def empty(self) -> bool:
        return not self.open and not self.opening


def _session_id(headers: Any) -> str | None:
    for key, value in headers:
        if key.lower() == _SESSION_HEADER:
            return str(value.decode("latin-1"))
    return None


class SessionLimiter:
    """ASGI middleware holding each token to ``per_token`` MCP sessions (see the module)."""

    def __init__(
        self, app: ASGIApp, per_token: int, alive: Callable[[str], bool] | None = None
    ) -> None:
        if per_token < 1:
            raise ValueError("sessions_per_token must be at least 1")
        self.app = app
        self.per_token = per_token
        self.evicted = 0
        self.refused = 0
        # Keyed by the identity of the user object the guard made for each token (one per
        # static token, one per OAuth principal while it has a book), so no token value is
        # ever held here.
        self._books: dict[int, _Book] = {}
        self._alive = alive
        self._sweep_at = _FIRST_SWEEP

    def held(self, owner: Any) -> int:
        """Sessions the book holds for ``owner`` (the user object a token maps to)."""
        book = self._books.get(id(owner))
        return len(book.open) if book is not None else 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        owner = scope.get("user")
        book = self._books.get(id(owner))
        if book is None:
            if len(self._books) >= self._sweep_at:
                self._sweep()
            book = self._books[id(owner)] = _Book(owner)
        try:
            await self._serve(book, scope, receive, send)
        finally:
            if book.empty and self._books.get(id(owner)) is book:
                del self._books[id(owner)]

    def _sweep(self) -> None:
        """Drop the sessions the SDK has ended, and the books left holding none."""
        for key, book in list(self._books.items()):
            if self._alive is not None:
                for session in [s for s in book.open if not self._alive(s)]:
                    del book.open[session]
            if book.empty:
                del self._books[key]
        self._sweep_at = max(_FIRST_SWEEP, 2 * len(self._books))

    async def _serve(self, book: _Book, scope: Scope, receive: Receive, send: Send) -> None:
        session = _session_id(scope["headers"])
        if session is not None:
            status, _ = await self._forward(scope, receive, send)
            if status == 404 or (
                status is not None and status < 300 and scope["method"] == "DELETE"
            ):
                book.open.pop(session, None)
            return
        while len(book.open) + book.opening >= self.per_token:
            if not book.open:
                self.refused += 1
                await _refuse(send, self.per_token)
                return
            oldest, _ = book.open.popitem(last=False)
            self.evicted += 1
            await self._end_session(scope, oldest)
        book.opening += 1
        try:
            status, opened = await self._forward(scope, receive, send)
        finally:
            book.opening -= 1
        if opened is not None and status is not None and status < 400:
            book.open[opened] = None

    async def _forward(
        self, scope: Scope, receive: Receive, send: Send
    ) -> tuple[int | None, str | None]:
        """Run the app; return the response status and the session id it announced."""
        seen: dict[str, Any] = {}

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
                seen["session"] = _session_id(message.get("headers", ()))
            await send(message)

        await self.app(scope, receive, watch)
        return seen.get("status"), seen.get("session")

    async def _end_session(self, scope: Scope, session: str) -> None:
        """End ``session`` through the SDK's own ``DELETE``, as its owner (same user)."""
        request = {
            **scope,
            "method": "DELETE",
            "query_string": b"",
            "headers": [(_SESSION_HEADER, session.encode("latin-1"))],
        }
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return {"type": "http.disconnect"}

        async def discard(message: Message) -> None:
            return None

        await self.app(request, receive, discard)


async def _refuse(send: Send, per_token: int) -> None:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32000,
                "message": f"too many sessions opening at once for this token (at most "
                f"{per_token}, sessions_per_token); retry shortly",
            },
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", b"1"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
