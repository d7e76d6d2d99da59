"""The JSONL ledger file itself: what its path may name, and how a forget replaces it.

* The path names a regular file, or nothing yet. A folder, FIFO, socket or device is refused at
  open with a message saying so, before anything is created or read (a FIFO would block the
  open forever, under the ledger's lock; a folder failed with a raw ``IsADirectoryError``).
* A forget writes the ledger's new contents to a temporary beside the file, fsyncs it and
  renames it over the file. Through a symlink, the file replaced is the one the link points to:
  renaming over the link itself turned the link into a plain copy and left every value, the
  forgotten one included, in the file it had pointed to. The caller fsyncs the folder of the
  file returned. A file with other names (hard links) is not replaced: they would keep every
  value the forget erases (``files.refuse_hard_links``; the open refuses such a file too).
* The file replaced is emptied once it has no name left (``_empty_replaced``): another process
  that has the ledger open holds it (``HeldFile``) until its next read, and a reader idle for
  hours (a memory server) kept the forgotten value in a file anyone with its descriptor could
  read (``/proc/<pid>/fd``), its blocks never reclaimed.
"""

from __future__ import annotations

import errno
import os
import stat
from contextlib import suppress
from pathlib import Path

from agent_custody_state.backends.jsonl_recovery import keep_mode, remove_stale_temps, write_all
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.checkpoints import FileCheckpointLog
from agent_custody_state.ledger.files import FileNames, open_private, refuse_hard_links
from agent_custody_state.lockwait import DEFAULT_LOCK_TIMEOUT


def check_regular(path: Path, location: str) -> None:
    """Refuse a ledger path that names something other than a regular file (through symlinks)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # before any sidecar is made beside it
            raise EventBackendError(
                f"{location} is a loop of symlinks (each names another); name the file itself"
            ) from None
        return  # nothing there yet, or an error the open reports
    if not stat.S_ISREG(st.st_mode):
        what = (
            "a folder"
            if stat.S_ISDIR(st.st_mode)
            else "not a regular file (a FIFO, socket or device)"
        )
        raise EventBackendError(
            f"{location} is {what}; a JSONL ledger is a regular file: name a file"
        )


def checkpoint_log(
    path: Path, names: FileNames | None = None, lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT
) -> FileCheckpointLog:
    """A JSONL ledger's own checkpoints: ``<file>.checkpoints`` beside the file itself, whatever
    spelling ``path`` is, and those an older version kept beside a symlink to it (read only);
    an add waits for the file's lock as the ledger's own ``lock_timeout`` says."""
    names = names if names is not None else FileNames.of(path)
    return FileCheckpointLog(
        names.sidecar("checkpoints"), also=names.legacy("checkpoints"), lock_timeout=lock_timeout
    )


def target_of(path: Path) -> Path:
    """The file ``path`` names: itself, or through a symlink the file the link resolves to."""
    return Path(os.path.realpath(path)) if os.path.islink(path) else path


def replace_file(path: Path, data: bytes) -> Path:
    """Replace the file ``path`` names by ``data`` atomically (a fsynced temporary renamed over
    it, with its mode and group); returns the file replaced. Temporaries a crashed forget left
    are removed first; this one is removed if anything fails before the rename."""
    target = target_of(path)
    refuse_hard_links(target, str(path))  # a link made since the open would keep the values
    tmp = target.with_name(f".{target.name}.{os.getpid()}.forget.tmp")
    old: int | None = None
    try:
        remove_stale_temps(path)
        with suppress(OSError):  # nothing there yet, or not writable: nothing to empty
            old = os.open(target, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        fd, _ = open_private(tmp, os.O_WRONLY | os.O_TRUNC)
        try:
            write_all(fd, data)
            keep_mode(target, fd)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
        if old is not None:
            _empty_replaced(old)
    except BaseException:
        with suppress(OSError):  # a failing disk may refuse this too; the next forget retries
            tmp.unlink(missing_ok=True)
        raise
    finally:
        if old is not None:
            os.close(old)
    return target


def _empty_replaced(fd: int) -> None:
    """Empty the file a forget has just renamed a new one over (``fd``, opened before), unless
    it still has a name (a hard link made since the check): other processes' open descriptors
    of it (``HeldFile``) would keep every value the forget erased readable, in blocks the file
    system never reclaims, until their next read lets go of it. Emptied, it keeps its inode
    number taken for them as before, and they read the new file at their next look; a stream
    of it under way is told it was cut short (``jsonl_lines.shared_lines``)."""
    with suppress(OSError):  # best effort: the forget itself has happened
        st = os.fstat(fd)
        if st.st_nlink == 0 and stat.S_ISREG(st.st_mode):
            os.ftruncate(fd, 0)
