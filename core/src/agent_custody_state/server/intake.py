"""Taking in one POST to ``/mcp``: a place among the calls in flight, then the body, its shape.

The order bounds what a flood of requests can hold (docs/security.md):

1. A ``Content-Length`` over ``max_request_bytes`` → 413 at once, the body unread.
2. A place among the ``max_concurrency`` requests in flight is taken *before* a byte of the body
   is read; without one → 503 with ``Retry-After`` and a JSON-RPC error, the body unread. A
   request still receiving its body holds its place, so at most ``max_concurrency`` bodies are
   being buffered at once, however many clients dribble theirs in (before this, bodies were read
   first and counted after: a thousand slow 4 MiB bodies all sat in memory, each past the limit).
3. The body is read chunk by chunk and refused (413) as soon as it passes the limit, without
   reading the rest (chunked bodies declare no length); one not received within
   ``body_timeout`` seconds → 408, the connection closed.
4. A JSON array (a JSON-RPC batch) → 400 with a JSON-RPC ``Invalid Request`` error: MCP
   2025-06-18 removed batching and Streamable HTTP takes one message per POST. The SDK would
   answer 400 too, but with an "invalid params" code, a validation dump echoing the body, and
   a fresh session opened for nothing.
5. A request whose ``id`` is null, a fraction, a boolean or an array → 400 with a JSON-RPC
   ``Invalid Request`` error (``rpcid.py``); the SDK took it for a notification (202, no answer).
6. An ``initialize`` carrying an ``Mcp-Session-Id`` → 400 ``Invalid Request``, as the TypeScript
   SDK answers it: the SDK renegotiated the live session's version and capabilities.
7. JSON that is no JSON-RPC message (no ``"jsonrpc": "2.0"``, ``params`` not an object, a bare
   string) is refused by the SDK with ``-32602`` and a pydantic dump as the message: model
   names, the library's documentation URLs, the body quoted back. ``plain_errors`` (around the
   ``send`` of an admitted request) answers it ``-32600 Invalid Request`` with a fixed message,
   as JSON-RPC 2.0 names that case; the status (400) and the other headers stay the SDK's.

A place is shared fairly between tokens: when none is free, a request still *receiving* its
body gives its place up (503, the body unread) to a newcomer whose token holds at least two
places fewer than the request's token (``Intake._make_room``; the token holding most gives
first). Before, one token dribbling ``max_concurrency`` bodies (each within ``body_timeout``,
30 s, then again) got every other token, the gateway included, a 503. A call being served is
never cut; one token's own requests never take each other's places.

Only then is the request handed on, still holding its place until it is answered; except a
``subscriptions/listen`` request (2026-07-28), a stream that stays open for as long as its client
likes: it gives its place back once its body is in (``is_listen``). Holding it, eight listeners
(``max_concurrency``) got every other caller, the gateway's tool calls included, a 503 for as
long as they listened. The streams are bounded by the connection limit and the listen handler's.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.types import Message, Receive, Scope, Send

from agent_custody_state.server.rpcid import (
    ALREADY_INITIALIZED,
    BAD_ID,
    bad_request_id,
    initialize_request,
    method_message,
)

OVERLOADED = -32000  # JSON-RPC "server error" range: the call was not attempted
INVALID_REQUEST = -32600  # JSON-RPC 2.0: "the JSON sent is not a valid Request object"
DEFAULT_BODY_TIMEOUT = 30.0
_JSON_SPACE = b" \t\r\n"
_UTF8_BOM = b"\xef\xbb\xbf"

#: What runs once a request is admitted: its whole body, and a ``receive`` that replays it.
Admitted = Callable[[bytes, Receive], Awaitable[None]]


def rpc_error(code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}


async def respond(
    send: Send,
    status: int,
    body: Any,
    headers: Sequence[tuple[bytes, bytes]] = (),
    *,
    head: bool = False,
) -> None:
    """Answer ``body`` as compact JSON with its length; ``head``: its headers only (a HEAD
    request: the length is still the body's)."""
    data = json.dumps(body, separators=(",", ":")).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": b"" if head else data})


#: How the SDK's refusal of a body that is no JSON-RPC message begins (a pydantic dump follows).
_SDK_DUMP = b'"message":"Validation error: '
NOT_A_MESSAGE = (
    'invalid request: not a JSON-RPC 2.0 message (an object with "jsonrpc": "2.0" and a '
    "method, or a result or an error; params, when given, an object)"
)


def plain_errors(send: Send) -> Send:
    """``send``, with the SDK's pydantic dump for a body that is no JSON-RPC message (a 400
    whose body is one message) replaced by ``NOT_A_MESSAGE`` (``-32600``, id null)."""
    held: list[Message] = []

    async def sending(message: Message) -> None:
        if held:
            start = held.pop()
            whole = message["type"] == "http.response.body" and not message.get("more_body")
            if whole and _SDK_DUMP in message.get("body", b""):
                kept = [
                    (k, v)
                    for k, v in start.get("headers", ())
                    if k.lower() not in (b"content-type", b"content-length")
                ]
                await respond(send, 400, rpc_error(INVALID_REQUEST, NOT_A_MESSAGE), kept)
                return
            await send(start)
        elif message["type"] == "http.response.start" and message["status"] == 400:
            held.append(message)  # judged by its body
            return
        await send(message)

    return sending


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of the request header ``name`` (lower case), or None."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def is_batch(body: bytes) -> bool:
    """Whether ``body`` is a JSON array: its first character past whitespace (and a UTF-8 byte
    order mark, which the SDK's parser skips too) is ``[``."""
    start = body.lstrip(_JSON_SPACE)
    if start.startswith(_UTF8_BOM):
        start = start[len(_UTF8_BOM) :].lstrip(_JSON_SPACE)
    return start[:1] == b"["


def is_listen(body: bytes) -> bool:
    """Whether ``body`` is a ``subscriptions/listen`` request (``rpcid.method_message``)."""
    return method_message(body, "subscriptions/listen") is not None


def _has_session(scope: Scope) -> bool:
    return any(key == b"mcp-session-id" for key, _ in scope["headers"])


def _declared_length(scope: Scope) -> int | None:
    for key, value in scope["headers"]:
        if key == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isascii() and text.isdigit() else None
    return None


@dataclass(eq=False)
class _Place:
    """One request's place among those in flight: whose it is, and its body's reading."""

    owner: object
    held: bool = True
    reading: anyio.CancelScope | None = None  # while its body is arriving
    given_up: bool = False  # to a newcomer of a token holding fewer places


class Intake:
    """The in-flight count and the body rules; ``admit`` takes in one POST."""

    def __init__(
        self,
        *,
        max_request_bytes: int,
        max_concurrency: int,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
    ) -> None:
        self.max_request_bytes = max_request_bytes
        self.max_concurrency = max_concurrency
        self.body_timeout = body_timeout
        self.in_flight = 0  # requests holding a place: receiving their body, or being served
        self.refused_overload = 0
        self._places: set[_Place] = set()

    def _release(self, place: _Place) -> None:
        if place.held:
            place.held = False
            self.in_flight -= 1
            self._places.discard(place)

    def _make_room(self, owner: object) -> bool:
        """Free the place of a request still receiving its body whose token holds at least two
        places more than ``owner`` (the token holding most first); whether one was freed."""
        counts = Counter(p.owner for p in self._places)
        mine = counts[owner]
        receiving = [p for p in self._places if p.reading is not None and p.owner != owner]
        fat = [p for p in receiving if counts[p.owner] >= mine + 2]
        if not fat:
            return False
        victim = max(fat, key=lambda p: counts[p.owner])
        victim.given_up = True
        self._release(victim)
        assert victim.reading is not None
        victim.reading.cancel()
        return True

    async def admit(
        self, scope: Scope, receive: Receive, send: Send, then: Admitted, owner: object = None
    ) -> None:
        """Answer the refusals above, or call ``then(body, replay)`` holding a place;
        ``owner``: the caller's token (places are shared fairly between tokens)."""
        declared = _declared_length(scope)
        if declared is not None and declared > self.max_request_bytes:
            await self._too_large(send)
            return
        if self.in_flight >= self.max_concurrency and not self._make_room(owner):
            await self._overloaded(send)
            return
        self.in_flight += 1  # no await since the check: no other request can slip in between
        place = _Place(owner)
        self._places.add(place)
        try:
            body = await self._read(receive, send, place)
            if body is None:
                return
            if is_listen(body):  # a stream, open as long as its client likes: no place kept
                self._release(place)
            if is_batch(body):
                await respond(
                    send,
                    400,
                    rpc_error(
                        INVALID_REQUEST,
                        "invalid request: JSON-RPC batches are not supported (MCP 2025-06-18 "
                        "removed them); send each message in its own POST",
                    ),
                )
                return
            if bad_request_id(body):
                await respond(send, 400, rpc_error(INVALID_REQUEST, BAD_ID))
                return
            if _has_session(scope) and (init := initialize_request(body)) is not None:
                refusal = {**rpc_error(INVALID_REQUEST, ALREADY_INITIALIZED), "id": init["id"]}
                await respond(send, 400, refusal)
                return
            sent = False

            async def replay() -> Message:
                nonlocal sent
                if not sent:
                    sent = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await then(body, replay)
        finally:
            self._release(place)

    async def _read(self, receive: Receive, send: Send, place: _Place) -> bytes | None:
        """The whole body, or None once a refusal is sent (or the client has gone)."""
        body = bytearray()
        with anyio.move_on_after(self.body_timeout) as reading:
            place.reading = reading
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return None  # the client went away
                body += message.get("body", b"")
                if len(body) > self.max_request_bytes:
                    await self._too_large(send)
                    return None
                if not message.get("more_body", False):
                    place.reading = None
                    return bytes(body)
        place.reading = None
        if place.given_up:
            await self._overloaded(send, [(b"connection", b"close")])  # the body is unread
        elif reading.cancelled_caught:
            await respond(
                send,
                408,
                rpc_error(
                    INVALID_REQUEST,
                    f"request body not received within {self.body_timeout:g} s (body_timeout)",
                ),
                [(b"connection", b"close")],
            )
        return None

    async def _overloaded(self, send: Send, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
        self.refused_overload += 1
        await respond(
            send,
            503,
            rpc_error(
                OVERLOADED,
                f"memory server overloaded: {self.in_flight} calls in flight "
                f"(max_concurrency {self.max_concurrency}); retry shortly",
            ),
            [(b"retry-after", b"1"), *headers],
        )

    async def _too_large(self, send: Send) -> None:
        await respond(
            send,
            413,
            rpc_error(
                INVALID_REQUEST,
                f"request body too large: the limit is {self.max_request_bytes} bytes "
                "(max_request_bytes)",
            ),
        )
