"""The chain head of a ledger whose last event has no chain record, computed at start-up, off
the ledger's thread.

A ledger written only by the TypeScript original (or last written by a batch with
``chain=False``) carries no chain record at its end. The first call that needs the head (a
write, which links onto it; the head resource; a certificate's "head before") then computes
it: back to the last record, or over every event when there is none, which on an original's
ledger of ten million events takes about a minute, on the ledger's one thread, while every
other call waits. The server starts that computation as it starts, on a connection of its own
to the same ledger (a second backend) in a thread of its own, and hands the result to the
ledger's backend (``EventBackend.remember_head``); a call that needs the head before then
computes it itself, as without this. The head is the one after the last event read at start
(``chain.head_after``), so what is appended meanwhile does not make it wrong.

Only for a backend other processes may share (``EventBackend.shared``: a second instance of
a ``memory:`` ledger would be another, empty ledger), and a ledger of at least ``WARM_AT``
events: below that the head takes a fraction of a second wherever it is first needed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.chain import chain_record, head_after
from agent_custody_state.ledger.model import Event

log = logging.getLogger(__name__)

#: Events from which a head without a record is computed at start-up (about 0.1 s of work).
WARM_AT = 10_000


def needs_warming(backend: EventBackend, count: int) -> Event | None:
    """The last event of a ledger of ``count`` events, when it carries no chain record and a
    second instance of the backend should compute the head after it; else None. (On the
    ledger's thread: one read.)"""
    if not backend.shared or count < WARM_AT:
        return None
    last = backend.last_event()
    return last if last is not None and chain_record(last) is None else None


def warm_chain_head(
    backend: EventBackend, last: Event, reopen: Callable[[], EventBackend]
) -> threading.Thread:
    """Start computing the head after ``last`` on ``reopen()`` (a second instance of the
    ledger's backend, closed afterwards); the thread gives it to ``backend``. A failure only
    logs: the head is then computed where it is first needed, as before."""

    def run() -> None:
        try:
            other = reopen()
            try:
                head = head_after(last, other.stored_events, other.events_newest_first)
            finally:
                other.close()
            backend.remember_head(last.event_id, head)
            log.info(
                "chain head after %s computed at start-up (%d events)", last.event_id, head.seq
            )
        except Exception:
            log.warning("could not compute the chain head at start-up", exc_info=True)

    thread = threading.Thread(target=run, name="acs-chain-head", daemon=True)
    thread.start()
    return thread
