"""File hygiene shared by the backends that keep a ledger in local files (JSONL, SQLite).

Two rules (SPEC 3, issue 11 item 5):

* **No folder is ever created.** A missing folder is usually an unmounted volume or a typo;
  creating it would put the ledger where nobody looks. Opening a ledger there is an
  :class:`EventBackendError` naming the folder.
* **Every file a backend creates is owner-only (0600), whatever the umask.** The mode given to
  ``open(2)`` is only an upper bound (the umask removes bits from it), so a created file is set
  to exactly 0600 with ``fchmod`` before any byte is written. A file that already exists keeps
  its mode: the operator chose it (docs/decisions.md, "Files").

And one rule for names: **every spelling of a ledger file reaches the same sidecars**
(``FileNames``). A symlink, a relative path, ``x/../`` all name one file, so its key store, mode
mark and checkpoints are named after the file itself (every symlink resolved), never after the
path as given; sidecars an older version named after a symlink are found and used. A hard link
cannot be resolved to one name (``refuse_hard_links``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from agent_custody_state.ledger.backend import EventBackendError

T = TypeVar("T")

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


def real_file(path: str | os.PathLike[str]) -> Path:
    """The one name of the file ``path`` names: absolute, every symlink resolved (the file's
    own and its folders'), ``..`` taken physically, as the kernel does."""
    return Path(os.path.realpath(path))


def _aliases(path: str | os.PathLike[str], real: Path) -> tuple[Path, ...]:
    """The symlinks that name ``real``: the path as given and each link it passes through (a
    link to a link), and the links beside the file that resolve to it (``current.jsonl ->
    ledger-2027.jsonl``): the names an older version gave sidecars after."""
    found: list[Path] = []
    hop = Path(os.path.join(os.getcwd(), os.fspath(path)))  # not normalised: ``..`` physically
    for _ in range(40):  # the kernel's own bound on a chain of links
        if not os.path.islink(hop):
            break
        found.append(hop)
        hop = Path(os.path.join(os.path.dirname(hop), os.readlink(hop)))
    with suppress(OSError):
        for entry in os.scandir(real.parent):
            if entry.is_symlink() and entry.name != real.name:
                with suppress(OSError):
                    if real_file(entry.path) == real:
                        found.append(Path(entry.path))
    return tuple(dict.fromkeys(found))


@dataclass(frozen=True)
class FileNames:
    """The names of one ledger file, whatever spelling it was opened by: ``real`` (``real_file``)
    and ``aliases``, the symlinks that name it (read once, at open: a link made later is seen
    by the next open). Sidecars are named after ``real``."""

    real: Path
    aliases: tuple[Path, ...] = ()

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> FileNames:
        real = real_file(path)
        return cls(real, _aliases(path, real))

    def sidecar(self, suffix: str) -> Path:
        """``<file>.<suffix>`` beside the file itself."""
        return self.real.with_name(f"{self.real.name}.{suffix}")

    def legacy(self, suffix: str) -> list[Path]:
        """The ``<link>.<suffix>`` sidecars that exist and are other files than ``sidecar``:
        created through a symlink by a version that named sidecars after the path as given."""
        if not self.aliases:
            return []  # the common case, on every plain write (``modemark``): no system call
        own = real_file(self.sidecar(suffix))
        found = []
        for alias in self.aliases:
            side = alias.with_name(f"{alias.name}.{suffix}")
            if side.exists() and real_file(side) != own:
                found.append(side)
        return found

    def find(self, suffix: str, what: str, location: str) -> Path:
        """The ``suffix`` sidecar to use: the one beside the file; else the one sidecar named
        after a symlink, if there is exactly one (a ledger written through a link by an older
        version). Two or more of them are refused (``EventBackendError`` naming them): one
        ledger must not have two key stores, and which one holds a key cannot be told."""
        own = self.sidecar(suffix)
        found = ([own] if own.exists() else []) + self.legacy(suffix)
        if len(found) > 1:
            named = " and ".join(str(p) for p in found)
            raise EventBackendError(
                f"{location}: the ledger {self.real} has two {what}s, {named} (one named after "
                "a symlink to it, by an older version): keep one, moving what the other holds "
                "into it, then open the ledger again"
            )
        return found[0] if found else own


def names_of(owner: object) -> FileNames:
    """The ``FileNames`` of a backend whose events are one file (its ``path``), read at its
    first use and kept with it."""
    names = owner.__dict__.get("_file_names")
    if names is None:
        names = FileNames.of(owner.path)  # type: ignore[attr-defined]
        owner.__dict__["_file_names"] = names
    return names  # type: ignore[no-any-return]


def refuse_hard_links(path: str | os.PathLike[str], location: str, why: str = "") -> None:
    """Refuse to write a ledger file that has other names (hard links): they cannot be told
    apart from the file itself, so each would have its own sidecars (lock, key store, mode
    mark), and a JSONL forget, which renames a new file over one name, leaves every forgotten
    value in the others. ``why`` replaces that reason in the message where a backend has a
    worse one (SQLite names its journal and WAL after the path: two names corrupt it)."""
    try:
        links = os.stat(path).st_nlink
    except OSError:
        return  # nothing there yet, or an error the open reports
    if links > 1:
        real = real_file(path)
        why = why or (
            "writers through another name would use other sidecars and lock, and a forget "
            "would leave the values it erases under the other names"
        )
        raise EventBackendError(
            f"{location}: the ledger file has {links} names (hard links); {why}. Remove the "
            f"other names (find {real.parent} -samefile {real}) or open it read-only"
        )


class NewFiles:
    """The files a ledger's open creates beside a path that did not exist yet (the ledger
    itself, its lock, journal, WAL, key store, mark), so an open refused part-way (a key store
    in a missing folder, a checkpoint key that does not load) can take them away again and
    leave the folder as it found it. A ledger that existed is never touched."""

    def __init__(self, location: str) -> None:
        path = Path(location)
        self._fresh = "://" not in location and not path.exists() and path.parent.is_dir()
        self._path = path
        # Through a symlink naming no file yet, the file and its sidecars are made where the
        # link points (``FileNames``): those are looked for too.
        self._real = real_file(path) if self._fresh else path
        self._before = set(self._siblings()) if self._fresh else set()

    def _siblings(self) -> list[Path]:
        found: list[Path] = []
        for base in dict.fromkeys([self._path, self._real]):
            with suppress(OSError):  # the folder a link points into may be missing
                found += [p for p in base.parent.iterdir() if p.name.startswith(base.name)]
        return found

    @staticmethod
    def undoing(created: NewFiles | None, opening: Callable[..., T], *args: Any, **kw: Any) -> T:
        """``opening(*args, **kw)``; if it raises (no descriptor left, a full disk), what it
        created beside a new ledger (``created``: its lock, say) is removed first."""
        try:
            return opening(*args, **kw)
        except BaseException:
            if created is not None:
                created.remove()
            raise

    def remove(self) -> None:
        """Remove what the open created (call after the backend was closed), unless another
        process has put events there meanwhile: every file there is then that ledger's (its
        events, its lock), and removing them lost committed events."""
        if not self._fresh or holds_events(self._path) or holds_events(self._real):
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
