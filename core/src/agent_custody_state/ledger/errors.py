"""``LedgerError``: every refusal of the ledger, with the SPEC's message text and a code; and
``EventBackendError``, a backend's failure (re-exported by ``ledger.backend``, its home in the
API), kept here so that modules below the backend interface can raise it."""

from __future__ import annotations

from typing import Literal

#: Machine-readable reasons for a refusal, so callers branch on ``error.code``, never on text.
Code = Literal[
    "invalid_argument",  # an argument is malformed (``field`` names it)
    "unknown_fact",  # the fact id is not in the ledger
    "fact_exists",  # a caller-supplied fact id is taken
    "already_superseded",
    "retracted",  # the fact is retracted (confirm, supersede)
    "already_retracted",
    "already_attested",
    "already_forgotten",
    "on_hold",  # forget or sweep of a held fact
    "already_on_hold",
    "not_on_hold",
    "bad_replacement",  # a replacement changes subject/predicate or starts earlier
    "not_empty",  # import into a ledger that has events
    "bad_export",  # an import whose events do not read as a ledger (``importcheck``)
    "not_claimed",  # a caller's precondition: only claimed facts (the server's direct callers)
    "space_out_of_scope",  # the server's space-scoped token named a space it may not use
    "crypto_shred",  # a plain-mode forget of a value written in crypto-shred mode
    "key_missing",  # crypto-shred: the value's key is gone, so no digest can be computed
    "bad_ciphertext",  # crypto-shred: an envelope does not authenticate with its key
    "no_signing_key",  # an erasure certificate was asked for and there is no key to sign it
    "read_only",  # a write asked of a ledger opened read-only (``Ledger(..., read_only=True)``)
    "closed",  # any call on a ledger after its ``close()`` (``lifecycle``)
]


class LedgerError(ValueError):
    """A refused ledger operation. ``str(error)`` is the SPEC section 2 text, e.g.
    ``fact <id> is already superseded``; ``field`` names the Python parameter when an argument was
    at fault (``valid_from``), else None; ``code`` says why, for programs (``"on_hold"``)."""

    def __init__(self, message: str, *, field: str | None = None, code: Code | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.code: Code | None = code or ("invalid_argument" if field is not None else None)


class EventBackendError(Exception):
    """A backend failure (I/O, lock, corrupt data); the message names the location."""
