"""The HTTP front door of ``/mcp``: Host, Origin, bearer tokens, body size, concurrency.

An ASGI wrapper around the SDK's Streamable HTTP app; every check answers before the MCP layer
sees the request:

- ``Host`` not naming this server → 421 and a foreign ``Origin`` → 403 (DNS rebinding: a web page
  must not reach a loopback server through a name it controls); two ``Host`` headers → 400 (RFC
  9112), and every ``Origin`` given must name this server, not only the first.
- Missing or wrong bearer token → 401 ``{"error":"unauthorized"}``; with OAuth configured
  (``oauth.py``) a token that is no static one is checked as a JWT access token, and the
  ``WWW-Authenticate`` challenge names the resource metadata and the scopes (a valid token
  granting no role here → 403 ``insufficient_scope``; so is a tool call the OAuth token lacks a
  scope for, naming the scopes it needs: ``stepup.py``). Tokens are compared with
  ``hmac.compare_digest`` against every configured token, so timing reveals neither a token nor
  which one matched. The matched token's role (``gateway`` or ``direct``) goes into the request
  scope for the tool handler, and an ``AuthenticatedUser`` binds each MCP session to the token
  that opened it (another token cannot drive that session).
- A method ``/mcp`` does not serve (``PUT``, ``OPTIONS``, ...) → 405, after the checks above, so
  a foreign ``Host``, a foreign ``Origin`` or a missing token is refused the same whatever the
  method (SPEC 4.5; the route passes every method here for that reason).
- More than ``max_concurrency`` requests in flight → 503 with ``Retry-After`` and a JSON-RPC error
  body, checked before the body is read, so an overloaded server sheds load with a clear answer
  instead of queueing (or buffering) until every caller times out (the places are shared fairly
  between tokens, and a ``subscriptions/listen`` stream keeps none: ``intake.py``); a body over
  ``max_request_bytes`` → 413, read incrementally, never buffered past the limit; one not
  received within ``body_timeout`` seconds → 408; a JSON-RPC batch → 400 (``intake.py``).
"""

from __future__ import annotations

import hmac
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_custody_state.server.intake import (
    DEFAULT_BODY_TIMEOUT,
    Intake,
    plain_errors,
    respond,
    rpc_error,
)
from agent_custody_state.server.intake import header as _header
from agent_custody_state.server.oauth import InsufficientScope, InvalidToken, JwtVerifier
from agent_custody_state.server.scopes import SpaceScope, scope_arg
from agent_custody_state.server.stepup import missing_scopes, tool_call
from agent_custody_state.server.tokenrules import MIN_TOKEN_LENGTH, check_tokens
from agent_custody_state.server.trust import ROLES, SCOPE_ROLE_KEY, SCOPE_SPACES_KEY, Role

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
#: The methods ``/mcp`` serves (HEAD as Starlette serves it beside GET); any other → 405.
MCP_METHODS = frozenset({"GET", "HEAD", "POST", "DELETE"})
INSUFFICIENT_SCOPE = -32003  # JSON-RPC "server error" range: MCP names no code for a scope refusal


@dataclass(frozen=True)
class BearerToken:
    """One accepted token, the role its holder gets and the spaces it may use (None: all);
    ``label`` names it in logs, never the value (nor does its ``repr``)."""

    value: str = field(repr=False)
    role: Role = "gateway"
    label: str = ""
    spaces: SpaceScope | None = None
    oauth: bool = False  # an OAuth principal's grant (a step-up may widen it)


_ANONYMOUS = BearerToken("-", "direct", "anonymous")


def _user(token: BearerToken) -> AuthenticatedUser:
    return AuthenticatedUser(AccessToken(token="", client_id=token.label, scopes=[token.role]))


def normalize_tokens(tokens: Any) -> list[BearerToken]:
    """Accept ``None``, ``{token: role}``, or an iterable of strings (gateway role),
    ``(token, role)`` pairs and ``BearerToken`` objects; each token at least
    ``MIN_TOKEN_LENGTH`` (16) characters long (``tokenrules.py``)."""
    if tokens is None:
        return []
    items: Iterable[Any] = tokens.items() if isinstance(tokens, Mapping) else tokens
    out: list[BearerToken] = []
    for index, item in enumerate(items, 1):
        if isinstance(item, BearerToken):
            token = item
        elif isinstance(item, str):
            token = BearerToken(item)
        else:
            value, role = item
            token = BearerToken(value, role)
        if not isinstance(token.value, str) or not token.value:
            raise ValueError(f"bearer token {index} is empty")
        if token.role not in ROLES:
            raise ValueError(
                f'bearer token {index}: role must be "gateway", "direct" or "reader", got '
                f"{_shown_role(token.role)}"
            )
        label = token.label or f"{token.role}-{index}"
        spaces = scope_arg(token.spaces, f"bearer token {index} spaces")
        out.append(BearerToken(token.value, token.role, label, spaces))
    check_tokens(out)
    return out


