"""Request ids: one that is not a string or an integer is answered, not taken as a
notification; the stdio transport counts the requests owed an answer (``Outstanding``).

MCP: a request's id MUST be a string or an integer, never null. The SDK's parser reads a message
with a ``method`` and any other ``id`` (null, a fraction, a boolean, an array) as a notification,
so the caller, who sent a request, waited for an answer that never came (over HTTP it got
``202 Accepted``). JSON-RPC 2.0 answers such a message ``Invalid Request`` with id null: the
stdio transport and the HTTP intake do so (``bad_request_id``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import anyio
from mcp.shared.message import ServerMessageMetadata

#: What the refusal says.
BAD_ID = "invalid JSON-RPC message: a request's id must be a string or an integer (MCP: never null)"

# An ``"id"`` member whose value is not a string or an integer; only such bodies are parsed again.
_SUSPECT = re.compile(rb'"id"\s*:\s*(?:null|true|false|\[|\{|-?\d+[.eE])')


def is_request_id(value: Any) -> bool:
    """Whether ``value`` may be a request's id: a string or an integer (not a boolean)."""
    return isinstance(value, str | int) and not isinstance(value, bool)


def bad_request_id(raw: bytes) -> bool:
    """Whether ``raw`` is one JSON object with a request's ``method`` (not ``notifications/...``)
    and an ``id`` that is neither a string nor an integer. Cheap for every other body: one scan
    for a suspect ``"id"`` member first."""
    if _SUSPECT.search(raw) is None:
        return False
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return False  # the parser's own refusal answers it
    if not isinstance(data, dict) or "id" not in data or is_request_id(data["id"]):
        return False
    # A notification a sloppy client sent with ``"id": null`` is still served as one.
    method = data.get("method")
    return isinstance(method, str) and not method.startswith("notifications/")


class Outstanding:
    """Ids of requests read but not yet settled: answered, or cancelled by the client (which
    gets no answer: the SDK tells the transport through ``on_request_unanswered``). An id a
    client reuses while the first is in flight is counted twice."""

    def __init__(self) -> None:
        self.ids: Counter[Any] = Counter()
        self.total = 0  # requests owed, an id reused in flight counted each time
        self._changed = anyio.Event()

    def read(self, request_id: Any) -> ServerMessageMetadata:
        """Count a request read; the metadata that settles it when it goes unanswered."""
        self.ids[request_id] += 1
        self.total += 1

        async def unanswered() -> None:
            self.answered(request_id)

        return ServerMessageMetadata(on_request_unanswered=unanswered)

    def answered(self, request_id: Any) -> None:
        if request_id not in self.ids:
            return  # settled already, or never handed to the server
        self.total -= 1
        if self.ids[request_id] > 1:
            self.ids[request_id] -= 1
        else:
            del self.ids[request_id]
        self._changed.set()
        self._changed = anyio.Event()

    async def room(self, most: int) -> None:
        """Wait until fewer than ``most`` requests are owed."""
        while self.total >= most:
            await self._changed.wait()

    async def drained(self, timeout: float) -> None:
        with anyio.move_on_after(timeout):
            while self.ids:
                await self._changed.wait()


#: What a second ``initialize`` on a live session or connection is told.
ALREADY_INITIALIZED = (
    "invalid request: this session is already initialized; a second initialize is refused "
    "(open a new session or connection to negotiate again)"
)
_METHODS: dict[str, re.Pattern[bytes]] = {}


def method_message(raw: bytes, method: str) -> dict[str, Any] | None:
    """``raw`` read as a JSON object when its ``method`` is ``method``, else None (cheap for
    every other body: a scan first, the parse only when the method's name is there)."""
    pattern = _METHODS.get(method)
    if pattern is None:
        pattern = _METHODS[method] = re.compile(
            rb'"method"\s*:\s*"' + re.escape(method.encode()) + rb'"'
        )
    if pattern.search(raw) is None:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and data.get("method") == method else None


def initialize_request(raw: bytes) -> dict[str, Any] | None:
    """``raw`` read as JSON when it is an ``initialize`` request, else None."""
    data = method_message(raw, "initialize")
    return data if data is not None and "id" in data else None


class Handshake:
    """One ``initialize`` per connection, as the TypeScript SDK holds it: a second one (which
    the SDK answered, renegotiating the version and replacing the client's capabilities amid
    the session) is refused. An initialize that failed may be sent again."""

    def __init__(self) -> None:
        self.taken = False
        self._request_id: Any = None
        self._done = False

    def refuses(self, method: str, request_id: Any) -> bool:
        """Whether the request read is an initialize this connection must refuse."""
        if method != "initialize":
            return False
        if self.taken:
            return True
        self.taken, self._request_id = True, request_id
        return False

    def answered(self, request_id: Any, ok: bool) -> None:
        """An answer went out for ``request_id``: the initialize's, a result, settles the
        handshake; an error lets it be sent again (a refusal of a second one with the same id
        changes nothing)."""
        if self.taken and not self._done and request_id == self._request_id:
            self._done, self.taken = ok, ok
