"""A small event backend written as a third party would write it: the base of broken variants.

It imports only ``agent_custody_state.plugin`` (the plugin-author surface) and keeps the events
as JSON lines in one file, re-read at every question, so two instances of one path agree. A
write section holds ``flock`` on ``<path>.lock``, works on a copy of the events, and commits by
renaming a temporary file over the ledger. ``test_backend_suite_catches`` copies this module
into a child pytest run and breaks it one defect at a time.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path

from agent_custody_state.plugin import (
    AssertEvent,
    Event,
    EventBackend,
    ForgetEvent,
    Forgotten,
    ModeFile,
    ReentrantTransactions,
    SidecarKeys,
    check_folder,
    create_private,
    event_from_json,
    forget_assert,
    open_private,
)

__all__ = ["TinyJsonBackend"]


class TinyJsonBackend(SidecarKeys, ModeFile, ReentrantTransactions, EventBackend):
    """Events as JSON lines in ``location``; correct, simple, slow."""

    kind = "tinyjson"
    shared = False  # two instances in one process share; several processes are not tested

    def __init__(self, location: str, **_options: object) -> None:
        self.location = str(location)
        self.path = Path(location)
        check_folder(self.path, self.location)
        self._init_transactions()
        self._pending: list[Event] | None = None
        self._lock_fd: int | None = None

    def _load(self) -> list[Event]:
        """The events: this section's copy inside a write section, else the file's."""
        if self._pending is not None:
            return self._pending
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        # "\n" only: str.splitlines() would also split inside a value at U+2028 or U+0085.
        return [event_from_json(line) for line in text.split("\n") if line]

    # -- the write section -------------------------------------------------------------------

    def _begin(self) -> None:
        fd, _ = open_private(Path(f"{self.path}.lock"), os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self._lock_fd = fd
        self._pending = list(self._load())

    def _commit(self) -> None:
        assert self._pending is not None
        temporary = Path(f"{self.path}.tmp")
        temporary.unlink(missing_ok=True)
        create_private(temporary)
        with open(temporary, "w", encoding="utf-8") as out:
            out.write("".join(event.to_json() + "\n" for event in self._pending))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.path)

    def _end(self) -> None:
        self._pending = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def append(self, events: Sequence[Event]) -> None:
        self._require_transaction()
        assert self._pending is not None
        self._pending.extend(events)

    def forget(self, fact_id: str, forgotten: Forgotten, event: ForgetEvent) -> None:
        self._require_transaction()
        assert self._pending is not None
        for pos, stored in enumerate(self._pending):
            if isinstance(stored, AssertEvent) and stored.fact_id == fact_id:
                self._pending[pos] = forget_assert(stored, forgotten)
        self._pending.append(event)

    # -- the questions -----------------------------------------------------------------------

    def get_assert(self, fact_id: str) -> AssertEvent | None:
        return next((e for e in self._asserts() if e.fact_id == fact_id), None)

    def events_for(self, fact_ids: Collection[str]) -> list[Event]:
        wanted = set(fact_ids)
        return [e for e in self._load() if e.fact_id in wanted]

    def superseders(self, fact_ids: Collection[str]) -> list[AssertEvent]:
        wanted = set(fact_ids)
        return [e for e in self._asserts() if e.supersedes in wanted]

    def history(self, fact_id: str) -> list[Event]:
        return [
            e
            for e in self._load()
            if e.fact_id == fact_id or (isinstance(e, AssertEvent) and e.supersedes == fact_id)
        ]

    def find_asserts(
        self,
        *,
        space: str | None = None,
        subject: str | None = None,
        predicate: str | None = None,
        tx_at: str | None = None,
        tx_before: str | None = None,
    ) -> Iterator[AssertEvent]:
        found = [
            e
            for e in self._asserts()
            if (space is None or e.fact.space == space)
            and (subject is None or e.fact.subject == subject)
            and (predicate is None or e.fact.predicate == predicate)
            and (tx_at is None or e.tx_time <= tx_at)
            and (tx_before is None or e.tx_time < tx_before)
        ]
        return iter(found)

    def spaces(self) -> list[str]:
        return sorted({e.fact.space for e in self._asserts()})

    def count(self) -> int:
        return len(self._load())

    def iter_events(self) -> Iterator[Event]:
        return iter(list(self._load()))

    def _asserts(self) -> list[AssertEvent]:
        return [e for e in self._load() if isinstance(e, AssertEvent)]
