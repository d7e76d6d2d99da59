"""How the SQLite backend connects, and what a read-only open (``read_only=True``) changes.

A read-only open must leave the folder as it found it (an auditor reading a copy, a ledger on a
read-only mount). The file must exist (nothing is created) and is opened through a ``file:`` URI
with ``mode=ro``; the shared layers add ``PRAGMA query_only`` and never create or migrate the
table (``agent_custody_state_sql.readonly``).

WAL is the catch: a WAL database is read through its ``-wal`` and the ``-shm`` index, and a
read-only connection creates them when they are missing (and, not being allowed to write, never
removes them). So:

* when no ``-wal`` is there (no writer has the file open, and the last one to close
  checkpointed it into the file) and no ``-journal`` with content (``unwritten``), the file
  is opened ``immutable=1``: read without the WAL or any lock, creating nothing. The price: a
  writer that opens it meanwhile is seen only from the next read on (below), and must not
  checkpoint into it during a read, which SQLite does after about a thousand pages of writes
  or when the writer closes; keep such an open short-lived, as an audit or a command line is;
* when a ``-wal`` is there (a writer is connected, or crashed), it is read through the WAL,
  ``mode=ro``, which sees other processes' commits; SQLite uses the ``-shm`` beside it, and
  creates it if it is missing and the folder may be written. In a folder that may not be
  written, with a ``-wal`` but no ``-shm``, SQLite cannot read: the error says so.

Which of the two is decided at each connect, not once at the open (``connect_read_only``), and
an immutable connection remembers the file as it found it (``file_state``): before a read that
starts outside a snapshot, the backend compares (``SqliteBackend._run``) and, if a writer has
been there since (a ``-wal`` appeared, or the file changed), reads on a new connection. An
immutable connection never looks at the file again (its page cache is trusted for ever), so
without this a long-lived read-only process went on returning a value another process had
forgotten, compacted and certified erased. Once through the WAL it stays so: the writer, seeing
this connection, leaves its ``-wal`` and ``-shm`` when it closes (the next writer's open
checkpoints them), so a read-only open that a writer came and went beside leaves them too.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from agent_custody_state.plugin import EventBackendError


def connector(
    path: Path, location: str, timeout: float, *, read_only: bool
) -> Callable[..., sqlite3.Connection]:
    """The function that opens a connection to ``path`` (keyword arguments: ``sqlite3``'s, and
    for a read-only open ``immutable``: see ``connect_read_only``)."""
    if not read_only:
        return partial(sqlite3.connect, str(path), timeout=timeout)
    if not path.is_file():
        raise EventBackendError(
            f"{location}: no such ledger; a read-only open never creates one (check the path)"
        )
    real = os.path.realpath(path)  # SQLite keeps the -wal beside the file a link names
    # A module-level function bound with ``partial``: picklable, so ``verify``'s worker
    # processes can open the ledger the same way (``_reader``).
    return partial(connect_read_only, real, location, timeout)


#: What ``file_state`` compares: whether a ``-wal`` is there, and the file's inode, size,
#: modification and change times (None: the file is gone).
FileState = tuple[bool, int, int, int, int] | None


def file_state(real: str) -> FileState:
    """The state of the database file ``real`` (a resolved path) that a writer changes: a
    writer's connection creates the ``-wal``; a checkpoint, or a commit in rollback-journal
    mode (a file whose journal mode another program changed), rewrites the file."""
    wal = os.path.exists(f"{real}-wal")
    try:
        st = os.stat(real)
    except OSError:
        return None
    return (wal, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def unwritten(real: str, state: FileState) -> bool:
    """Whether the file ``real``, in ``state``, may be read ``immutable=1``: no ``-wal`` (no
    writer has it open) and no ``-journal`` with content. A writer in rollback-journal mode
    that dies part-way leaves its ``-journal`` "hot"; an immutable read ignores it, and so read
    the half-written change as if it had committed, where ``mode=ro`` sees the journal and
    refuses (only a writer may roll it back)."""
    if state is None or state[0]:
        return False
    try:
        return os.stat(f"{real}-journal").st_size == 0
    except OSError:
        return True


def connect_read_only(
    real: str,
    location: str,
    timeout: float,
    *,
    immutable: bool | None = None,
    **options: Any,
) -> sqlite3.Connection:
    """A read-only connection to ``real``: ``immutable=1`` when ``immutable``, or when it is
    None and the file is ``unwritten`` now, else ``mode=ro`` (through the WAL, if any)."""
    if immutable is None:
        immutable = unwritten(real, file_state(real))
    uri = Path(real).as_uri() + ("?mode=ro&immutable=1" if immutable else "?mode=ro")
    try:
        connection: sqlite3.Connection = sqlite3.connect(uri, uri=True, timeout=timeout, **options)
        return connection
    except sqlite3.Error as exc:
        raise EventBackendError(
            f"{location}: cannot open it read-only ({exc}); a database in WAL mode with a "
            f"-wal file needs its -shm file, or a folder where SQLite may create it"
        ) from None
