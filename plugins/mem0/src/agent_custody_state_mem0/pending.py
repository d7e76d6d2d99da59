"""The platform add events a put started and has not seen settle, kept across a restart.

An add the platform answers ``PENDING`` creates its memory when mem0's worker gets to it, maybe
after the put stopped waiting, maybe after the server restarted. Until it settles, the
``factId`` listing cannot show that memory, so ``held_ids`` and ``verify_removed`` must know the
event is still out there. ``PendingAdds`` records each such event (fact id, event id) before the
put waits for it and drops it once it succeeded or failed.

With a ``path`` (the ``pending_file`` setting, or its default beside mem0's own files) the
record is a small JSONL sidecar, one ``{"factId", "eventId", "since"}`` line per pending add:

* written before the wait, atomically and durably (a 0600 temporary file, fsynced, renamed into
  place, the folder fsynced), so a crash or ``kill -9`` during the wait does not lose it;
* read at every check (never cached), so a restarted server, or a ``sweep`` running beside a
  server on the same store, sees the events the other process started;
* changed under an exclusive ``flock`` on ``<path>.lock``, so two processes never drop each
  other's lines; the file is removed once nothing is pending. The lock is waited for at
  most ``timeout`` seconds (60 by default, the core's ``DEFAULT_LOCK_TIMEOUT``): another
  process stopped while holding it (a debugger, ``SIGSTOP``, a hung mount) made every put of
  this store in every other process wait forever. Past the bound the call is refused with
  ``PendingLockTimeout`` (an ``OSError`` naming the file and the holder; the file unchanged),
  which the store reports as its ``StoreError``, as it does a file it cannot write: the put
  fails, its event counted in this process only; a start-up check fails naming the file.

Without one (the local ``Memory``, which never answers ``PENDING``; a store built directly)
the record is in-process only. Either way the in-process copy is kept too: an event whose
line could not be written still counts here until it settles.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_custody_state.plugin import (
    DEFAULT_LOCK_TIMEOUT,
    PRIVATE_MODE,
    LockWaitTimeout,
    lock_exclusive,
    lock_held_by,
    lock_timeout,
    open_private,
)

_KEYS = ("factId", "eventId")


class PendingFileError(OSError):
    """The sidecar cannot be read as pending add records (edited, or damaged on disk)."""


class PendingLockTimeout(LockWaitTimeout):
    """The sidecar's lock was not granted within the bound; the text names the file, the
    holder and what to do."""

    def __str__(self) -> str:
        return str(self.strerror)


class PendingAdds:
    """Add events by fact id, in this process and (with ``path``) in the sidecar file.
    ``timeout``: seconds its lock is waited for (None: no bound)."""

    def __init__(
        self, path: Path | None = None, timeout: float | None = DEFAULT_LOCK_TIMEOUT
    ) -> None:
        self.path = path
        self.lock_timeout = lock_timeout(timeout)  # a number of seconds, or None
        self._memory: dict[str, str] = {}  # event id -> fact id
        self._lock = threading.Lock()

    def check(self) -> None:
        """At build: read the sidecar, under its lock (created now), so that a damaged file
        or a folder this process cannot write stops startup rather than every put after its
        add reached the platform."""
        if self.path is None:
            return
        with self._locked():
            self._read()

    def record(self, fact_id: str, event_id: str) -> None:
        """Remember ``event_id`` of ``fact_id``; with a path, durably before returning."""
        with self._lock:
            self._memory[event_id] = fact_id
        if self.path is None:
            return
        with self._locked():
            lines = [entry for entry in self._read() if entry["eventId"] != event_id]
            since = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
            lines.append({"factId": fact_id, "eventId": event_id, "since": since})
            self._write(lines)

    def settle(self, event_id: str) -> None:
        """Forget ``event_id``: it succeeded or failed, so the listing answers for it now."""
        with self._lock:
            self._memory.pop(event_id, None)
        if self.path is None:
            return
        with self._locked():
            lines = self._read()
            kept = [entry for entry in lines if entry["eventId"] != event_id]
            if len(kept) != len(lines):
                self._write(kept)

    def of_fact(self, fact_id: str) -> list[str]:
        """The event ids of ``fact_id`` not seen settling, this process's and the sidecar's."""
        with self._lock:
            events = [event for event, owner in self._memory.items() if owner == fact_id]
        for entry in self._read():
            if entry["factId"] == fact_id and entry["eventId"] not in events:
                events.append(entry["eventId"])
        return events

    # -- the file ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        assert self.path is not None
        fd, _ = open_private(Path(f"{self.path}.lock"), os.O_RDWR)
        try:
            try:
                lock_exclusive(fd, self.lock_timeout)
            except LockWaitTimeout:
                raise PendingLockTimeout(
                    errno.ETIMEDOUT,
                    f"the pending add events file {self.path} is locked ({self.path}.lock) by "
                    f"{lock_held_by(fd)}, which did not release it within {self.lock_timeout:g}s; "
                    "if that process is stuck (stopped, hung on a mount), resume or end it; "
                    "the file is unchanged",
                ) from None
            yield
        finally:
            os.close(fd)  # releases the lock

    def _read(self) -> list[dict[str, Any]]:
        if self.path is None:
            return []
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        entries = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                entry = None
            if not isinstance(entry, dict) or not all(
                isinstance(entry.get(key), str) and entry[key] for key in _KEYS
            ):
                raise PendingFileError(
                    f"{self.path}, line {number}: not a pending add record (a JSON object with "
                    "string factId and eventId); repair or delete the line (a deleted one "
                    "loses the check for that add)"
                )
            entries.append(entry)
        return entries

    def _write(self, entries: list[dict[str, Any]]) -> None:
        assert self.path is not None
        folder = self.path.parent
        if not entries:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            _sync_folder(folder)
            return
        temporary = Path(f"{self.path}.{os.getpid()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_MODE)
        try:
            os.fchmod(fd, PRIVATE_MODE)  # owner-only whatever the umask
            with open(fd, "w", encoding="utf-8", closefd=False) as handle:
                handle.writelines(json.dumps(e, separators=(",", ":")) + "\n" for e in entries)
                handle.flush()
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        os.close(fd)
        try:
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        _sync_folder(folder)


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