def _shown_role(role: object) -> str:
    """A role that is none of the roles, as an error shows it: a text as long as a token is not
    quoted (``{role: token}`` given for ``{token: role}`` puts the token there)."""
    if isinstance(role, str) and len(role) >= MIN_TOKEN_LENGTH:
        return (
            f"a text of {len(role)} characters, not shown (it may be a token: a mapping is "
            "{token: role})"
        )
    return f"{role!r:.40}"


def _split_host(value: str) -> tuple[str, str | None]:
    """``name[:port]`` → (lowercase name without brackets, port or None).

    Anything else (``[::1].evil.example``, ``localhost:abc``) comes back whole, so it matches
    no allowed name: a lenient split would read those as ``::1`` and ``localhost``.
    """
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        if not rest:
            return name, None
        if rest.startswith(":") and rest[1:].isascii() and rest[1:].isdigit():
            return name, rest[1:]
        return value, None
    if value.count(":") == 1:
        name, port = value.split(":")
        return (name, port) if port.isascii() and port.isdigit() else (value, None)
    return value, None


class HostPolicy:
    """Which ``Host`` and ``Origin`` values name this server. An ``Origin`` does when listed in
    ``allowed_origins``, or as ``http://`` with an allowed host and its port, else the bound
    ``port`` (loopback names are aliases on it; ``https://`` only through the list)."""

    def __init__(self, hosts: Sequence[str] | None, origins: Sequence[str] = (), port: int = 0):
        self.any_host = hosts is not None and "*" in hosts
        self.hosts = [_split_host(h) for h in (hosts or ()) if h != "*"]
        self.origins = {o.rstrip("/").lower() for o in origins}
        self.port = port  # 0 until bound (an app served in process): any port

    def host_ok(self, host: str | None) -> bool:
        if self.any_host:
            return True
        if not host:
            return False
        name, port = _split_host(host)
        return any(name == n and (p is None or p == port) for n, p in self.hosts)

    def origin_ok(self, origin: str | None) -> bool:
        if origin is None:
            return True  # not a browser: gateways and SDK clients send no Origin
        if origin.rstrip("/").lower() in self.origins:
            return True
        parts = urlsplit(origin)
        if parts.scheme.lower() != "http" or not parts.netloc or "@" in parts.netloc:
            return False
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            return False  # an origin is scheme://host[:port], nothing more
        # The host part goes through the same strict split as Host (urlsplit alone reads
        # "http://[::1].evil.example" as host ::1).
        name, port = _split_host(parts.netloc)
        port = port or "80"
        own = str(self.port) if self.port else port
        return any(name == n and port == (p or own) for n, p in self.hosts)


def _headers(scope: Scope, name: bytes) -> list[str]:
    """Every value of the request header ``name`` (lower case), in order."""
    return [value.decode("latin-1") for key, value in scope["headers"] if key == name]


def _quotable(text: object) -> str:
    """A message fit for a quoted header parameter (RFC 6750 allows no quotes or backslashes)."""
    return "".join(c for c in str(text) if c not in '"\\' and 32 <= ord(c) < 127)


