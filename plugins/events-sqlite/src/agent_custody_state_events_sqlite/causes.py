"""What SQLite's own words leave out when it cannot open, read or write a ledger's files.

SQLite says "unable to open database file" or "attempt to write a readonly database" and names
no file: the database, its ``-wal``, ``-shm`` and ``-journal`` and the folder they are created in
all count, and the usual causes (a ``-wal`` or ``-shm`` left by a process of another user, a
folder mounted read-only, a rollback journal a crashed writer left) look alike. ``explain`` adds
what this process can see of the cause, from the file system, only once SQLite has refused.
"database is locked" is told what it means here: the busy timeout ran out, and which process
holds the write lock when ``/proc/locks`` tells it (``holder``): in WAL mode, SQLite's write lock
is a POSIX lock on byte ``WAL_WRITE_LOCK`` of the ``-shm`` file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from agent_custody_state.plugin import locks_on

#: The byte of the ``-shm`` file SQLite locks for a WAL writer (``WALINDEX_LOCK_OFFSET``, 120,
#: plus ``WAL_WRITE_LOCK``, 0).
WAL_WRITE_LOCK = 120


#: SQLite's messages of a refused open, read or write of a file (``SQLITE_CANTOPEN``,
#: ``SQLITE_READONLY`` and its extended codes).
_REFUSALS = ("unable to open database file", "readonly database")


def _owner(st: os.stat_result) -> str:
    return f"owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}"


def explain(real: Path, text: str, *, read_only: bool, busy_timeout: float) -> str:
    """``text`` (SQLite's message about the database ``real``, a resolved path), with the causes
    found added in parentheses; unchanged when it is not a refused file or none is found."""
    if "database is locked" in text:
        pid = holder(real)
        by = "another connection" if pid is None else _process(pid)
        return (
            f"{text} ({by} kept it locked longer than the busy timeout, {busy_timeout:g} s: "
            "try again, or open the ledger with a longer busy_timeout; a holder that is stopped "
            "or stuck must be resumed or ended)"
        )
    if not any(r in text for r in _REFUSALS):
        return text
    causes: list[str] = []
    journal = Path(f"{real}-journal")
    if read_only and journal.is_file() and journal.stat().st_size > 0:
        causes.append(
            f"{journal.name} is there: a writer in rollback-journal mode (another program, or "
            "one that changed the journal mode) stopped part-way, and only a writable open "
            "rolls its change back; open the ledger once for writing"
        )
    need = os.R_OK if read_only else os.R_OK | os.W_OK
    missing = False
    for path in (real, Path(f"{real}-wal"), Path(f"{real}-shm")):
        try:
            st = path.stat()
        except OSError:
            missing = True  # not there (or not visible): SQLite may have to create it
            continue
        if not os.access(path, need):
            causes.append(f"this process may not {_verb(read_only)} {path} ({_owner(st)})")
    folder = real.parent
    if missing and not read_only and not os.access(folder, os.W_OK | os.X_OK):
        causes.append(
            f"this process may not create files in {folder}, where SQLite keeps the -wal and "
            "-shm beside the database (to only read the ledger, open it read-only)"
        )
    return f"{text} ({'; '.join(causes)})" if causes else text


def _verb(read_only: bool) -> str:
    return "read" if read_only else "read and write"


def holder(real: Path) -> int | None:
    """The process holding the WAL write lock of the database ``real``, as ``/proc/locks``
    lists it (Linux): a POSIX write lock on the ``-shm`` file over ``WAL_WRITE_LOCK``; None when
    it cannot be told."""
    try:
        st = Path(f"{real}-shm").stat()
    except OSError:
        return None
    for lock in locks_on(st):
        covers = lock.start <= WAL_WRITE_LOCK and (lock.end is None or lock.end >= WAL_WRITE_LOCK)
        if lock.kind == "POSIX" and lock.mode == "WRITE" and covers:
            return lock.pid
    return None


def _process(pid: int) -> str:
    return "another connection of this process" if pid == os.getpid() else f"process {pid}"
