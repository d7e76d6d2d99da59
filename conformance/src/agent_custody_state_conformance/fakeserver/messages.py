"""The HTTP messages of a fake vendor server: the request as received, the reply a route gives.

A route handler receives a :class:`Request` (method, path, query, lower-cased headers, body, and
the operation name of the route it matched) and answers a :class:`Reply`; raising :class:`Abort`
answers a reply at once from anywhere inside a route (validation errors, 404s). ``json_reply``
and ``fastapi_validation_error`` build the common reply shapes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import parse_qsl

__all__ = [
    "JSON",
    "Abort",
    "FormPart",
    "Handler",
    "Reply",
    "Request",
    "fastapi_validation_error",
    "json_reply",
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
