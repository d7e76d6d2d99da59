"""The settings every connection of the SQLite backend gets (SPEC 3: WAL, ``synchronous=FULL``,
``secure_delete``), and the journal mode asked without tripping over another opener.

``journal_size_limit``: a WAL grows without bound while another connection holds an old read
snapshot (no checkpoint may restart it), and SQLite then reuses the file from its start but
never shrinks it: after one long read (a backup, a long ``verify``) beside busy writers, a WAL
twenty times the database stayed at that size until the last connection closed. With the limit,
SQLite truncates it back to ``WAL_SIZE_LIMIT`` at the next restart.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from agent_custody_state.plugin import EventBackendError

#: Bytes a WAL is cut back to when it restarts: four times its usual size (SQLite checkpoints
#: at 1,000 pages, 4 MiB), so an ordinary ledger never pays the truncation.
WAL_SIZE_LIMIT = 16 * 1024 * 1024


def journal_mode(cur: sqlite3.Cursor, ask: str, busy_timeout: float) -> Any:
    """Ask (or set) the journal mode, waiting out another process doing the same.

    Two processes opening a new file at once both turn it to WAL; each holds a shared lock and
    wants the exclusive one, and SQLite answers one of them "database is locked" at once, without
    the busy handler (waiting could deadlock). The other finishes the switch in milliseconds, so
    the refused one asks again, for up to the busy timeout.
    """
    deadline = time.monotonic() + busy_timeout
    pause = 0.005
    while True:
        try:
            return cur.execute(ask).fetchone()[0]
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def apply(
    connection: Any, location: str, *, read_only: bool, busy_timeout: float, cache_kib: int
) -> None:
    """Set up a new driver ``connection`` of the ledger at ``location``."""
    cur = connection.cursor()
    try:
        # A read-only open reads in the mode the file is in: asking WAL would write.
        ask = "PRAGMA journal_mode" if read_only else "PRAGMA journal_mode=WAL"
        mode = journal_mode(cur, ask, busy_timeout)
        if str(mode).lower() != "wal" and not read_only:
            raise EventBackendError(
                f"{location}: SQLite refused WAL mode (got {mode!r}); the ledger needs "
                "a local file system that supports shared memory"
            )
        cur.execute("PRAGMA synchronous=FULL")
        cur.execute("PRAGMA secure_delete=ON")
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        cur.execute(f"PRAGMA cache_size=-{int(cache_kib)}")
        cur.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
    finally:
        cur.close()
