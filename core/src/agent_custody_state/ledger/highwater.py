"""The latest transaction time a ``Ledger`` object appended: what ``Ledger.present()`` never reads
before, so the write just made is believed "now" after a clock step back (docs/time.md).

Threads append through one ``Ledger`` and each announces its events after its write section
ends, so they announce in any order. A plain check-then-set let a thread that had checked its
earlier stamp store it after another thread stored a later one: the present moved back, and the
later write was no longer believed "now". ``raise_to`` is a maximum taken under a lock; reading
``time`` takes none (a string attribute is read whole), so ``present()`` costs what it did.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from agent_custody_state.ledger import forks
from agent_custody_state.ledger.model import Event


class HighWater:
    """A wire time that only ever rises (``raise_to``); ``time`` is ``""`` until it does."""

    __slots__ = ("__weakref__", "_lock", "time")

    def __init__(self) -> None:
        self.time = ""
        self._lock = threading.Lock()
        forks.watch(self)

    def _after_fork(self) -> None:  # ``forks``: a parent thread may have held the lock
        self._lock = threading.Lock()

    def raise_to(self, events: Sequence[Event]) -> None:
        """Raise ``time`` to the last of ``events``' transaction time if that is later."""
        if not events or events[-1].tx_time <= self.time:
            return  # nothing later: no lock (every write of one thread in the same millisecond)
        with self._lock:
            if events[-1].tx_time > self.time:
                self.time = events[-1].tx_time
