"""What a crash or a failing disk leaves in a JSONL ledger, and how the backend settles it.

Three leftovers, each never acknowledged to anyone (an append is acknowledged only after its
fsync), so each is rolled back, never merged (docs/decisions.md, "JSONL"):

* a **torn final line**: bytes after the last newline that are not a complete event. The next
  writer cuts them off and records them in ``<file>.torn-<ms>`` (or, with ``on_torn="raise"``,
  opening fails); readers ignore them until then.
* an **unfinished batch**: a multi-event append is one write, which a crash can cut between two
  lines, leaving nothing in the file to show it. So before such a write a small journal
  ``<file>.batch`` records where the batch starts and how long it is (no event bytes, so no value
  is copied); it is removed once the batch is fsynced. Finding the journal means the batch may
  be incomplete: a writer rolls it back (recorded like a torn line), and until then readers
  stop at its start.
* the **bytes of a failed append** that could not be truncated away: the backend never reads
  past them and cuts them off before its next write (``cut_off``), while they are still the end
  of the file (``Rejected``: another writer may have settled them or written after them).

The record of bytes set aside keeps their offset, length and SHA-256, **never the bytes**: they
may hold a value that a later forget must erase, and a forget only rewrites the ledger file
(docs/decisions.md, "JSONL"). The digest cannot confirm a guessed value: any value in the bytes
comes after the event's random id, which the ledger never kept.

A repair the disk refuses (full, a file size limit, no descriptor left) leaves no half record
behind and refuses the write with an ``EventBackendError`` naming the file and the cause; while
the backend opens (``Recovery.opening``) it is left to the next write instead, and the ledger
opens as a reader sees it: a full disk must not refuse reads, nor half-fill the folder with
records on every attempt.

Also the small file helpers the backend's writes share (full writes, directory fsync).
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import stat
import time
from contextlib import suppress
from pathlib import Path

from agent_custody_state.ledger.appending import failure
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.files import PRIVATE_MODE, FileNames, open_private, real_file

log = logging.getLogger("agent_custody_state.backends.jsonl")

#: What a set-aside record says in place of the bytes.
NOT_KEPT = "not kept: never acknowledged, and it may hold a value a forget must erase"


def fsync_dir(path: Path) -> None:
    """Make a directory entry (a created or renamed file) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte (``os.write`` may write fewer than asked)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def truncate(path: Path, length: int) -> None:
    """Cut ``path`` back to ``length`` bytes, durably."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, length)
        os.fsync(fd)
    finally:
        os.close(fd)


class Recovery:
    """The journal and the repairs of one ledger file; ``repairs`` lists what was done."""

    def __init__(self, path: Path, location: str, on_torn: str) -> None:
        self.path = path
        self.location = location
        self.on_torn = on_torn
        self.journal = path.with_name(path.name + ".batch")
        self.repairs: list[str] = []
        self._ignored: int | None = None  # the offset of the torn line a reader last warned of
        #: While the backend opens: a repair the disk refuses is left to the next write, and
        #: the ledger opens as a reader would see it (a full disk must not refuse reads).
        self.opening = True

    def _set_aside(self, data: bytes, offset: int, what: str) -> Path:
        """Record (not copy) the bytes about to be cut off at ``offset``, in a new 0600 file."""
        fields = {
            "setAside": what,
            "offset": offset,
            "length": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "content": NOT_KEPT,
        }
        record = json.dumps(fields).encode() + b"\n"
        stamp = int(time.time() * 1000)
        for n in range(100):
            aside = self.path.with_name(f"{self.path.name}.torn-{stamp}{f'-{n}' if n else ''}")
            try:
                fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
            except FileExistsError:
                continue  # two in one millisecond
            except OSError as exc:
                raise self._unsettled(what, offset, aside, exc) from exc
            try:
                os.fchmod(fd, PRIVATE_MODE)  # exactly, whatever the umask
                write_all(fd, record)
                os.fsync(fd)
            except OSError as exc:
                # A full disk: no half record (one more per try) is left beside the ledger.
                with suppress(OSError):
                    aside.unlink()
                raise self._unsettled(what, offset, aside, exc) from exc
            finally:
                os.close(fd)
            return aside
        raise EventBackendError(f"{self.location}: too many set-aside records named {aside.name}")

    def _cut(self, data: bytes, offset: int, what: str) -> Path:
        """Record the bytes from ``offset`` on (``_set_aside``) and cut them off; the record is
        taken back if the cut fails. ``EventBackendError`` naming the file and the cause."""
        aside = self._set_aside(data, offset, what)
        try:
            truncate(self.path, offset)
        except OSError as exc:
            with suppress(OSError):
                aside.unlink()  # it records a cut that did not happen
            raise self._unsettled(what, offset, self.path, exc) from exc
        return aside

    def _unsettled(self, what: str, offset: int, where: Path, exc: OSError) -> EventBackendError:
        return EventBackendError(
            f"{self.location}: the {what} at byte {offset} could not be cut off "
            f"({failure('write', where, exc, 'nothing was changed')}); the ledger refuses "
            "writes until it can be"
        )

    def _note(self, note: str) -> None:
        log.warning(note)
        self.repairs.append(note)

    # -- torn final line -----------------------------------------------------------------------

    def torn_tail(self, tail: bytes, offset: int, *, exclusive: bool) -> None:
        """Deal with bytes after the last newline that are not an event (at ``offset``)."""
        message = (
            f"{self.location}: torn final line at byte {offset} ({len(tail)} bytes, no newline): "
            "a write was interrupted; that event was never acknowledged"
        )
        if self.on_torn == "raise":
            raise EventBackendError(
                message + "; run `agent-custody-memory repair --ledger "
                f"{self.location}` to cut it off"
            )
        if not exclusive:
            # Readers never merge it and cannot repair it under a shared lock; the next writer will.
            # Said once per torn line, not at every read that meets it again.
            if self._ignored != offset:
                self._ignored = offset
                log.warning("%s (ignored until the next write repairs it)", message)
            return
        try:
            aside = self._cut(tail, offset, "torn final line")
        except EventBackendError as exc:
            if not self.opening:
                raise
            # An open on a full disk: read the ledger as a reader does; a write tries again.
            log.warning("%s", exc)
            return
        self._note(f"{message}; cut off, recorded in {aside.name} (length and sha256 only)")

    # -- multi-event commits -------------------------------------------------------------------

    def begin_batch(self, offset: int, length: int) -> None:
        """Record, durably, that a batch of ``length`` bytes is about to be written at ``offset``."""
        record = json.dumps({"offset": offset, "length": length}).encode()
        fd, _ = open_private(self.journal, os.O_WRONLY | os.O_TRUNC)
        try:
            write_all(fd, record)
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(self.path.parent)

    def end_batch(self) -> None:
        """The batch is durable; a journal that cannot be removed only makes the next reader
        check the length again, which it passes."""
        with suppress(OSError):
            self.journal.unlink()

    def recover_batch(self, *, exclusive: bool) -> int | None:
        """Settle a batch a crashed writer left; returns the offset readers must stop at."""
        try:
            raw = self.journal.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:  # no descriptor left (EMFILE): refused, named, not a traceback
            raise EventBackendError(
                f"{self.location}: {failure('read', self.journal, exc, 'nothing was changed')}"
            ) from exc
        try:
            record = json.loads(raw)
            offset, length = int(record["offset"]), int(record["length"])
        except (ValueError, KeyError, TypeError):
            # The journal itself was cut short: it is fsynced before the batch is written, so
            # the batch never started.
            if exclusive:
                self.journal.unlink(missing_ok=True)
            return None
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            size = 0
        if size >= offset + length:
            if exclusive:  # the whole batch reached the file: it stands
                self.journal.unlink(missing_ok=True)
            return None
        if not exclusive:
            return offset
        if size > offset:
            try:
                with open(self.path, "rb") as fh:
                    fh.seek(offset)
                    partial = fh.read()
                aside = self._cut(partial, offset, "unfinished batch")
            except (OSError, EventBackendError) as exc:
                if self.opening:  # as a reader: stop at its start; a write tries again
                    log.warning(
                        "%s: an unfinished batch at byte %d: %s", self.location, offset, exc
                    )
                    return offset
                if isinstance(exc, EventBackendError):
                    raise
                raise EventBackendError(
                    f"{self.location}: an unfinished batch at byte {offset} could not be rolled "
                    f"back: {exc}; the ledger refuses writes until it can be"
                ) from exc
            self._note(
                f"{self.location}: a batch of events was cut short at byte {offset} "
                f"({size - offset} of {length} bytes written); it was never acknowledged "
                f"and is rolled back, recorded in {aside.name} (length and sha256 only)"
            )
        self.journal.unlink(missing_ok=True)
        return None

    # -- bytes of a failed append --------------------------------------------------------------

    def cut_off(self, at: int) -> None:
        """Remove the bytes from ``at`` on, which a failed append's own cleanup could not."""
        try:
            truncate(self.path, at)
        except OSError as exc:
            raise EventBackendError(
                f"{self.location}: the bytes of a failed write at byte {at} could not "
                f"be removed: {exc}; the ledger refuses writes until they can be"
            ) from exc
        with suppress(OSError):
            self.journal.unlink()


