"""After forgets commit: the ledger's files compacted, and the forgets announced whatever
becomes of the compaction.

The forgets are durable before ``compact`` runs (PostgreSQL: a ``VACUUM FULL``, which a
``statement_timeout``, a lock wait or a dropped connection can cut off), so its failure undoes
none of them: the caller gets its error, which says so, and the write-through stores still hear
of every forget (``event_appended``); otherwise they kept values the ledger had forgotten.

A sweep that something stopped (a fact's error, Ctrl-C) compacts what it forgot before on the
way out; a compaction failing then does not replace what stopped it: the caller tells a Ctrl-C
from a fact's error by it (the custody flow contacts no store after Ctrl-C; the command exits
130), and reports why the sweep stopped. The compaction's failure is logged and added to it as
a note; a compaction the next forget or compact runs erases what this one left. An interrupt
during the compaction (a second Ctrl-C) is raised: the user asked out.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.errors import EventBackendError
from agent_custody_state.ledger.model import Event
from agent_custody_state.maskedtrace import log_traceback, type_name

log = logging.getLogger(__name__)

__all__ = ["compacted", "compacting"]


class _Forgetting(Protocol):
    backend: EventBackend

    def _appended(self, events: Sequence[Event]) -> None: ...


def compacted(
    ledger: _Forgetting, forgotten: Sequence[Event], stopping: BaseException | None = None
) -> None:
    """Compact the ledger's files after ``forgotten`` (none: nothing to do), then announce
    them, also when the compaction fails. Its error is raised after, unless ``stopping`` (what
    stopped a sweep) is on its way to the caller: then it is logged and noted on ``stopping``."""
    try:
        if forgotten:
            ledger.backend.compact()
    except Exception as failure:
        if stopping is None:
            raise
        # A known refusal's text (no value in it); another exception's type only (``maskedtrace``)
        said = type_name(failure)
        if isinstance(failure, EventBackendError | OSError):
            said += f": {failure}"
        stopping.add_note(
            f"then compacting the ledger's files failed ({said}); the forgets stand, and the "
            "next forget or compact erases what it left"
        )
        text = "compacting after a stopped sweep failed (%s)"
        log_traceback(log, logging.ERROR, failure, None, text, said)
    finally:
        ledger._appended(forgotten)


@contextmanager
def compacting(ledger: _Forgetting, forgotten: Sequence[Event]) -> Iterator[None]:
    """Run a sweep's loop, then ``compacted`` with what it forgot (``forgotten``, the list the
    loop fills), also when the loop is stopped: what stopped it is then raised (``stopping``)."""
    try:
        yield
    except BaseException as stop:
        compacted(ledger, forgotten, stop)
        raise
    compacted(ledger, forgotten)
