"""``LedgerError``: every refusal of the ledger, with the SPEC's message text."""

from __future__ import annotations


class LedgerError(ValueError):
    """A refused ledger operation. ``str(error)`` is the SPEC section 2 text, e.g.
    ``fact <id> is already superseded``; ``field`` names the Python parameter when an argument was
    at fault (``valid_from``), else None."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
