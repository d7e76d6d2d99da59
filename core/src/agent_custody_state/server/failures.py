"""An unexpected exception while serving a tool call: what the caller is told, what is logged.

A bug, or a driver's error no layer turned into a refusal, must cost one call, not the
connection (``service``). Its message may quote what the call carried: a database driver
quoting the row it refused, ``KeyError`` a key, a vendor's SDK the request. A tool result is
kept by the gateway (and signed), a log line is copied into aggregators: no forget reaches
either. So the caller is told the tool and the exception's type only (``internal_error``), and
the log gets the traceback with each exception's message (and note) passed through
``withheld`` (the call's argument values masked, URL queries dropped, bounded) and ``redact``
(registered secrets, URL passwords); the frames, code and file names only, are kept as they are.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Mapping
from typing import Any

from agent_custody_state.stores.base import redact
from agent_custody_state.stores.withheld import withheld

_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def internal_error(name: str, exc: BaseException) -> str:
    """The tool result's text: the tool and the exception's type, never its message."""
    return f"internal error in {name}: {type(exc).__name__} (the server's log has the details)"


def masked_traceback(exc: BaseException, arguments: Mapping[str, Any] | None) -> str:
    """``exc``'s traceback as Python prints it (its causes and contexts first), each
    exception's message masked (see the module docstring)."""
    values = tuple(arguments.values()) if isinstance(arguments, Mapping) else ()
    parts: list[str] = []  # newest first, reversed at the end
    seen: set[int] = set()
    current: traceback.TracebackException | None = traceback.TracebackException.from_exception(exc)
    while current is not None:
        seen.add(id(current))
        parts.append(_block(current, values))
        if current.__cause__ is not None:
            link, current = _CAUSE, current.__cause__
        elif current.__context__ is not None and not current.__suppress_context__:
            link, current = _CONTEXT, current.__context__
        else:
            break
        if id(current) in seen:
            break
        parts.append(link)
    return "".join(reversed(parts)).rstrip("\n")


def _block(te: traceback.TracebackException, values: tuple[Any, ...]) -> str:
    """One exception: its frames as they are, its message (and notes) masked."""
    frames = ["Traceback (most recent call last):\n", *te.stack.format()] if te.stack else []
    shown = withheld(redact("".join(te.format_exception_only())), *values)
    return "".join(frames) + (shown if shown.endswith("\n") else shown + "\n")


def log_internal_error(
    log: logging.Logger, name: str, exc: BaseException, arguments: Mapping[str, Any] | None
) -> None:
    """Log ``<tool> failed`` at ERROR with ``exc``'s masked traceback as the record's
    ``exc_text`` (every formatter prints it; ``exc_info`` would print the message as raised)."""
    if not log.isEnabledFor(logging.ERROR):
        return
    path, line, function, _ = log.findCaller(stacklevel=2)  # the caller's place, not this one
    record = log.makeRecord(
        log.name, logging.ERROR, path, line, "%s failed", (name,), None, func=function
    )
    record.exc_text = masked_traceback(exc, arguments)
    log.handle(record)
