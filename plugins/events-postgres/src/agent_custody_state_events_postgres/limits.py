"""What a refusal by a limit an operator set on the server means, added to the server's message.

A DBA sets ``statement_timeout``, ``lock_timeout``, ``idle_in_transaction_session_timeout`` or
``default_transaction_read_only`` on a role or database (``ALTER ROLE ... SET``), or points the
ledger at a hot standby; the server then refuses with a message of its own, which names no
setting and may be translated (``lc_messages``). ``hinted`` adds, by the error's SQLSTATE, which
setting or event it was and what to do. A refused write section wrote nothing (its transaction
is rolled back); docs/backends.md lists the settings a ledger's role needs.
"""

from __future__ import annotations

__all__ = ["HINTS", "hinted", "sqlstate"]

#: SQLSTATE -> what it means for a ledger, and what to do.
HINTS = {
    "57014": "the server cancelled the statement: its statement_timeout (SHOW statement_timeout; "
    "set per role or database by ALTER ROLE/DATABASE ... SET) or an operator's "
    "pg_cancel_backend; give this role a longer statement_timeout (0: none)",
    "55P03": "a lock wait ran past the server's lock_timeout (SHOW lock_timeout; set per role "
    "or database); give this role a longer lock_timeout (0: none), or find the session holding "
    "the lock (pg_locks)",
    "25P03": "the server ended the session after idle_in_transaction_session_timeout (set per "
    "role or database); a transaction of this ledger stayed open longer: raise it or use 0",
    "25P04": "the server ended the session after transaction_timeout (set per role or "
    "database); raise it for this role or use 0",
    "25006": "the session is read-only: default_transaction_read_only is on for the role or "
    "database, or the server is a hot standby (SELECT pg_is_in_recovery()); writes need the "
    "primary and a role without that setting (read_only=True opens for reading)",
    "57P01": "the server ended the connection (a restart or shutdown, or pg_terminate_backend)",
    "42501": "the role lacks a privilege the ledger needs (docs/backends.md lists them)",
}


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a psycopg error, or of the one a SQLAlchemy error wraps."""
    for candidate in (exc, getattr(exc, "orig", None)):
        state = getattr(candidate, "sqlstate", None)
        if isinstance(state, str):
            return state
    return None


def hinted(message: str, exc: BaseException) -> str:
    """``message`` (the server's, for ``exc``) and, for a limit an operator set, what it means."""
    hint = HINTS.get(sqlstate(exc) or "")
    return f"{message}; {hint}" if hint else message
