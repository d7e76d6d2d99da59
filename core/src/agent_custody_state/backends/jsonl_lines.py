"""A JSONL ledger's lines as stored: streamed (what ``agent-custody-memory verify`` reads), and
rewritten with some lines replaced (what a forget writes to its temporary), and the file a
backend has indexed, held open (``HeldFile``).

The file is opened under the shared lock (no writer is half-way through an append) and read up to
the size it had then, in large chunks, without the lock: appends only add bytes after that point,
and a forget renames a new file over the old one, which the open descriptor keeps reading. So the
lines are one consistent snapshot, and a ledger of millions of lines is read in constant memory;
unless the forget empties the old file under the stream (so that no descriptor keeps the value
it erased), which ends the stream with an error rather than a ledger cut short.
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from agent_custody_state.backends import jsonl_lock
from agent_custody_state.ledger.backend import EventBackendError

CHUNK = 1 << 20


class CutShort(EventBackendError):
    """A stream of the file ended before the size it had when it was opened: a forget in
    another process replaced and emptied it (or a writer cut a torn line off). Reading it
    again reads the ledger as it is now."""


class HeldFile:
    """The ledger file a backend has indexed, kept open so that its identity means something.

    A backend tells whether its path still names the file it has read by the (device, inode)
    pair. A forget (in any process) renames a new file over the ledger, and the old file's inode
    is freed once nothing holds it: a later forget's new file may then get that very number, and
    a backend that only remembered the number would take the rewritten ledger, whose lines have
    moved, for the one it had read, and read on from a stale offset (mid-line). Holding the file
    open keeps its inode taken, so an equal pair is the same file; reads go through the held
    descriptor. A forget empties the file it replaced (``jsonl_files._empty_replaced``), so a
    held file that is no longer the ledger keeps its number taken but none of its values.
    """

    def __init__(self) -> None:
        self.fd: int | None = None
        self.ident: tuple[int, int] | None = None

    def names(self, st: os.stat_result) -> bool:
        """Whether ``st`` (a ``stat`` of the path) is the held file."""
        return self.ident == (st.st_dev, st.st_ino)

    def hold(self, path: Path) -> os.stat_result:
        """Hold the file ``path`` names now (the caller's lock keeps it from being replaced
        meanwhile), letting go of the one held before; its ``fstat``."""
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO put there must not block
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise EventBackendError(f"{path} is no longer a regular file; a ledger is one")
        self.release()
        self.fd, self.ident = fd, (st.st_dev, st.st_ino)
        return st

    def read(self, start: int, size: int) -> bytes:
        """``size`` bytes of the held file from ``start`` (fewer at its end)."""
        assert self.fd is not None
        parts: list[bytes] = []
        while size > 0:
            chunk = os.pread(self.fd, size, start)
            if not chunk:
                break
            parts.append(chunk)
            start += len(chunk)
            size -= len(chunk)
        return b"".join(parts)

    def release(self) -> None:
        if self.fd is not None:
            fd, self.fd, self.ident = self.fd, None, None
            os.close(fd)

    __del__ = release  # a backend dropped without ``close()`` (``LockFile.__del__`` warns)


def stored_lines(path: Path, lock_fd: int | None) -> Iterator[bytes]:
    """The non-blank lines of ``path`` (without their newline), a final line without one
    included (a torn or hand-written last line: the verifier judges it). ``lock_fd`` is the
    ledger's lock file, if it has one."""
    return shared_lines(path, lambda: flocked(lock_fd, path))


@contextmanager
def flocked(lock_fd: int | None, path: Path) -> Iterator[None]:
    """The shared ``flock`` on the lock file ``lock_fd`` (none: nothing) of the ledger ``path``,
    for a read, waited for at most ``jsonl_lock.DEFAULT_LOCK_TIMEOUT`` as a backend's is."""
    if lock_fd is None:
        yield
        return
    lock = Path(f"{path}.lock")
    timeout = jsonl_lock.DEFAULT_LOCK_TIMEOUT
    jsonl_lock.take(lock_fd, fcntl.LOCK_SH, timeout=timeout, lock=lock, location=str(path))
    try:
        yield
    finally:
        fcntl.flock(lock_fd, fcntl.LOCK_UN)


def shared_lines(
    path: Path, shared: Callable[[], AbstractContextManager[object]]
) -> Iterator[bytes]:
    """``stored_lines``, the file opened and its size taken inside ``shared()`` (a backend's
    own section: its lock file is shared with its write sections)."""
    with shared():
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return
        size = os.fstat(fd).st_size
    try:
        rest = b""
        left = size
        while left > 0:
            chunk = os.read(fd, min(CHUNK, left))
            if not chunk:
                # Cut short under the stream: a forget in another process replaced the file and
                # emptied this one (``jsonl_files._empty_replaced``), or a writer cut a torn
                # line off. The lines so far are no whole ledger.
                raise CutShort(
                    f"{path} was cut short while it was being read (rewritten by a forget in "
                    "another process, or a torn last line cut off); read it again"
                )
            left -= len(chunk)
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                if line.strip():
                    yield line
        if rest.strip():
            yield rest
    finally:
        os.close(fd)


def replace_lines(
    current: bytes, offsets: Sequence[int], new: Mapping[int, bytes]
) -> tuple[bytearray, list[int]]:
    """``current`` (a ledger's bytes, every line ending in a newline) with the lines starting at
    the offsets in ``new`` replaced by its values, and every line's offset in the result."""
    out = bytearray()
    new_offsets: list[int] = []
    cursor = 0
    for start in offsets:
        nl = current.index(b"\n", start)
        out += current[cursor:start]
        new_offsets.append(len(out))
        out += new[start] if start in new else current[start : nl + 1]
        cursor = nl + 1
    out += current[cursor:]
    return out, new_offsets
