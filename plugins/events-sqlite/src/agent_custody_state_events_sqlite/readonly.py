"""How the SQLite backend connects, and what a read-only open (``read_only=True``) changes.

A read-only open must leave the folder as it found it (an auditor reading a copy, a ledger on a
read-only mount). The file must exist (nothing is created) and is opened through a ``file:`` URI
with ``mode=ro``; the shared layers add ``PRAGMA query_only`` and never create or migrate the
table (``agent_custody_state_sql.readonly``).

WAL is the catch: a WAL database is read through its ``-wal`` and the ``-shm`` index, and a
read-only connection creates them when they are missing (and, not being allowed to write, never
removes them). So:

* when no ``-wal`` is there (no writer has the file open, and the last one to close
  checkpointed it into the file), the file is opened ``immutable=1``: read without the WAL or
  any lock, creating nothing. The price: this backend reads the file as it was, and a writer
  that opens it meanwhile is not seen (reopen to see it) and must not checkpoint into it during
  a read, which SQLite does after about a thousand pages of writes or when the writer closes;
  keep such an open short-lived, as an audit or a command line is;
* when a ``-wal`` is there (a writer is connected, or crashed), it is read through the WAL,
  ``mode=ro``, which sees other processes' commits; SQLite uses the ``-shm`` beside it, and
  creates it if it is missing and the folder may be written. In a folder that may not be
  written, with a ``-wal`` but no ``-shm``, SQLite cannot read: the error says so.
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
    """The function that opens a connection to ``path`` (keyword arguments: ``sqlite3``'s)."""
    if not read_only:
        return partial(sqlite3.connect, str(path), timeout=timeout)
    if not path.is_file():
        raise EventBackendError(
            f"{location}: no such ledger; a read-only open never creates one (check the path)"
        )
    real = Path(os.path.realpath(path))  # SQLite keeps the -wal beside the file a link names
    wal = Path(f"{real}-wal")
    uri = real.as_uri() + ("?mode=ro" if wal.exists() else "?mode=ro&immutable=1")
    # A module-level function bound with ``partial``: picklable, so ``verify``'s worker
    # processes can open the ledger the same way (``_reader``).
    return partial(_connect_read_only, uri, location, timeout)


def _connect_read_only(
    uri: str, location: str, timeout: float, **options: Any
) -> sqlite3.Connection:
    try:
        connection: sqlite3.Connection = sqlite3.connect(uri, uri=True, timeout=timeout, **options)
        return connection
    except sqlite3.Error as exc:
        raise EventBackendError(
            f"{location}: cannot open it read-only ({exc}); a database in WAL mode with a "
            f"-wal file needs its -shm file, or a folder where SQLite may create it"
        ) from None