class HttpGuard:
    """ASGI middleware applying the checks above, then calling ``app``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: Sequence[BearerToken],
        hosts: HostPolicy,
        max_request_bytes: int,
        max_concurrency: int,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        oauth: JwtVerifier | None = None,
    ) -> None:
        self.app = app
        self.oauth = oauth
        self.tokens = list(tokens)
        self.hosts = hosts
        self.intake = Intake(
            max_request_bytes=max_request_bytes,
            max_concurrency=max_concurrency,
            body_timeout=body_timeout,
        )
        # One user object per token, made once: the SDK binds each session to it.
        self._users = {t: _user(t) for t in [*self.tokens, _ANONYMOUS]}
        # An OAuth principal's lives while a request or a session of it does (the session
        # limiter's book holds it), not for the server's life: principals come and go.
        self._principals: weakref.WeakValueDictionary[BearerToken, AuthenticatedUser] = (
            weakref.WeakValueDictionary()
        )

    async def _authenticate(self, scope: Scope, send: Send) -> BearerToken | None:
        """The caller's token (a static one, or what a valid OAuth access token grants), or
        None once the refusal is sent."""
        header = _header(scope, b"authorization")
        presented = b""
        if header and header[:7].lower() == "bearer ":
            presented = header[7:].strip().encode()
        match: BearerToken | None = None
        for token in self.tokens:  # no early exit: every comparison runs
            if hmac.compare_digest(presented, token.value.encode()) and presented:
                match = token
        if match is not None:
            return match
        if self.oauth is None or not presented:
            await self._challenge(send, None)
            return None
        try:
            principal = await self.oauth.verify(presented.decode("latin-1"))
        except InvalidToken as exc:
            await self._challenge(
                send, f'error="invalid_token", error_description="{_quotable(exc)}"'
            )
            return None
        except InsufficientScope as exc:
            await self._challenge(
                send, f'error="insufficient_scope", error_description="{_quotable(exc)}"'
            )
            return None
        return BearerToken("", principal.role, principal.label, principal.spaces, oauth=True)

    def _user_of(self, token: BearerToken) -> AuthenticatedUser:
        """The user object of ``token``: one per static token, one per live OAuth principal."""
        user = self._users.get(token) or self._principals.get(token)
        if user is None:
            user = self._principals[token] = _user(token)
        return user

    async def _challenge(
        self, send: Send, error: str | None, scopes: Sequence[str] = (), body: Any = None
    ) -> None:
        """401 (403 for insufficient_scope) with the ``WWW-Authenticate`` challenge: bare
        ``Bearer`` for static tokens only, else the MCP authorization spec's parameters;
        ``scopes``: the ones this operation needs (default: every scope this server knows)."""
        parts = [error] if error else []
        if self.oauth is not None:
            settings = self.oauth.settings
            parts.append(f'resource_metadata="{settings.metadata_url}"')
            parts.append(f'scope="{" ".join(scopes or settings.scopes_supported())}"')
        challenge = "Bearer" + (" " + ", ".join(parts) if parts else "")
        insufficient = error is not None and "insufficient_scope" in error
        await respond(
            send,
            403 if insufficient else 401,
            body or {"error": "insufficient_scope" if insufficient else "unauthorized"},
            [(b"www-authenticate", challenge.encode())],
        )

    async def _step_up(self, send: Send, token: BearerToken, body: bytes) -> bool:
        """Answer 403 ``insufficient_scope`` to a tool call the OAuth token lacks a scope for
        (``stepup.py``); True once answered."""
        if self.oauth is None or not token.oauth:
            return False
        if token.role != "reader" and token.spaces is None:
            return False  # nothing a scope could add: no parse
        call = tool_call(body)
        if call is None:
            return False
        request_id, tool, arguments = call
        missing = missing_scopes(self.oauth.settings, token.role, token.spaces, tool, arguments)
        if missing is None:
            return False
        error = rpc_error(INSUFFICIENT_SCOPE, f"insufficient scope: {missing.reason}")
        error["id"] = request_id
        error["error"]["data"] = {"scope": " ".join(missing.scopes)}
        description = _quotable(missing.reason)
        await self._challenge(
            send,
            f'error="insufficient_scope", error_description="{description}"',
            missing.scopes,
            error,
        )
        return True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hosts = _headers(scope, b"host")
        if len(hosts) > 1:  # RFC 9112 3.2: a server MUST answer 400 (which one would be meant?)
            await respond(send, 400, {"error": "bad request: more than one Host header"})
            return
        if not self.hosts.host_ok(hosts[0] if hosts else None):
            await respond(
                send,
                421,
                {"error": "misdirected request: this server does not answer to that Host"},
            )
            return
        if not all(self.hosts.origin_ok(o) for o in _headers(scope, b"origin")):
            await respond(send, 403, {"error": "forbidden: cross-origin requests are refused"})
            return
        if self.tokens or self.oauth is not None:
            token = await self._authenticate(scope, send)
            if token is None:
                return
        else:
            # No tokens (loopback only): nobody is authenticated, so nobody is a gateway.
            token = _ANONYMOUS
        if scope["method"] not in MCP_METHODS:
            await respond(
                send,
                405,
                {"error": "method not allowed: /mcp takes GET, POST and DELETE"},
                [(b"allow", b"GET, POST, DELETE")],
            )
            return
        if scope["method"] == "POST":
            await self._post(scope, receive, send, token)
            return
        await self._forward(scope, receive, send, token)

    async def _post(self, scope: Scope, receive: Receive, send: Send, token: BearerToken) -> None:
        async def admitted(body: bytes, replay: Receive) -> None:
            if not await self._step_up(send, token, body):
                await self._forward(scope, replay, send, token)

        send = plain_errors(send)  # the SDK's pydantic dumps, answered plainly
        await self.intake.admit(scope, receive, send, admitted, token)

    async def _forward(
        self, scope: Scope, receive: Receive, send: Send, token: BearerToken
    ) -> None:
        scope = {
            **scope,
            SCOPE_ROLE_KEY: token.role,
            SCOPE_SPACES_KEY: token.spaces,
            "user": self._user_of(token),
        }
        await self.app(scope, receive, send)
