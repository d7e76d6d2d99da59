"""Writing a command's output file: atomically, never over something the user did not mean.

``--out -`` is standard output. Otherwise the file is written to a temporary file in the same
folder (owner-only: an export holds every value) and renamed over the target only when complete,
so a failure leaves neither a half-written file nor a ``.partial`` behind. An existing file is
replaced only with ``--force``; a symbolic link is written through (to its target) only with
``--force``, never replaced by a regular file; a folder is refused.

The temporary's name carries random bytes besides the pid: one a kill left, its pid reused
since, refused the write with "cannot write in <folder> (File exists)". The next write of the
same file removes the stale temporaries a kill left for it (``temporaries``): an
export's holds every value, and was kept past every later forget.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from agent_custody_state.cli.common import CliError, is_path


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
    from agent_custody_state.temporaries import remove_stale, temporary  # not at --help

    remove_stale(path.parent, temporary_pattern(path))
    tmp = temporary(path, "partial")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as exc:  # named by what was asked, not by the temporary file's name
        raise CliError(f"{path}: cannot write in {path.parent} ({exc.strerror or exc})") from None
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


def temporary_pattern(path: Path) -> re.Pattern[str]:
    """The names of ``output_file``'s temporaries for ``path``: ``.<name>.<pid>.<16 hex>.partial``
    (``.<name>.<pid>.partial`` before the random part)."""
    from agent_custody_state.temporaries import pattern

    return pattern(re.escape(path.name), "partial")


def check_not_input(target: Path | None, args: Any, ledger: Any) -> None:
    """Refuse an ``--out`` that is a file the command reads: one of the ledger's files
    (``check_not_own``), a file of an input folder (``--receipts``: a receipt
    bundle), or an input file (``--sign``'s key). ``--force`` replaced
    them with the output: ``pack --out ledger.jsonl --force`` overwrote the ledger the pack
    was built from."""
    if target is None:
        return
    out, inputs = args.out, {"--receipts": args.receipts, "--sign": args.sign}
    if ledger is not None:
        check_not_own(ledger, target, out)
    real = Path(os.path.realpath(target))
    for flag, given in inputs.items():
        if not given:
            continue
        place = Path(os.path.realpath(given))
        if real == place:
            raise CliError(
                f"--out {out} is the {flag} file, which this command reads; name another file"
            )
        if place in real.parents and real.exists():
            raise CliError(
                f"--out {out} is a file of the {flag} folder {given}, which this command "
                "reads; write it elsewhere"
            )


def check_not_own(ledger: Any, target: Path | None, out: str) -> None:
    """Refuse an ``--out`` that is one of the ledger's own files (its events, sidecars, mode
    mark or key store): ``--force`` replaced them with the export, which in crypto-shred mode
    holds the values decrypted (and, over the key store, destroyed every key)."""
    if target is None:
        return
    backend = ledger.backend
    files = list(backend.local_files() or [])
    keys = getattr(backend, "keys", None)
    files += (keys.local_files() or []) if keys is not None else []
    if is_path(ledger.location):  # the sidecars of the file itself, whatever spelling names it
        from agent_custody_state.ledger.files import FileNames

        names = FileNames.of(ledger.location)
        for suffix in ("mode", "keys", "outbox", "checkpoints"):
            files += [str(names.sidecar(suffix)), *map(str, names.legacy(suffix))]
    real = os.path.realpath(target)
    if any(os.path.realpath(f) == real for f in files):
        raise CliError(f"--out {out} is a file of the ledger {ledger.location}; name another file")
