"""Tracebacks for a log whose exceptions' messages are masked, or left out.

An exception's message may quote what the code was handling: a database driver the row it
refused, ``KeyError`` its key, a vendor's SDK the request, a plugin's hook the event. A log line
is copied into aggregators and tickets that no forget reaches, so a traceback logged where a
fact's value may be in play shows each exception's message (its notes included) through a
``Shown`` function the caller chooses (``stores.masking.masker``: the values it knows masked,
registered secrets and URL queries dropped, bounded), or, with none, the exception's type only:
a layer that knows no value to mask and may not import the stores (the ledger) says
``(message withheld)``. The frames (file names, line numbers and code) are kept as they are.

A record made here carries the traceback as its ``exc_text``, which every formatter prints as
it would print ``exc_info``'s (``exc_info`` would print the messages as raised).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable

#: What a message is shown as: the exception's ``Type: message`` line(s), masked.
Shown = Callable[[str], str]

_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"
WITHHELD = "(message withheld)"


def masked_traceback(exc: BaseException, shown: Shown | None = None) -> str:
    """``exc``'s traceback as Python prints it (its causes and contexts first), each
    exception's message through ``shown``, or only its type when ``shown`` is None."""
    parts: list[str] = []  # newest first, reversed at the end
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None:
        seen.add(id(current))
        parts.append(_block(current, shown))
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


def type_name(exc: BaseException) -> str:
    """``exc``'s type as a traceback names it: qualified by its module, unless a builtin."""
    kind = type(exc)
    module = kind.__module__
    return (
        kind.__qualname__ if module in ("builtins", "__main__") else f"{module}.{kind.__qualname__}"
    )


def _block(exc: BaseException, shown: Shown | None) -> str:
    """One exception: its frames as they are, its message masked (or its type alone)."""
    frames = traceback.format_tb(exc.__traceback__)
    head = ["Traceback (most recent call last):\n", *frames] if frames else []
    if shown is None:
        text = f"{type_name(exc)} {WITHHELD}"
    else:
        text = shown("".join(traceback.format_exception_only(exc)))
    return "".join(head) + (text if text.endswith("\n") else text + "\n")


def log_traceback(
    log: logging.Logger,
    level: int,
    exc: BaseException,
    shown: Shown | None,
    msg: str,
    *args: object,
    stacklevel: int = 1,
) -> None:
    """Log ``msg % args`` at ``level`` with ``exc``'s ``masked_traceback`` as the record's
    ``exc_text``. ``stacklevel``: as ``Logger.log``'s (1: the place that called this)."""
    if not log.isEnabledFor(level):
        return
    path, line, function, _ = log.findCaller(stacklevel=stacklevel + 1)
    record = log.makeRecord(log.name, level, path, line, msg, args, None, func=function)
    record.exc_text = masked_traceback(exc, shown)
    log.handle(record)
