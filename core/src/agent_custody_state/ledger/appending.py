"""Appending to a sidecar file all or nothing, when the disk may be full or failing.

A sidecar that grows by appends (the checkpoint notes beside a ledger, the outbox of owed store
removals) must never keep half of what a failed append wrote: a full disk (``ENOSPC``), a file
size limit (``EFBIG``) or a short write leaves a prefix of the record, and a failed ``fsync``
(``EIO``) leaves a record nobody was told was written. A half checkpoint note made every later
``verify`` fail on it ("a checkpoint cannot be read"), with no way back but editing the file.

So ``append_or_undo`` writes every byte, fsyncs, and on any ``OSError`` cuts the file back to its
length before the append (fsynced) and raises; ``failure`` words the error as every sidecar's
error should: what could not be done, the file, and the cause as the system names it (``No space
left on device``, ``File too large``, ``Too many open files``), never a bare ``[Errno 28]``.

``append_locked`` waits a bounded time for the file's lock (``lockwait``): a process stopped
while holding it made every later append wait forever; past the bound the append is refused,
naming the holder and the bound, with nothing written.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from agent_custody_state.ledger.errors import EventBackendError
from agent_custody_state.lockwait import DEFAULT_LOCK_TIMEOUT, exclusive


def cause(exc: OSError) -> str:
    """The system's words for ``exc`` (``No space left on device``), without errno or path."""
    return exc.strerror or str(exc) or type(exc).__name__


def failure(doing: str, path: str | os.PathLike[str], exc: OSError, after: str) -> str:
    """``could not <doing> <path>: <cause>; <after>``: one line naming the file and the cause."""
    return f"could not {doing} {os.fspath(path)}: {cause(exc)}; {after}"


def append_or_undo(fd: int, data: bytes, *, sync: bool = True) -> int:
    """Append ``data`` to ``fd`` (opened ``O_APPEND``) in full, fsynced if ``sync``; returns the
    file's length before. On ``OSError`` the file is cut back to that length (best effort: a
    disk that refuses that too keeps the bytes) and the error is raised."""
    before = os.fstat(fd).st_size
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    except OSError:
        with suppress(OSError):
            os.ftruncate(fd, before)
            os.fsync(fd)
        raise
    return before


def append_locked(
    path: Path,
    make: Callable[[int], bytes],
    *,
    what: str,
    mode: int = 0o644,
    timeout: float | None = DEFAULT_LOCK_TIMEOUT,
) -> None:
    """Append ``make(length of the file now)`` to ``path`` (created with ``mode`` if missing)
    under an exclusive ``flock``, waited for at most ``timeout`` seconds (``lockwait``; None: no
    bound), fsynced, all or nothing (``append_or_undo``). ``EventBackendError`` naming ``what``,
    the file and the cause (a full disk, the process holding the lock past the bound) if it
    cannot."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)
    except OSError as exc:
        raise EventBackendError(
            failure(f"add {what} to", path, exc, "nothing was written")
        ) from exc
    try:
        exclusive(fd, timeout)
        append_or_undo(fd, make(os.fstat(fd).st_size))
    except OSError as exc:
        raise EventBackendError(
            failure(f"add {what} to", path, exc, "nothing was written")
        ) from exc
    finally:
        os.close(fd)
