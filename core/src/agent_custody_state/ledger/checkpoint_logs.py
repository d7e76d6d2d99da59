"""Where a ledger's checkpoints are kept (``CheckpointLog``): a text file of signed notes, or a
list in memory; a SQL ledger keeps them in a table beside its events (its backend's own log).

A file's notes are separated by an empty line, each a note's text, an empty line and its
signature lines (``split_notes``). An add appends one note under an exclusive ``flock``,
fsynced, all or nothing (``appending.append_locked``), waiting for the lock at most
``lock_timeout`` seconds: a process stopped while adding to the same file made every later
checkpoint wait forever.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from agent_custody_state.ledger.appending import append_locked
from agent_custody_state.lockwait import DEFAULT_LOCK_TIMEOUT
from agent_custody_state.lockwait import lock_timeout as bounded

#: What a signature line of a signed note starts with (c2sp.org/signed-note).
SIGNATURE = "\u2014 "


def split_notes(content: str) -> list[str]:
    """The notes of a checkpoint file: each note's text, an empty line, its signature lines;
    notes are separated by one empty line."""
    notes: list[str] = []
    current: list[str] = []
    in_signatures = False
    for line in content.split("\n"):
        if in_signatures and not line.startswith(SIGNATURE):
            notes.append("\n".join(current) + "\n")
            current, in_signatures = [], False
            if not line:
                continue
        if not in_signatures and not line and current:
            in_signatures = True
        current.append(line)
    if any(current):
        notes.append("\n".join(current).rstrip("\n") + "\n")
    return notes


@runtime_checkable
class CheckpointLog(Protocol):
    """Where a ledger's checkpoints are kept."""

    location: str

    def add(self, note: str) -> None:
        """Keep one signed note (durably, when the log is persistent)."""

    def notes(self) -> list[str]:
        """Every note kept, oldest first."""


class FileCheckpointLog:
    """Notes appended to a text file under an exclusive ``flock``, fsynced. ``also``: older
    files of the same log, read but no longer written (a JSONL ledger's checkpoints an older
    version kept beside a symlink to it). ``lock_timeout``: seconds an add waits for the lock
    another process holds (its JSONL ledger's own ``lock_timeout``, else the default; None: no
    bound)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        also: Sequence[str | os.PathLike[str]] = (),
        lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT,
    ) -> None:
        self.path = Path(path)
        self.location = str(path)
        self.also = [Path(p) for p in also]
        self.lock_timeout = bounded(lock_timeout)

    def add(self, note: str) -> None:
        """All or nothing (``appending``): a half note failed every later ``verify``."""
        data = note.encode("utf-8")
        append_locked(
            self.path,
            lambda size: b"\n" + data if size else data,
            what="a checkpoint",
            timeout=self.lock_timeout,
        )

    def notes(self) -> list[str]:
        found: list[str] = []
        for path in [*self.also, self.path]:
            try:
                found += split_notes(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                continue
        return list(dict.fromkeys(found))


class MemoryCheckpointLog:
    """Notes in a list (the in-memory backend's)."""

    def __init__(self) -> None:
        self.location = "memory:"
        self._notes: list[str] = []

    def add(self, note: str) -> None:
        self._notes.append(note)

    def notes(self) -> list[str]:
        return list(self._notes)
