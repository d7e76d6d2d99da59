"""The JSONL ledger's reads: each answered from the in-memory view, caught up first with the
lines other processes appended (``refresh``), and ``reading``, which holds one view for a read
made of several questions.

Without ``reading`` each question caught up on its own, so an as-of read that asks again past a
link (the facts, then who supersedes them) could mix two states of the file: a supersession
another process appended between the two questions hid the old fact, while the new one was not
among the facts found, and the read returned neither. Inside ``reading`` the view is caught up
once and then kept (the instance lock is held: this process's other threads wait for the read,
as they wait for a write section); other processes are not held up at all.
"""

from __future__ import annotations

import fcntl
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from agent_custody_state.ledger.backend import KeyName
from agent_custody_state.ledger.model import AssertEvent, Event

if TYPE_CHECKING:
    from agent_custody_state.backends.index import EventIndex


class JsonlView:
    """The reads of ``JsonlBackend`` (which provides the attributes declared here)."""

    _lock: threading.RLock
    _depth: int
    _index: EventIndex
    _held = 0  # readings open on this instance (``reading``)

    def _flock(self, op: int) -> None:
        raise NotImplementedError

    def _catch_up(self, *, exclusive: bool) -> None:
        raise NotImplementedError

    def refresh(self) -> None:
        """Pick up the lines other processes appended, unless a write section or a reading holds
        the view (a write section is caught up under its exclusive lock)."""
        with self._lock:
            if self._depth or self._held:
                return
            self._flock(fcntl.LOCK_SH)
            try:
                self._catch_up(exclusive=False)
            finally:
                self._flock(fcntl.LOCK_UN)

    @contextmanager
    def reading(self) -> Iterator[None]:
        """One view for every question inside (``EventBackend.reading``)."""
        with self._lock:
            self.refresh()
            self._held += 1
            try:
                yield
            finally:
                self._held -= 1

    def get_assert(self, fact_id: str) -> AssertEvent | None:
        self.refresh()
        return self._index.get_assert(fact_id)

    def events_for(self, fact_ids: Collection[str]) -> list[Event]:
        self.refresh()
        return self._index.events_for(fact_ids)

    def superseders(self, fact_ids: Collection[str]) -> list[AssertEvent]:
        self.refresh()
        return self._index.superseders(fact_ids)

    def history(self, fact_id: str) -> list[Event]:
        self.refresh()
        return self._index.history(fact_id)

    def find_asserts(self, **filters: str | None) -> Iterator[AssertEvent]:  # type: ignore[override]
        self.refresh()
        return iter(list(self._index.find_asserts(**filters)))

    def key_values(self, key: KeyName, prefix: str = "", limit: int = 100) -> list[str]:
        self.refresh()
        return self._index.key_values(key, prefix, limit)

    def spaces(self) -> list[str]:
        self.refresh()
        return self._index.spaces()

    def count(self) -> int:
        self.refresh()
        return len(self._index)

    def iter_events(self) -> Iterator[Event]:
        self.refresh()
        return iter(list(self._index.events))

    def last_event(self) -> Event | None:
        self.refresh()
        return self._index.events[-1] if len(self._index) else None

    def events_newest_first(self) -> Iterator[Event]:
        self.refresh()
        return reversed(list(self._index.events))