class Rejected:
    """The bytes of a failed append that its own cleanup could not truncate away (a failing
    disk): where they start, and their length and SHA-256, so that only they are ever cut off.

    Another process may settle them first (a writer rolls them back through the journal, then
    appends), build on them (no journal could be written, so it read them as events and appended
    after them), or replace the file (a forget). Cutting at their offset then cut off that
    process's acknowledged events, a forget's rewrite included. So they are cut, and reads stop
    at them, only while they are still the end of the same file, byte for byte.
    """

    def __init__(self, fd: int, at: int, data: bytes) -> None:
        try:
            st = os.fstat(fd)
            end = st.st_size
            self.ident: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            end, self.ident = at + len(data), None
        self.at = at
        self.length = max(0, end - at)
        self.sha256 = hashlib.sha256(data[: self.length]).hexdigest()

    def still_there(self, path: Path) -> bool:
        """Whether ``path`` still ends with these bytes (in doubt, True: the cut then reports)."""
        try:
            with open(path, "rb") as fh:
                st = os.fstat(fh.fileno())
                if self.ident not in (None, (st.st_dev, st.st_ino)):
                    return False
                if st.st_size != self.at + self.length:
                    return False
                fh.seek(self.at)
                return hashlib.sha256(fh.read(self.length)).hexdigest() == self.sha256
        except FileNotFoundError:
            return False
        except OSError:
            return True


