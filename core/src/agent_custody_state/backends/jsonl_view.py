"""The JSONL ledger's reads: each answered from the in-memory view, caught up first with the
lines other processes appended (``refresh``), and ``reading``, which holds one view for a read
made of several questions.

Without ``reading`` each question caught up on its own, so an as-of read that asks again past a
link (the facts, then who supersedes them) could mix two states of the file: a supersession
another process appended between the two questions hid the old fact, while the new one was not
among the facts found, and the read returned neither. Inside ``reading`` the view is caught up
once and then kept (the instance lock is held: this process's other threads wait for the read,
as they wait for a write section); other processes are not held up at all.

Each question holds that lock from its catch-up to its answer too (``_answer``). Without it, a
thread reading while another thread of the same process wrote walked the view's dicts as they
grew ("dictionary changed size during iteration" from ``spaces``), and could see a write
section's events before their fsync (gone again if it failed).
"""

from __future__ import annotations

import fcntl
import threading
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

from agent_custody_state.ledger.backend import KeyName
from agent_custody_state.ledger.model import AssertEvent, Event

if TYPE_CHECKING:
    from agent_custody_state.backends.index import EventIndex

T = TypeVar("T")


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

    def _view_again(self) -> None:
        raise NotImplementedError

    def refresh(self) -> None:
        """Pick up the lines other processes appended, unless a write section or a reading holds
        the view (a write section is caught up under its exclusive lock)."""
        with self._lock:
            if self._depth:
                self._view_again()  # unless a failed forget dropped it, the view is current
                return
            if self._held:
                return
            self._flock(fcntl.LOCK_SH)
            try:
                self._catch_up(exclusive=False)
            finally:
                self._flock(fcntl.LOCK_UN)

    @contextmanager
    def _shared(self) -> Iterator[None]:
        """The shared lock for a read of the file itself (``stored_events``), from any thread.
        Under the instance lock: this process's write sections lock the same open lock file, and
        a shared lock taken on it beside one turned their exclusive lock into a shared one, which
        its unlock then released (other processes wrote inside the section). Inside this
        thread's own write section, whose exclusive lock keeps writers out, nothing more."""
        with self._lock:
            if self._depth:
                yield
                return
            self._flock(fcntl.LOCK_SH)
            try:
                yield
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

    def _answer(self, read: Callable[[EventIndex], T]) -> T:
        """``read`` of the view, caught up first, under the instance lock: another thread's write
        section (which adds to the view before its fsync, and rolls back on failure) or a forget
        that reloads the view cannot change it half-way through the answer."""
        with self._lock:
            self.refresh()
            return read(self._index)

    def get_assert(self, fact_id: str) -> AssertEvent | None:
        return self._answer(lambda index: index.get_assert(fact_id))

    def events_for(self, fact_ids: Collection[str]) -> list[Event]:
        return self._answer(lambda index: index.events_for(fact_ids))

    def superseders(self, fact_ids: Collection[str]) -> list[AssertEvent]:
        return self._answer(lambda index: index.superseders(fact_ids))

    def history(self, fact_id: str) -> list[Event]:
        return self._answer(lambda index: index.history(fact_id))

    def find_asserts(self, **filters: str | None) -> Iterator[AssertEvent]:  # type: ignore[override]
        return iter(self._answer(lambda index: list(index.find_asserts(**filters))))

    def key_values(self, key: KeyName, prefix: str = "", limit: int = 100) -> list[str]:
        return self._answer(lambda index: index.key_values(key, prefix, limit))

    def spaces(self) -> list[str]:
        return self._answer(lambda index: index.spaces())

    def count(self) -> int:
        return self._answer(len)

    def iter_events(self) -> Iterator[Event]:
        return iter(self._answer(lambda index: list(index.events)))

    def last_event(self) -> Event | None:
        return self._answer(lambda index: index.events[-1] if len(index) else None)

    def events_newest_first(self) -> Iterator[Event]:
        return reversed(self._answer(lambda index: list(index.events)))
