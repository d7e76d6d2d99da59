"""Where a custody keeps every erasure certificate it issues (``Custody(certificates=...)``).

A certificate handed back only in a call's answer is lost when the answer is: a client that
timed out or cancelled a ``memory.forget`` (the forget itself runs to its end, ``finish``), a
sweep interrupted part-way, a gateway that crashed. The value is gone by then, so the
certificate cannot be issued again (its byte scan needs the value). With an archive, each
certificate is written to ``<folder>/<factId>.json`` inside the flow, before the answer,
created exclusively (never over another file), whole or not at all (written aside, flushed,
then linked into place), and the folder synced: ``certificate verify`` reads it as it reads
the sweep command's ``--certificates`` files (the same names and layout).

A fact id that is not a plain file name (an imported ledger's id with a ``/``, a leading dot,
control characters, or too long) is kept as ``id-<sha256 hex of the id>.json``; the
certificate names the fact inside. A second certificate for the same id (a ledger imported
again under the same ids) is kept beside the first as ``<name>.2.json``, ``.3``, and so on.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import secrets
import threading
from contextlib import suppress
from pathlib import Path
from typing import Any

from agent_custody_state import temporaries
from agent_custody_state.backends.jsonl_recovery import fsync_dir, write_all

log = logging.getLogger(__name__)

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@+=-]{0,150}")
#: how many certificates may share one fact id's name before the archive gives up
_MAX_SAME = 1000
#: the temporaries ``_aside`` writes in a certificates folder (of a certificate, ``*.json``, or
#: of an intent, ``.intent-<hex>``): ``.<name>.<pid>.<thread>.<16 hex>.partial``
TEMPORARY = re.compile(
    r"\.(?:\.intent-[0-9a-f]+|[^/]+\.json)\.(?P<pid>[0-9]{1,10})\.[0-9]+\.[0-9a-f]{16}\.partial"
)


#: What ``link`` fails with on a filesystem without hard links (exFAT, many FUSE mounts of
#: object stores, some network shares).
_NO_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS})


def write_new(path: Path, data: bytes, *, mode: int = 0o666) -> None:
    """Create ``path`` holding ``data``, whole or not at all, never over another file: written
    aside, fsynced, linked into place (``FileExistsError`` if ``path`` exists), the folder
    synced. Raises ``OSError``; nothing is left at ``path`` nor aside when it does.

    Where the folder's filesystem has no hard links, ``path`` is created exclusively and
    written in place (taken back if a write fails): a crash part-way may leave it short, which
    ``certificate verify`` and ``reapply`` refuse as unreadable. Before, every certificate
    kept on such a folder failed (the server logged an ERROR per forget and kept none)."""
    aside, fd = _aside(path, mode)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(aside, path)  # exclusive: never over another file
        except OSError as exc:
            if exc.errno not in _NO_LINKS or isinstance(exc, FileExistsError):
                raise
            _write_in_place(path, data, mode)
    finally:
        with suppress(OSError):
            aside.unlink()
    with suppress(OSError):  # the file is whole; a folder that cannot be synced keeps it
        fsync_dir(path.parent)


def _aside(path: Path, mode: int) -> tuple[Path, int]:
    """A new temporary file beside ``path``, opened exclusively. Its name carries random bytes
    besides the pid and thread: a stale one a SIGKILL left (its pid reused since) is never met,
    so it neither blocks this write nor is written over (before, it failed the write with
    ``FileExistsError``, which the archive read as "a certificate is there": the next was kept
    as ``<name>.2.json``). A stale temporary is never read (only ``*.json`` names are), and a
    later start removes it (``CertificateArchive.remove_stale_temporaries``)."""
    for _ in range(8):
        tag = f"{os.getpid()}.{threading.get_ident()}.{secrets.token_hex(8)}"
        aside = path.with_name(f".{path.name}.{tag}.partial")
        try:
            return aside, os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        except FileExistsError:
            continue
    raise OSError(f"no free temporary name beside {path}")  # never read as "path exists"


def _write_in_place(path: Path, data: bytes, mode: int) -> None:
    """``path`` created exclusively and written, fsynced; removed again if that fails."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with suppress(OSError):
            path.unlink()
        raise
    os.close(fd)


def file_name(fact_id: str) -> str:
    """The archive's file name (without ``.json``) for ``fact_id``."""
    if _PLAIN.fullmatch(fact_id):
        return fact_id
    return "id-" + hashlib.sha256(fact_id.encode("utf-8", "surrogatepass")).hexdigest()


class CertificateArchive:
    """A folder of erasure certificates, one file per forgotten fact."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        #: the fact ids whose certificate ``keep_logged`` could not keep (``sweep``'s exit)
        self.not_kept: list[str] = []

    def __repr__(self) -> str:
        return f"CertificateArchive({str(self.folder)!r})"

    def prepare(self) -> None:
        """Make the folder (owner-only) if its parent exists; refuse what cannot hold files.
        Called at startup, so a bad setting stops the server before any forget."""
        try:
            self.folder.mkdir(mode=0o700, exist_ok=True)
        except FileNotFoundError:
            raise ValueError(
                f"certificates {self.folder}: the folder {self.folder.parent} does not exist"
            ) from None
        except OSError as exc:
            raise ValueError(f"certificates {self.folder}: {exc.strerror or exc}") from None
        if not self.folder.is_dir():
            raise ValueError(f"certificates {self.folder}: not a folder")
        if not os.access(self.folder, os.W_OK | os.X_OK):
            raise ValueError(f"certificates {self.folder}: this user cannot write in it")

    def remove_stale_temporaries(self) -> list[Path]:
        """Remove the temporaries a kill left in the folder (``TEMPORARY``, and stale:
        ``temporaries.remove_stale``); the files removed. Called at each start that finishes
        the folder's intents (``intents.pending``). Before, they stayed for good."""
        return temporaries.remove_stale(self.folder, TEMPORARY)

    def keep(self, fact_id: str, envelope: dict[str, Any]) -> Path:
        """Write ``envelope`` for ``fact_id``; returns the file. Raises ``OSError``."""
        data = (json.dumps(envelope, indent=2) + "\n").encode()
        base = file_name(fact_id)
        for n in range(1, _MAX_SAME + 1):
            target = self.folder / (f"{base}.json" if n == 1 else f"{base}.{n}.json")
            try:
                write_new(target, data, mode=0o600)
            except FileExistsError:
                continue
            return target
        raise FileExistsError(f"{_MAX_SAME} certificates already kept for fact {fact_id}")

    def keep_logged(self, fact_id: str, envelope: dict[str, Any]) -> Path | None:
        """``keep``, with a failure logged as an ERROR instead of raised: the forget it
        certifies is done and cannot be undone, and its answer still carries the certificate
        when the caller asked for one."""
        try:
            return self.keep(fact_id, envelope)
        except OSError as exc:
            self.not_kept.append(fact_id)
            log.error(
                "could not keep the erasure certificate of fact %s in %s: %s",
                fact_id,
                self.folder,
                exc.strerror or exc,
            )
            return None


def archive_of(
    certificates: CertificateArchive | str | os.PathLike[str] | None,
) -> CertificateArchive | None:
    """``Custody(certificates=...)``: an archive, a folder for one, or None (keep none)."""
    if certificates is None or isinstance(certificates, CertificateArchive):
        return certificates
    return CertificateArchive(certificates)