def keep_mode(path: Path, fd: int) -> None:
    """Give a forget's rewrite (created 0600) the replaced ledger's mode and group.

    The rename puts a new file in place of the ledger; a mode the operator chose (0640 for an
    auditors' group, say) must survive a forget. The group is kept when the owner may set it; the
    owner is always the writing user (changing it needs privileges).
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    os.fchmod(fd, stat.S_IMODE(st.st_mode))
    if st.st_gid != os.fstat(fd).st_gid:
        with suppress(PermissionError):
            os.fchown(fd, -1, st.st_gid)


def remove_stale_temps(path: Path) -> None:
    """Delete rewrite temporaries left by a forget that crashed before its rename.

    Such a file holds a copy of the ledger, with the values of facts that may be forgotten later;
    left in place it would keep them on disk. Only called under the exclusive lock, so no other
    process is writing one.
    """
    for stale in _temporaries(path, "forget.tmp"):
        stale.unlink(missing_ok=True)


def _temporaries(path: Path, suffix: str) -> list[Path]:
    """``.<name>.*.<suffix>`` beside ``path`` and, through a symlink, beside the file it names
    (where a forget writes its temporary). The name is escaped: a ``[`` in it made the pattern
    match nothing, and a crashed forget's copy of the ledger was never removed."""
    found: set[Path] = set()
    for p in {path, Path(os.path.realpath(path))}:
        found.update(p.parent.glob(f".{glob.escape(p.name)}.*.{suffix}"))
    return sorted(found)


def ledger_files(path: Path, names: FileNames | None = None) -> list[str]:
    """The files of a JSONL ledger that may hold its bytes (the byte scan of an erasure
    certificate), by their own names whatever spelling ``path`` is (``files.FileNames``): the
    file, its lock, batch journal and checkpoints (and checkpoints an older version kept beside
    a symlink), the records of torn lines and any rewrite temporary of a forget
    (``remove_stale_temps``)."""
    names = names if names is not None else FileNames.of(path)
    real = names.real
    fixed = [real, *(names.sidecar(x) for x in ("lock", "batch", "checkpoints"))]
    found: list[Path] = []
    for base in [real, *names.aliases]:  # what older versions put beside a symlink, too
        if base != real:
            fixed += [base.with_name(f"{base.name}.{x}") for x in ("lock", "batch")]
        found += sorted(base.parent.glob(f"{glob.escape(base.name)}.torn-*"))
    fixed += names.legacy("checkpoints")
    temporaries = [real_file(p) for p in _temporaries(path, "tmp")]
    return [str(p) for p in dict.fromkeys(fixed + found + temporaries)]
