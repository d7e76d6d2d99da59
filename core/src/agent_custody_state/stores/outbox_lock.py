"""The outbox's file opened and locked: one process (and, by ``Outbox``'s own lock, one thread)
at a time reads or appends it.

Every read, owe and settle holds an exclusive ``flock`` on the file itself for a short section
(a line written and fsynced, or the file read). A process stopped while holding it (a debugger,
``SIGSTOP``, a hung mount) made every other process's owe, settle and resume wait forever: the
wait is now bounded (``lockwait``, queued in the kernel as a blocking ``flock``, so a busy,
healthy holder is still waited for). Past the bound the call is refused with
``lockwait.LockWaitTimeout``, an ``OSError`` the outbox words as it words a full disk: an owe
or a read fails naming the file, the holder and the bound, nothing changed; a settle is logged
and left owed, as one lost in a crash.

A file another process removed (emptied) while this one waited is opened again: the lock held
is on the file the path names now.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent_custody_state.backends.jsonl_recovery import fsync_dir
from agent_custody_state.ledger.files import open_private
from agent_custody_state.lockwait import exclusive


@contextmanager
def locked(path: Path, create: bool, timeout: float | None) -> Iterator[int | None]:
    """The file ``path`` (``O_RDWR | O_APPEND``), exclusively locked, waited for at most
    ``timeout`` seconds (None: no bound); None when it does not exist and ``create`` is false.
    Created private (0600, its folder fsynced) when ``create``."""
    while True:
        try:
            if create:
                fd, created = open_private(path, os.O_RDWR | os.O_APPEND)
            else:
                fd, created = os.open(path, os.O_RDWR | os.O_APPEND), False
        except FileNotFoundError:
            if create:
                raise
            yield None
            return
        try:
            exclusive(fd, timeout)
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                continue  # removed (emptied) by another process: open it again
            if created:
                fsync_dir(path.parent)  # the entry must survive a power cut
            yield fd
            return
        finally:
            os.close(fd)
