"""After forgets commit: the ledger's files compacted, and the forgets announced whatever
becomes of the compaction.

The forgets are durable before ``compact`` runs (PostgreSQL: a ``VACUUM FULL``, which a
``statement_timeout``, a lock wait or a dropped connection can cut off), so its failure undoes
none of them: the caller gets its error, which says so, and the write-through stores still hear
of every forget (``event_appended``); otherwise they kept values the ledger had forgotten.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.model import Event

__all__ = ["compacted"]


class _Forgetting(Protocol):
    backend: EventBackend

    def _appended(self, events: Sequence[Event]) -> None: ...


def compacted(ledger: _Forgetting, forgotten: Sequence[Event]) -> None:
    """Compact the ledger's files after ``forgotten`` (none: nothing to do), then announce
    them, also when the compaction fails (its error is raised after)."""
    try:
        if forgotten:
            ledger.backend.compact()
    finally:
        ledger._appended(forgotten)
