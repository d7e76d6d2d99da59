"""The in-memory reference backend: the simplest correct EventBackend, used to check the others.

Location ``memory:`` (or ``:memory:``). Nothing survives ``close()``.

One object may be used from many threads: every read runs under the lock a write section
holds (``_lock``), so a read never meets the index half-way through another thread's append,
forget or rollback, and ``reading`` keeps a read of several questions on one state.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from agent_custody_state.backends.index import EventIndex
from agent_custody_state.backends.keystore_file import FileKeyStore
from agent_custody_state.backends.keystore_memory import MemoryKeyStore
from agent_custody_state.ledger.backend import EventBackend, KeyName
from agent_custody_state.ledger.checkpoints import MemoryCheckpointLog
from agent_custody_state.ledger.keystore import KeyStore
from agent_custody_state.ledger.model import AssertEvent, Event, ForgetEvent, Forgotten
from agent_custody_state.ledger.modemark import ModeMark
from agent_custody_state.ledger.sections import ReentrantTransactions


class MemoryBackend(ReentrantTransactions, EventBackend):
    """Events in a list, guarded by a re-entrant lock; transactions roll back on error."""

    kind = "memory"
    blocking = False  # no I/O at all: a thread hop would cost more than the call
    shared = False  # lives in one process
    keeps_objects = True  # reads return the indexed events themselves

    def __init__(self, location: str = "memory:", *, read_only: bool = False) -> None:
        self.location = location
        self.read_only = read_only is True  # a new, empty ledger: every write is refused
        self._index = EventIndex()
        self._init_transactions()
        self._start = 0
        self._undo: list[tuple[int, Event]] = []
        self._keys: MemoryKeyStore | None = None
        self._checkpoints = MemoryCheckpointLog()
        self._mark: ModeMark | None = None

    # -- the write section (``ReentrantTransactions``) ---------------------------------------

    def _begin(self) -> None:
        self._start = len(self._index)
        self._undo = []

    def _rollback(self) -> None:
        for pos, original in reversed(self._undo):
            self._index.events[pos] = original
        self._index.truncate(self._start)

    def append(self, events: Sequence[Event]) -> None:
        self._require_transaction()
        for event in events:
            self._index.add(event)

    def forget(self, fact_id: str, forgotten: Forgotten, event: ForgetEvent) -> None:
        self._require_transaction()
        for pos in self._index.positions(fact_id):
            self._undo.append((pos, self._index.events[pos]))
        self._index.rewrite_forgotten(fact_id, forgotten)
        self._index.add(event)

    def reading(self) -> AbstractContextManager[Any]:
        """One state for every question of a read: no other thread's write section runs
        meanwhile (a section holds ``_lock`` from its checks to its commit or rollback). The
        lock itself is the context manager (a generator-based one cost a microsecond a read)."""
        return self._lock

    def recorded_forget_mode(self) -> ModeMark | None:
        return self._mark

    def record_forget_mode(self, mark: ModeMark) -> None:
        self._mark = self._mark or mark

    def get_assert(self, fact_id: str) -> AssertEvent | None:
        with self._lock:
            return self._index.get_assert(fact_id)

    def events_for(self, fact_ids: Collection[str]) -> list[Event]:
        with self._lock:
            return self._index.events_for(fact_ids)

    def superseders(self, fact_ids: Collection[str]) -> list[AssertEvent]:
        with self._lock:
            return self._index.superseders(fact_ids)

    def history(self, fact_id: str) -> list[Event]:
        with self._lock:
            return self._index.history(fact_id)

    def find_asserts(self, **filters: str | None) -> Iterator[AssertEvent]:  # type: ignore[override]
        with self._lock:
            return iter(list(self._index.find_asserts(**filters)))

    def key_values(self, key: KeyName, prefix: str = "", limit: int = 100) -> list[str]:
        with self._lock:
            return self._index.key_values(key, prefix, limit)

    def spaces(self) -> list[str]:
        with self._lock:
            return self._index.spaces()

    def count(self) -> int:
        with self._lock:
            return len(self._index)

    def iter_events(self) -> Iterator[Event]:
        with self._lock:
            return iter(list(self._index.events))

    def keystore(self, location: str | None = None) -> KeyStore:
        """Crypto-shred keys in memory too, one store per backend object (nothing outlives the
        process), or in a file."""
        if location is not None:
            return FileKeyStore(location)
        if self._keys is None:
            self._keys = MemoryKeyStore(f"{self.location} (keys)")
        return self._keys

    def last_event(self) -> Event | None:
        with self._lock:
            return self._index.events[-1] if len(self._index) else None

    def events_newest_first(self) -> Iterator[Event]:
        with self._lock:
            return reversed(list(self._index.events))

    def checkpoint_log(self) -> MemoryCheckpointLog:
        return self._checkpoints
