"""The stdio transport's messages: lines framed under a size limit, parsed, and the answers the
transport gives itself (to an oversized, unparsable or malformed message).

Nothing a client sends may end the server: every id read from the wire is checked to be one a
JSON-RPC answer can carry (an integer or a string of valid Unicode) before it is echoed back.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.shared.message import ServerMessageMetadata, SessionMessage

from agent_custody_state.server.rpcid import BAD_ID, bad_request_id, is_request_id

_KEEP = 64 * 1024  # bytes kept from each end of an oversized message, to find its id

_ID = r'(-?\d+|"(?:[^"\\]|\\.)*")'
# The id is found only where it is certainly a top-level member: first (after an optional
# "jsonrpc") or last before the closing brace. Anything else is answered with id null.
_HEAD_ID = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID.encode())
_TAIL_ID = re.compile(rb'"id"\s*:\s*' + _ID.encode() + rb"\s*\}\s*$")


@dataclass
class Oversized:
    """A message dropped for its size: how big it was, and its two ends."""

    size: int
    head: bytes
    tail: bytes

    def request_id(self) -> Any:
        """The request's id when one an answer can carry is found, else None (a number of
        more than 4,300 digits, a bad escape or a lone surrogate read as no id)."""
        match = _HEAD_ID.match(self.head) or _TAIL_ID.search(self.tail)
        if match is None:
            return None
        try:
            found = json.loads(match.group(1))
        except ValueError:
            return None
        return found if answerable_id(found) else None


def answerable_id(value: Any) -> bool:
    """Whether an answer may carry ``value`` as its id: an integer, or a string of valid
    Unicode (a lone surrogate cannot be written as UTF-8, so echoing it would fail)."""
    if not is_request_id(value):
        return False
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


class LineFramer:
    """Split a byte stream into lines, replacing any line over ``limit`` bytes by ``Oversized``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buf = bytearray()
        self._dropping: Oversized | None = None

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        out: list[bytes | Oversized] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if self._dropping is not None:
                self._dropping.size += len(piece)
                self._dropping.tail = (self._dropping.tail + piece)[-_KEEP:]
            else:
                self._buf += piece
                if len(self._buf) > self.limit:
                    data = bytes(self._buf)
                    self._dropping = Oversized(len(data), data[:_KEEP], data[-_KEEP:])
                    self._buf.clear()
            if end < 0:
                return out
            if self._dropping is not None:
                out.append(self._dropping)
                self._dropping = None
            else:
                line = bytes(self._buf).rstrip(b"\r")
                self._buf.clear()
                if line.strip():
                    out.append(line)
            start = end + 1


#: The metadata of the transport's own answers: they settle no request the server was given.
TRANSPORT = ServerMessageMetadata()


def error_reply(request_id: Any, code: int, message: str) -> SessionMessage:
    """An error the transport answers itself (marked ``TRANSPORT``)."""
    return SessionMessage(
        types.JSONRPCError(
            jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
        ),
        metadata=TRANSPORT,
    )


def parse(line: bytes) -> tuple[SessionMessage, bool]:
    """``line`` as a message for the server, or (``True``) as the transport's own answer to it.

    A response or error the client sends is the client's answer to a request of the server's:
    it goes to the server (which drops one it did not ask for), never back to the client.
    """
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception as exc:
        return _refusal(line, exc), True
    if isinstance(message, types.JSONRPCNotification) and bad_request_id(line):
        return error_reply(None, types.INVALID_REQUEST, BAD_ID), True
    return SessionMessage(message), False


#: What the SDK parser's refusal says -> what the caller is told.
_REASONS = (
    ("recursion limit exceeded", "nested too deeply (a memory value may nest 128 levels)"),
    ("number out of range", "a number has more than 4300 digits; send it as a string"),
)


def _lenient_int(digits: str) -> int | None:
    # Python will not read an integer of more than 4,300 digits; the request is refused anyway,
    # so such a number reads as None and the rest of the message (its id) is still found.
    return int(digits) if len(digits.lstrip("-")) <= 4300 else None


def _surrogate_path(data: Any) -> str | None:
    """Where the first string (or key) with a lone surrogate is, as ``params.arguments.s``."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return path or "(message)"
        elif isinstance(item, dict):
            for key, member in reversed(item.items()):
                where = f"{path}.{key}" if path else str(key)
                if _surrogate_path(key) is not None:
                    return where
                stack.append((member, where))
        elif isinstance(item, list):
            stack.extend(reversed([(m, f"{path}[{i}]") for i, m in enumerate(item)]))
    return None


def _refusal(line: bytes, exc: Exception) -> SessionMessage:
    """The answer to a line the SDK's parser refused, with the request's id whenever it can be
    found and the reason when it is one a caller can fix."""
    detail = str(exc)
    try:
        data = json.loads(line, parse_int=_lenient_int)
    except ValueError:
        return error_reply(None, types.PARSE_ERROR, f"parse error: {exc.__class__.__name__}")
    except RecursionError:
        # Valid JSON nested thousands deep: answering it must not end the server (the
        # reader task would die with it), and the caller waits for its id, found the way
        # an oversized message's is.
        request_id = Oversized(len(line), line[:_KEEP], line[-_KEEP:]).request_id()
        return error_reply(
            request_id, types.PARSE_ERROR, "parse error: the message is nested too deeply"
        )
    request_id = data.get("id") if isinstance(data, dict) else None
    if not answerable_id(request_id):
        request_id = None
    reason = next((text for needle, text in _REASONS if needle in detail), None)
    if reason is None and (where := _surrogate_path(data)) is not None:
        reason = f"{where}: lone surrogate, pass valid Unicode"
    message = "invalid JSON-RPC message" + (f": {reason}" if reason else "")
    return error_reply(request_id, types.INVALID_REQUEST, message)
