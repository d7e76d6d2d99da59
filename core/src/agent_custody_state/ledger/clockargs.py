"""The ledger's clock (SPEC section 7): refused when the ledger is opened unless it is callable,
and what it returns refused at a write unless it is an aware ``datetime``, each with a
``LedgerError`` naming ``clock`` rather than an ``AttributeError`` mid-write."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.timeutil import TimeFormatError, format_time


def clock_arg(clock: object) -> Callable[[], datetime] | None:
    """``Ledger``'s ``clock``: None (UTC now) or a zero-argument callable (SPEC section 7),
    refused when the ledger is opened rather than at its first write."""
    if clock is not None and not callable(clock):
        raise LedgerError(
            "clock must be a zero-argument callable returning an aware datetime, not a "
            f"{type(clock).__name__}",
            field="clock",
        )
    return clock


def clock_time(moment: object) -> str:
    """What the clock returned, in the wire form; an aware ``datetime`` only (a string or a
    naive datetime is refused with ``LedgerError``, not an ``AttributeError`` mid-write)."""
    if not isinstance(moment, datetime):
        raise LedgerError(
            f"clock: must return an aware datetime, not a {type(moment).__name__}", field="clock"
        )
    try:
        return format_time(moment)
    except TimeFormatError as exc:
        raise LedgerError(f"clock: {exc}", field="clock") from None


__all__ = ["clock_arg", "clock_time"]
