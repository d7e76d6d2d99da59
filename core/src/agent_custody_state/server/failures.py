"""An unexpected exception while serving a tool call: what the caller is told, what is logged.

A bug, or a driver's error no layer turned into a refusal, must cost one call, not the
connection (``service``). Its message may quote what the call carried: a database driver
quoting the row it refused, ``KeyError`` a key, a vendor's SDK the request. A tool result is
kept by the gateway (and signed), a log line is copied into aggregators: no forget reaches
either. So the caller is told the tool and the exception's type only (``internal_error``), and
the log gets the traceback with each exception's message (and note) passed through
``withheld`` (the call's argument values masked, URL queries dropped, bounded) and ``redact``
(registered secrets, URL passwords); the frames, code and file names only, are kept as they are
(``maskedtrace``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from agent_custody_state.maskedtrace import log_traceback
from agent_custody_state.maskedtrace import masked_traceback as _masked
from agent_custody_state.stores.masking import masker


def internal_error(name: str, exc: BaseException) -> str:
    """The tool result's text: the tool and the exception's type, never its message."""
    return f"internal error in {name}: {type(exc).__name__} (the server's log has the details)"


def _values(arguments: Mapping[str, Any] | None) -> tuple[Any, ...]:
    return tuple(arguments.values()) if isinstance(arguments, Mapping) else ()


def masked_traceback(exc: BaseException, arguments: Mapping[str, Any] | None) -> str:
    """``exc``'s traceback as Python prints it (its causes and contexts first), each
    exception's message masked (see the module docstring)."""
    return _masked(exc, masker(*_values(arguments)))


def log_internal_error(
    log: logging.Logger,
    name: str,
    exc: BaseException,
    arguments: Mapping[str, Any] | None,
    msg: str = "%s failed",
    *args: object,
) -> None:
    """Log ``msg % (name, *args)`` (``<tool> failed``) at ERROR with ``exc``'s masked
    traceback as the record's ``exc_text`` (every formatter prints it; ``exc_info`` would print
    the message as raised)."""
    shown = masker(*_values(arguments))
    log_traceback(log, logging.ERROR, exc, shown, msg, name, *args, stacklevel=2)
