"""A JSONL ledger opened read-only (``read_only=True``): what its open may and may not touch.

A read-only open leaves the ledger's folder as it found it, byte for byte and file for file (an
auditor reading a copy, a ledger on a read-only mount): the file must exist (nothing is
created), the ``<file>.lock`` sidecar is used only if it is there, and a torn final line is
ignored, never cut off or recorded (``jsonl_recovery.torn_tail`` with ``exclusive=False``): the
reader sees the complete lines only. Every write section is refused (``JsonlBackend._begin``).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from pathlib import Path

from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.files import open_private


def lock_file(path: Path, lock: Path, location: str, *, read_only: bool) -> int | None:
    """The descriptor of the ledger's lock file ``lock``: created if missing, unless
    ``read_only``; then the ledger ``path`` must exist, and the lock is opened for reading if it
    can be (a shared ``flock`` needs no write access), else None: read without it, as on a
    read-only mount, where no writer can be at work."""
    if not read_only:
        return open_private(lock, os.O_RDWR)[0]
    if not path.is_file():
        raise EventBackendError(
            f"{location}: no such ledger; a read-only open never creates one (check the path)"
        )
    try:
        return os.open(lock, os.O_RDONLY)
    except OSError:
        return None


def refuse_section(read_only: bool, location: str) -> None:
    """Refuse a write section of a backend opened read-only (the ledger refuses its writes
    first; this also stops ``repair`` and any caller of ``transaction`` directly)."""
    if read_only:
        raise EventBackendError(f"{location} is opened read-only; its write sections are refused")


class LockFile:
    """The ledger's lock file (opened by ``lock_file``) and this process's own descriptor of it.

    A child forked after the open shares the parent's open lock file, and ``flock`` then excluded
    neither from the other (each took the lock the other held, and an unlock released both): a
    child appended inside its parent's write section, and two events took one place in the
    chain. So a forked child opens the lock file again, for itself, before its first lock.
    """

    def __init__(self, path: Path, lock: Path, location: str, *, read_only: bool) -> None:
        self._open: Callable[[], int | None] = partial(
            lock_file, path, lock, location, read_only=read_only
        )
        self._location = location
        self._fd = self._open()
        self._pid = os.getpid()

    def fd(self) -> int | None:
        """The descriptor to ``flock`` in this process; None: read without a lock."""
        if self._fd is not None and self._pid != os.getpid():
            fresh = self._open()
            os.close(self._fd)  # this process's copy only: the parent's lock stays
            self._fd, self._pid = fresh, os.getpid()
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def __del__(self) -> None:
        """A ledger dropped without ``close()``: its descriptor was open for the process's
        life (a web worker opening one per request ran out of them). Released now, and said,
        as Python says of an unclosed file."""
        if getattr(self, "_fd", None) is not None:
            with suppress(Exception):  # at interpreter exit ``warnings`` may be gone
                warnings.warn(
                    f"ledger {self._location} was not closed; close it (ledger.close(), or "
                    "`with Ledger(...) as ledger:`)",
                    ResourceWarning,
                    stacklevel=1,
                )
            self.close()
