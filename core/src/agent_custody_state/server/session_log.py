"""MCP logging: what the server logs while serving a client's tool call reaches that client.

The flows and the store set already log store failures, compensations and removal checks
through Python logging. While a tool call runs, every record of our loggers
(``agent_custody_state*``, the access log aside: it says only that the call happened) is
collected for that call (a context variable, copied onto the ledger thread by the worker) and,
when the call ends, sent to the caller as ``notifications/message`` if it is at or above the
level the client chose:

- 2025-11-25 and older: ``logging/setLevel`` sets the level for the connection; before it,
  nothing is sent. Messages go on the connection's standalone channel (HTTP answers are plain
  JSON, so a request-scoped notification would have nowhere to go).
- 2026-07-28: the level is the request's ``io.modelcontextprotocol/logLevel`` ``_meta`` key
  (absent: nothing), and messages ride the request's own stream, as that version asks.

Python levels map onto RFC 5424's names: DEBUG debug, INFO info, WARNING warning, ERROR error,
CRITICAL critical (``notice``, ``alert`` and ``emergency`` as thresholds sit between them).

What a message may carry: a session hears only about its own calls, and only the shape of what
happened. The text is the record's format string with its arguments filled in only where they
are the record's own ``store``, ``fact`` or a tool name, or numbers; anything else (an exception's
text, a vendor's error body, which may echo a value or a credential) becomes ``[withheld]``. The
operator's own log on standard error keeps the full text. Records the server's logging does not
produce at all (below ``serve --log-level``) cannot be sent either.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any, get_args

import mcp_types as types
from mcp.server.connection import allowed_log_levels
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

WITHHELD = "[withheld]"
#: RFC 5424 severities, ascending (the order of the SDK's ``LoggingLevel``).
LEVELS: tuple[types.LoggingLevel, ...] = get_args(types.LoggingLevel)
#: The Python level at which each MCP level starts.
PYTHON_LEVEL: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": 25,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": 55,
    "emergency": 60,
}
_OURS = "agent_custody_state"
_ACCESS = "agent_custody_state.access"
_collected: ContextVar[list[logging.LogRecord] | None] = ContextVar("mcp_log", default=None)


def mcp_level(levelno: int) -> types.LoggingLevel:
    """The RFC 5424 name of a Python level (the highest MCP level it reaches)."""
    name: types.LoggingLevel = "debug"
    for level in LEVELS:
        if levelno >= PYTHON_LEVEL[level]:
            name = level
    return name


def shown_message(record: logging.LogRecord, tools: Collection[str]) -> str:
    """The record's message with every argument that is not known to be harmless withheld."""
    if not isinstance(record.msg, str):
        return WITHHELD
    if not record.args:
        return record.msg
    safe = {getattr(record, name, None) for name in ("store", "fact", "tool")} | set(tools)
    safe.discard(None)
    args = record.args if isinstance(record.args, tuple) else (record.args,)
    shown = tuple(
        a if isinstance(a, int | float) or (isinstance(a, str) and a in safe) else WITHHELD
        for a in args
    )
    try:
        return record.msg % shown
    except (TypeError, ValueError):  # a format that needed the withheld argument's type
        return record.msg


class _Collector(logging.Handler):
    """On the root logger: hands our records to the tool call they happened in, if any."""

    def emit(self, record: logging.LogRecord) -> None:
        records = _collected.get()
        if records is not None and record.name.startswith(_OURS) and record.name != _ACCESS:
            records.append(record)


_HANDLER = _Collector()


def install_collector() -> None:
    """Hear our records (once per process; a collector outside a tool call does nothing)."""
    root = logging.getLogger()
    if _HANDLER not in root.handlers:
        root.addHandler(_HANDLER)


class SessionLog:
    """The levels clients chose, and the sending of each call's records to its caller."""

    def __init__(self, tools: Collection[str]) -> None:
        self.tools = frozenset(tools)
        # connection key -> the level that connection set with logging/setLevel
        self.levels: dict[int, types.LoggingLevel] = {}

    @staticmethod
    def _key(session: Any) -> int:
        # The session proxy is made per request; the connection behind it is what sets a level.
        return id(getattr(session, "_connection", session))

    async def set_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        key = self._key(ctx.session)
        if key not in self.levels:
            # The level leaves with its connection (else the map grows with every connection,
            # and a later one given the same ``id`` hears at a level it never chose).
            stack = getattr(getattr(ctx.session, "_connection", None), "exit_stack", None)
            if stack is not None:
                stack.callback(self.levels.pop, key, None)
        self.levels[key] = params.level
        return types.EmptyResult()

    def forget_connection(self, session: Any) -> None:
        self.levels.pop(self._key(session), None)

    def allowed(self, ctx: Any) -> frozenset[types.LoggingLevel]:
        """The levels this request's caller asked to hear."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return allowed_log_levels(ctx.protocol_version, ctx.meta)
        level = self.levels.get(self._key(ctx.session))
        return frozenset(LEVELS[LEVELS.index(level) :]) if level is not None else frozenset()

    @asynccontextmanager
    async def capture(self, ctx: Any) -> AsyncIterator[None]:
        """Collect the records of the call run inside; send the caller those it asked for."""
        records: list[logging.LogRecord] = []
        token = _collected.set(records)
        try:
            yield
        finally:
            _collected.reset(token)
            await self._send(ctx, records)

    async def _send(self, ctx: Any, records: list[logging.LogRecord]) -> None:
        allowed = self.allowed(ctx) if records else frozenset()
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        for record in records:
            level = mcp_level(record.levelno)
            if level not in allowed:
                continue
            data: dict[str, Any] = {"message": shown_message(record, self.tools)}
            for name in ("store", "fact"):
                if isinstance(getattr(record, name, None), str):
                    data[name] = getattr(record, name)
            note = types.LoggingMessageNotification(
                params=types.LoggingMessageNotificationParams(
                    level=level, logger=record.name.removeprefix(_OURS + "."), data=data
                )
            )
            try:
                await ctx.session.send_notification(
                    note, related_request_id=ctx.request_id if modern else None
                )
            except Exception as exc:  # a gone client must not fail the call being answered
                logging.getLogger(__name__).debug("log message not delivered: %s", exc)
                return
