"""File hygiene shared by the backends that keep a ledger in local files (JSONL, SQLite).

Two rules (SPEC 3, issue 11 item 5):

* **No folder is ever created.** A missing folder is usually an unmounted volume or a typo;
  creating it would put the ledger where nobody looks. Opening a ledger there is an
  :class:`EventBackendError` naming the folder.
* **Every file a backend creates is owner-only (0600), whatever the umask.** The mode given to
  ``open(2)`` is only an upper bound (the umask removes bits from it), so a created file is set
  to exactly 0600 with ``fchmod`` before any byte is written. A file that already exists keeps
  its mode: the operator chose it (docs/decisions.md, "Files").
"""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

from agent_custody_state.ledger.backend import EventBackendError

#: The mode of every file a backend creates.
PRIVATE_MODE = 0o600


def check_folder(path: Path, location: str) -> None:
    """Refuse a ledger whose folder is missing (or not a folder); never create it."""
    folder = path.parent
    if not folder.exists():
        raise EventBackendError(
            f"{location}: the folder {folder} does not exist; create it first (a ledger is "
            "never created in a missing folder)"
        )
    if not folder.is_dir():
        raise EventBackendError(
            f"{location}: {folder} is not a folder; name a ledger file inside an existing folder"
        )


def open_private(path: Path, flags: int) -> tuple[int, bool]:
    """Open ``path`` with ``flags`` (``os.O_*``, without ``O_CREAT``), creating it 0600 if missing.

    Returns the descriptor and whether this call created the file. An existing file is opened
    as it is, its mode untouched.
    """
    flags &= ~(os.O_CREAT | os.O_EXCL)
    for attempt in range(3):
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
        except FileExistsError:
            try:
                return os.open(path, flags), False
            except FileNotFoundError:
                # Removed between the two calls (another process): create it after all. A
                # dangling symlink lands here every time, hence the bound.
                if attempt == 2:
                    raise
                continue
        try:
            os.fchmod(fd, PRIVATE_MODE)  # the umask may have removed bits, or (0o000) none
        except BaseException:
            os.close(fd)
            raise
        return fd, True
    raise AssertionError("unreachable")  # the loop returns or raises


def create_private(path: Path) -> bool:
    """Create ``path`` as an empty 0600 file if nothing is there; True if this call created it.

    For engines that create their files themselves (SQLite): the file exists, owner-only, before
    the engine opens it. Whatever is already at ``path`` is left alone, unopened.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, PRIVATE_MODE)
    finally:
        os.close(fd)
    return True


class NewFiles:
    """The files a ledger's open creates beside a path that did not exist yet (the ledger
    itself, its lock, journal, WAL, key store, mark), so an open refused part-way (a key store
    in a missing folder, a checkpoint key that does not load) can take them away again and
    leave the folder as it found it. A ledger that existed is never touched."""

    def __init__(self, location: str) -> None:
        path = Path(location)
        self._fresh = "://" not in location and not path.exists() and path.parent.is_dir()
        self._path = path
        self._before = set(self._siblings()) if self._fresh else set()

    def _siblings(self) -> list[Path]:
        name = self._path.name
        return [p for p in self._path.parent.iterdir() if p.name.startswith(name)]

    def remove(self) -> None:
        """Remove what the open created (call after the backend was closed), unless another
        process has put events there meanwhile: every file there is then that ledger's (its
        events, its lock), and removing them lost committed events."""
        if not self._fresh or holds_events(self._path):
            return
        for created in set(self._siblings()) - self._before:
            with suppress(OSError):  # a folder, or gone already: nothing of ours to take back
                created.unlink()


def holds_events(path: Path) -> bool:
    """Whether the ledger file ``path`` holds an event: a JSONL line (an open writes none), or a
    row of a SQLite ledger's events table (or a ``-wal`` beside it: a connection is open). In
    doubt, True: keeping a file is the safe mistake."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 16)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    if not head.startswith(b"SQLite format 3\x00"):
        return bool(head.strip())
    if os.path.exists(f"{path}-wal"):
        return True
    import sqlite3
    from urllib.parse import quote

    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?immutable=1", uri=True)
        try:
            tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
            if ("events",) not in tables:
                return False
            return conn.execute("SELECT 1 FROM events LIMIT 1").fetchone() is not None
        finally:
            conn.close()
    except sqlite3.Error:
        return True
