"""Reading a file the operator does not control: only a regular file, never through a symbolic
link, and at most a bound of bytes.

A receipt (``extras.bundles``) and an erasure intent (``stores.intent_files``) are both read so:
a link could name any file the reader can open (a private key, ``/dev/zero``: read until
``MemoryError``), and a FIFO would block the reader for good (``O_NONBLOCK`` opens it, ``fstat``
refuses it). One reader for both, so a fix to one is a fix to the other.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: How such a file is opened: read only, never through a link, never waiting on a FIFO.
FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def read_bounded(path: Path, limit: int, what: str) -> bytes:
    """``path``'s bytes; ``ValueError`` for a symbolic link (``"a symbolic link; <what> are read
    from regular files only"``), a file that is not regular, or one larger than ``limit`` bytes
    (refused before it is read when its size says so); ``OSError`` as the OS says it otherwise
    (a missing file)."""
    link = f"a symbolic link; {what} are read from regular files only"
    if not hasattr(os, "O_NOFOLLOW") and path.is_symlink():  # pragma: no cover - Windows
        raise ValueError(link)
    try:
        fd = os.open(path, FLAGS)
    except OSError:
        if path.is_symlink():  # O_NOFOLLOW's ELOOP (EMLINK on some BSDs)
            raise ValueError(link) from None
        raise
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        data = fh.read(limit + 1) if info.st_size <= limit else b""
    if info.st_size > limit or len(data) > limit:
        raise ValueError(f"larger than {limit} bytes")
    return data
