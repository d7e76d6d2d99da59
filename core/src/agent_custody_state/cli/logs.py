"""The server's log on standard error: ``--log-level`` and ``--log-format text|json``.

Our own loggers (``agent_custody_state``, ``agent_custody_state.access`` for the access log, and
every plugin's ``agent_custody_state_*``) log at the chosen level; other libraries' (HTTP
clients, vendor SDKs) only from WARNING up, so ``--log-level debug`` is not drowned in them.
A JSON line carries the record's structured fields (``tool``, ``role``, ``outcome``, ``ms``,
``store``, ``fact``): only those named here, so nothing else a record carries reaches the log.

A message is one line of at most ``MAX_MESSAGE`` characters: it may quote text a caller or a
vendor chose (an exception's message, a store's error), so a text line shows control characters
escaped as JSON escapes them (a newline cannot forge a line, an escape sequence cannot drive the
operator's terminal) and a longer message is cut, with the count of what was left out (one call
cannot flood the log). A traceback follows on its own lines, as Python prints it (or as the
record carries it formatted already: ``exc_text``).

    2026-01-01T00:00:00.000Z INFO access memory.write gateway ok 3.2ms
    {"time":"2026-01-01T00:00:00.000Z","level":"info","logger":"access","message":"...",
     "tool":"memory.write","role":"gateway","outcome":"ok","ms":3.2}
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import TextIO

from agent_custody_state.controltext import shown

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
#: The structured fields a record may carry into a JSON line.
FIELDS = ("tool", "role", "outcome", "ms", "store", "fact")
_OURS = "agent_custody_state"
_HANDLER_NAME = "agent-custody-memory"
#: The longest message a log line shows; the rest is counted, not shown.
MAX_MESSAGE = 8000


def _message(record: logging.LogRecord) -> str:
    message = record.getMessage()
    if len(message) > MAX_MESSAGE:
        message = f"{message[:MAX_MESSAGE]}… ({len(message) - MAX_MESSAGE} more characters)"
    return message


def _time(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _logger(record: logging.LogRecord) -> str:
    name = record.name
    return name.removeprefix(_OURS + ".") if name.startswith(_OURS + ".") else name


def _traceback(formatter: logging.Formatter, record: logging.LogRecord) -> str:
    """The record's traceback: its exception's, else the text it carries already formatted
    (``exc_text``: a traceback whose messages were masked, ``server.failures``)."""
    return formatter.formatException(record.exc_info) if record.exc_info else record.exc_text or ""


class TextFormatter(logging.Formatter):
    """``<time> <LEVEL> <logger> <message>``, one line (a traceback follows on its own lines)."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_time(record)} {record.levelname} {_logger(record)} {shown(_message(record))}"
        if record.exc_info or record.exc_text:
            line += "\n" + _traceback(self, record)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line, with the structured fields in ``FIELDS``."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, object] = {
            "time": _time(record),
            "level": record.levelname.lower(),
            "logger": _logger(record),
            "message": _message(record),
        }
        for name in FIELDS:
            if hasattr(record, name):
                data[name] = getattr(record, name)
        if record.exc_info or record.exc_text:
            data["traceback"] = _traceback(self, record)
        return json.dumps(data, ensure_ascii=False, default=str)


class _Levels(logging.Filter):
    """Our loggers from ``level`` up, everyone else's from WARNING (or ``level``, if higher)."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        floor = self.level if record.name.startswith(_OURS) else max(self.level, logging.WARNING)
        return record.levelno >= floor


def configure_logging(level: str = "info", fmt: str = "text", stream: TextIO | None = None) -> None:
    """Send log records to ``stream`` (standard error) in ``fmt``; calling it again replaces
    the handler it installed before (tests run several servers in one process)."""
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}")
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}")
    number = getattr(logging, level.upper())
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(_Levels(number))
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(min(number, logging.WARNING))


def console(line: str, fmt: str = "text", stream: TextIO | None = None) -> None:
    """A line the server writes itself (its startup line, a warning, a note): in text format
    one line, control characters escaped (a ledger path may hold a newline); in json one
    object like every log line, its level from a ``warning:``/``note:`` after the
    ``agent-custody-memory:`` prefix (which a JSON line does not need)."""
    if fmt == "json":
        message = line.removeprefix(f"{_HANDLER_NAME}: ")
        level = logging.INFO
        if message.startswith("warning: "):
            level, message = logging.WARNING, message.removeprefix("warning: ")
        record = logging.LogRecord(f"{_OURS}.serve", level, __file__, 0, message, None, None)
        line = JsonFormatter().format(record)
    else:
        line = shown(line)
    print(line, file=stream or sys.stderr, flush=True)
