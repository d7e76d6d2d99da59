"""Writing a command's output file: atomically, never over something the user did not mean.

``--out -`` is standard output. Otherwise the file is written to a temporary file in the same
folder (owner-only: an export holds every value) and renamed over the target only when complete,
so a failure leaves neither a half-written file nor a ``.partial`` behind. An existing file is
replaced only with ``--force``; a symbolic link is written through (to its target) only with
``--force``, never replaced by a regular file; a folder is refused.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from agent_custody_state.cli.common import CliError


def resolve_output(out: str, *, force: bool, flag: str = "--out") -> Path | None:
    """The file to write (None for standard output), after every refusal that applies."""
    if out == "-":
        return None
    path = Path(out)
    if path.is_symlink():
        if not force:
            raise CliError(
                f"{flag} {out} is a symbolic link (to {os.readlink(path)}); pass "
                "--force to write through it"
            )
        path = path.resolve()
    if path.is_dir():
        raise CliError(f"{flag} {out} is a folder; name a file")
    if path.exists() and not force:
        raise CliError(f"{flag} {out} already exists; pass --force to replace it")
    if not path.parent.is_dir():
        raise CliError(
            f"{flag} {out}: the folder {path.parent} does not exist; create it first "
            "(no command creates a missing folder)"
        )
    return path


@contextmanager
def output_file(path: Path | None) -> Iterator[TextIO]:
    """A text stream that becomes ``path`` atomically when the block succeeds."""
    if path is None:
        yield sys.stdout
        sys.stdout.flush()
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
