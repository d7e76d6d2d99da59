"""A ledger's stored events cut into chunks that ``verify``'s worker processes read themselves.

``verify`` over ``EventBackend.stored_events`` reads every event in one process and sends the
text to its workers: on a SQL ledger that process reads and copies every byte twice more than
the workers need, and the check of the query columns (``index_problems``) reads the table a
second time. A backend that can be opened from another process instead offers
``EventBackend.stored_chunks``: chunks of consecutive events, each a small picklable
``StoredChunk`` (where and which rows, not the rows) that a worker reads on its own connection,
with the chunk's index problems found in the same read. The report is the same either way
(``parallel.verify_stored``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from agent_custody_state.ledger.backend import EventBackendError

Text = str | bytes


@dataclass(frozen=True)
class ChunkRead:
    """What reading one chunk gives: the stored text of the event before it (None: the chunk
    starts the ledger), its events' stored text in append order, and its index problems
    (``EventBackend.index_problems``) as ``(offset in the chunk from 0, reason)``."""

    before: Text | None
    lines: list[Text]
    index_problems: list[tuple[int, str]] = field(default_factory=list)


class LedgerChanged(EventBackendError):
    """A chunk no longer holds the events it was cut with: the ledger changed under ``verify``
    (an append-only ledger never does, below the last event it had when ``verify`` started)."""


class StoredChunk(Protocol):
    """Consecutive stored events a worker process reads itself (pickled to it, so it carries
    what opens the ledger again, never an open connection)."""

    @property
    def count(self) -> int:
        """The number of events in the chunk when it was cut."""
        ...

    def read(self) -> ChunkRead:
        """Read the chunk (in whatever process it was sent to); ``LedgerChanged`` when it no
        longer holds ``count`` events."""
        ...
