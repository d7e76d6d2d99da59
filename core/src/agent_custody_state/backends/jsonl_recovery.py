"""What a crash or a failing disk leaves in a JSONL ledger, and how the backend settles it.

Three leftovers, each never acknowledged to anyone (an append is acknowledged only after its
fsync), so each is rolled back, never merged (docs/decisions.md, "JSONL"):

* a **torn final line**: bytes after the last newline that are not a complete event. The next
  writer moves them aside to ``<file>.torn-<ms>`` (or, with ``on_torn="raise"``, opening fails);
  readers ignore them until then.
* an **unfinished batch**: a multi-event append is one write, which a crash can cut between two
  lines, leaving nothing in the file to show it. So before such a write a small journal
  ``<file>.batch`` records where the batch starts and how long it is (no event bytes, so no value
  is copied); it is removed once the batch is fsynced. Finding the journal means the batch may
  be incomplete: a writer rolls it back (moved aside, like a torn line), and until then readers
  stop at its start.
* the **bytes of a failed append** that could not be truncated away: the backend never reads
  past them and cuts them off before its next write (``cut_off``).

Also the small file helpers the backend's writes share (full writes, directory fsync).
"""

from __future__ import annotations

import json
import logging
import os
import time
from contextlib import suppress
from pathlib import Path

from agent_custody_state.ledger.backend import EventBackendError

log = logging.getLogger("agent_custody_state.backends.jsonl")


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

    def _move_aside(self, data: bytes) -> Path:
        aside = self.path.with_name(f"{self.path.name}.torn-{int(time.time() * 1000)}")
        aside.write_bytes(data)
        return aside

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
                f"{self.location}` to move it aside"
            )
        if not exclusive:
            # Readers never merge it and cannot repair it under a shared lock; the next writer will.
            log.warning("%s (ignored until the next write repairs it)", message)
            return
        aside = self._move_aside(tail)
        truncate(self.path, offset)
        self._note(f"{message}; moved aside to {aside.name}")

    # -- multi-event commits -------------------------------------------------------------------

    def begin_batch(self, offset: int, length: int) -> None:
        """Record, durably, that a batch of ``length`` bytes is about to be written at ``offset``."""
        record = json.dumps({"offset": offset, "length": length}).encode()
        fd = os.open(self.journal, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
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
                aside = self._move_aside(partial)
                truncate(self.path, offset)
            except OSError as exc:
                raise EventBackendError(
                    f"{self.location}: an unfinished batch at byte {offset} could not be rolled "
                    f"back: {exc}; the ledger refuses writes until it can be"
                ) from exc
            self._note(
                f"{self.location}: a batch of events was cut short at byte {offset} "
                f"({size - offset} of {length} bytes written); it was never acknowledged "
                f"and is rolled back, moved aside to {aside.name}"
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
