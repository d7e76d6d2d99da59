"""Read-only opens (``Ledger(..., read_only=True)``): the one refusal of every write.

A ledger opened read-only changes nothing where it is kept: its backend creates no file, table
or sidecar, cuts no torn line, and every write the ledger is asked for is refused before it
starts, with the code ``read_only`` (docs/decisions.md, "Read-only opens").
"""

from __future__ import annotations

import os
import re
from contextlib import suppress

from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.keystore import KeyStore
from agent_custody_state.ledger.modemark import CRYPTO_SHRED
from agent_custody_state.ledger.shred import ShreddingBackend, shredding

#: A location with a scheme (``postgresql://``, ``memory:``) names no file.
_SCHEME = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:")


def read_only_message(location: str, operation: str) -> str:
    """The one line that refuses ``operation`` on the ledger at ``location``."""
    return f"{location} is opened read-only; {operation} writes"


def check_writable(ledger: object, operation: str) -> None:
    """Refuse ``operation`` (a method's name) on ``ledger`` if it was opened read-only."""
    if getattr(ledger, "read_only", False):
        location = getattr(ledger, "location", "the ledger")
        raise LedgerError(read_only_message(location, operation), code="read_only")


def missing_ledger(location: str) -> None:
    """Refuse a read-only open of a file location that is not there: it never creates one."""
    if _SCHEME.match(location) is None and not os.path.exists(location):
        raise LedgerError(
            f"{location}: no such ledger; a read-only open never creates one (check the path)",
            code="read_only",
        )


def read_only_shredding(backend: EventBackend, key_store: str | KeyStore | None) -> EventBackend:
    """``backend`` in crypto-shred mode for reading: with ``key_store``, else the key store the
    ledger records; no key store is created and no mode recorded (``shred.shredding``'s
    ``mark=False``). A ledger that records plain mode, or a key store path that is not there,
    is refused (a new, empty key store would read every value as null). The backend is closed
    if refused."""
    if isinstance(backend, ShreddingBackend):
        return backend  # opened so already (the command line's readers)
    try:
        if key_store is None:
            mark = backend.recorded_forget_mode()
            if mark is None or mark.mode != CRYPTO_SHRED:
                raise LedgerError(
                    f"{backend.location} records plain mode (no crypto-shred mark, no key "
                    'store); a read-only open creates no key store: open it with forget_mode="plain"',
                    code="read_only",
                )
            recorded = mark.key_store
            # A URL is recorded without its password: the backend's default is that store.
            key_store = recorded if recorded and _SCHEME.match(recorded) is None else None
        path = isinstance(key_store, str) and _SCHEME.match(key_store) is None
        if path and not os.path.isfile(str(key_store)):
            raise LedgerError(
                f"key_store {key_store}: no such key store (a read-only open never creates one)",
                field="key_store",
            )
    except BaseException:
        with suppress(Exception):
            backend.close()
        raise
    return shredding(backend, key_store, mark=False)
