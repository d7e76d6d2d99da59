"""The JSONL backend: one event per line, the file auditable with ``cat``.

Byte-compatible with the TypeScript implementation's files (SPEC 1.2). Safe with several
processes: writes hold an exclusive ``flock`` on a sidecar ``<file>.lock`` (the ledger file itself
is replaced on forget, so it cannot carry the lock), reads hold a shared one and pick up lines
other processes appended. Appends are fsynced before the transaction returns; a failed write is
truncated away so no partial line survives. A forget rewrites the file to a temporary, fsyncs it
and renames it over the ledger with the forget event already inside: the erasure and its record
are one atomic step. A torn final line (a crash mid-write) is never merged: by default it is cut
off and recorded (no content) in ``<file>.torn-<ms>``, or reported as an error (``on_torn="raise"``).
What a crash or a failing disk leaves behind (torn lines, unfinished batches, rejected bytes) is
settled by ``jsonl_recovery``; this module reads, indexes and writes. A read-only open
(``read_only=True``) changes nothing on disk (``jsonl_readonly``).
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import suppress
from pathlib import Path

from agent_custody_state.backends.index import EventIndex
from agent_custody_state.backends.jsonl_files import check_regular, replace_file, target_of
from agent_custody_state.backends.jsonl_files import checkpoint_log as own_checkpoint_log
from agent_custody_state.backends.jsonl_lines import HeldFile, replace_lines, shared_lines
from agent_custody_state.backends.jsonl_lock import DEFAULT_LOCK_TIMEOUT, take
from agent_custody_state.backends.jsonl_lock import lock_timeout as _bound
from agent_custody_state.backends.jsonl_readonly import LockFile, refuse_section
from agent_custody_state.backends.jsonl_recovery import Recovery, Rejected, ledger_files, write_all
from agent_custody_state.backends.jsonl_recovery import fsync_dir as _fsync_dir  # tests patch it
from agent_custody_state.backends.jsonl_size import check_size, warn_on_crossing
from agent_custody_state.backends.jsonl_view import JsonlView
from agent_custody_state.backends.keystore_file import SidecarKeys
from agent_custody_state.fastjson import loads
from agent_custody_state.ledger.backend import EventBackend, EventBackendError
from agent_custody_state.ledger.checkpoints import FileCheckpointLog
from agent_custody_state.ledger.files import check_folder, names_of, open_private, refuse_hard_links
from agent_custody_state.ledger.model import (
    Event,
    ForgetEvent,
    Forgotten,
    event_from_dict,
    shape_problem,
)
from agent_custody_state.ledger.modemark import ModeFile
from agent_custody_state.ledger.sections import ReentrantTransactions

#: The bytes read at a time when a JSONL ledger is read (at open, and after other writers).
READ_CHUNK = 8 << 20

log = logging.getLogger(__name__)


class JsonlBackend(JsonlView, SidecarKeys, ModeFile, ReentrantTransactions, EventBackend):
    """Events in a JSONL file, indexed in memory; crash leftovers are settled by ``Recovery``."""

    kind = "jsonl"
    min_batch = 4  # a multi-event append is journalled: about four fsyncs against one
    keeps_objects = True  # reads return the indexed events themselves

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        on_torn: str = "repair",
        max_mb: float | None = None,
        read_only: bool = False,
        lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT,
    ):
        if on_torn not in ("repair", "raise"):
            raise ValueError('on_torn must be "repair" or "raise"')
        self.path, self.location, self.read_only = Path(location), str(location), read_only
        check_regular(self.path, self.location)  # a folder or FIFO is refused, not read
        check_size(self.path, self.location, max_mb)  # the index holds every event in memory
        #: seconds a lock of this ledger's files waits for another process (None: no bound)
        self._max_mb, self.lock_timeout = max_mb, _bound(lock_timeout)  # ``jsonl_lock``
        # The lock and the batch journal sit beside the file the path names: through a symlink,
        # a process opening the link and one opening the file itself must share them.
        self._target = file = target_of(self.path)
        self._recovery = Recovery(file, self.location, on_torn)
        check_folder(self.path, self.location)  # never created: SPEC 3
        check_folder(file, self.location)
        # Key store, mode mark and checkpoints are named after the file itself, whatever
        # spelling was given (``FileNames``); a file with other hard links is not written.
        self._names = names_of(self)
        if not read_only:
            refuse_hard_links(self.path, self.location)
        self._lock_path = lock = file.with_name(file.name + ".lock")
        self._lock_file = LockFile(self.path, lock, self.location, read_only=read_only)
        self._init_transactions()
        self._index = EventIndex()
        self._offsets: list[int] = []  # byte offset of each event's line
        self._file = HeldFile()  # the file indexed, and how it is read
        self._read_to = 0  # bytes consumed (through the last newline)
        self._needs_newline = False  # a hand-written last line without "\n"
        self._pending: list[bytes] = []
        self._start = 0  # events in the index when the write section began
        # Bytes from a failed append that could not be truncated away: never read past them,
        # and cut them off before the next write, while they are still there (``Rejected``).
        self._cut_at: Rejected | None = None
        self._dropped = False  # a failed forget dropped the view (``_view_again``)
        self._closed = False
        with self._lock:
            try:  # the lock too: refused (ENOLCK on NFS) or Ctrl-C while a writer holds it
                self._flock(fcntl.LOCK_SH if read_only else fcntl.LOCK_EX)
                self._catch_up(exclusive=not read_only)  # a reader repairs nothing
            except BaseException:
                self.close()  # a refused open keeps no descriptor (nor warns it was not closed)
                raise
            finally:
                self._recovery.opening = False  # from now on, a repair refused is an error
                if not self._closed:
                    self._flock(fcntl.LOCK_UN)

    @property
    def on_torn(self) -> str:
        """``"repair"`` (cut a torn final line off) or ``"raise"`` (refuse to open)."""
        return self._recovery.on_torn

    @property
    def repairs(self) -> list[str]:
        """What was repaired since this backend opened (torn lines, unfinished batches)."""
        return self._recovery.repairs

    # -- locking and reading ---------------------------------------------------------------

    def _flock(self, op: int) -> None:
        if self._closed:
            raise EventBackendError(f"ledger {self.location} is closed")
        fd = self._lock_file.fd()
        if fd is not None:  # a read-only open without a lock file reads without it
            take(fd, op, timeout=self.lock_timeout, lock=self._lock_path, location=self.location)

    def _reset(self) -> None:
        self._index = EventIndex()
        self._offsets = []
        self._read_to = 0
        self._needs_newline = False

    def _catch_up(self, *, exclusive: bool) -> None:
        """Read lines appended since the last look; reload if the file was replaced."""
        limit = self._recovery.recover_batch(exclusive=exclusive)
        if self._cut_at is not None:
            at = self._cut_at.at
            if not self._cut_at.still_there(self._target):
                self._cut_at = None  # settled, built on or replaced by another writer: leave it
            elif exclusive:
                self._recovery.cut_off(at)
                self._cut_at = None
            else:
                limit = at if limit is None else min(limit, at)
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._file.ident is not None:
                self._reset()
            self._file.release()
            return
        size = st.st_size if limit is None else min(st.st_size, limit)
        if not self._file.names(st) or size < self._read_to:
            self._reset()
            self._file.hold(self.path)
        if size == self._read_to:
            return
        # In pieces of READ_CHUNK bytes cut after their last newline, so opening a large file
        # holds one piece and its lines at a time besides the events (not the whole file twice).
        start, chunk = self._read_to, READ_CHUNK
        while start < size:
            last = size - start <= chunk
            data = self._file.read(start, size - start if last else chunk)
            if not data:
                return
            end = data.rfind(b"\n") + 1
            if not last and end == 0:
                chunk *= 2  # a line longer than a piece: read a larger one
                continue
            pos = start
            for raw in data[:end].split(b"\n")[:-1] if end else []:
                self._ingest(raw, pos)
                pos += len(raw) + 1
                # Line by line: after a line that is not an event, the next look starts at
                # that line again, never re-adding the events before it (counted twice).
                self._read_to = pos
            if last:
                if end < len(data):
                    self._handle_tail(data[end:], start + end, exclusive=exclusive)
                return
            start += end

    def _ingest(self, raw: bytes, offset: int) -> None:
        if not raw.strip():
            return
        try:
            event = event_from_dict(loads(raw), owned=True)
            problem = shape_problem(event)
        except (ValueError, UnicodeDecodeError, TypeError, AttributeError) as exc:
            problem = str(exc)  # the last two: a field of the wrong JSON type
        if problem is not None:
            line_no = len(self._offsets) + 1
            raise EventBackendError(
                f"{self.location}: the line at byte {offset} (event {line_no}) is not a valid "
                f"event: {problem}"
            ) from None
        self._index.add(event)
        self._offsets.append(offset)

    def _handle_tail(self, tail: bytes, offset: int, *, exclusive: bool) -> None:
        try:
            event: Event | None = event_from_dict(loads(tail), owned=True)
        except (ValueError, UnicodeDecodeError, TypeError, AttributeError):
            event = None
        problem = shape_problem(event) if event is not None else None
        if problem is not None:  # a whole event, not a torn write: refused, never cut off
            raise EventBackendError(
                f"{self.location}: the last line, at byte {offset}, is not a valid event: {problem}"
            )
        if event is not None:
            # A complete event without its newline: hand-written files end like this. Accept it;
            # the next append writes the missing newline first.
            self._index.add(event)
            self._offsets.append(offset)
            self._read_to = offset + len(tail)
            self._needs_newline = True
            return
        self._recovery.torn_tail(tail, offset, exclusive=exclusive)

    def repair(self) -> list[str]:
        """Cut a torn final line off now (used by ``agent-custody-memory repair``)."""
        with self.transaction():
            pass
        return list(self.repairs)

    def local_files(self) -> list[str]:
        """The ledger and every sidecar of it (``jsonl_recovery.ledger_files``)."""
        return ledger_files(self.path, self._names)

    # -- writing ---------------------------------------------------------------------------

    # The write section (``ReentrantTransactions``): the exclusive lock, then catch up with
    # other processes (settling what a crash left); appends wait in ``_pending`` and are
    # written and fsynced together at commit.

    def _begin(self) -> None:
        refuse_section(self.read_only, self.location)
        self._flock(fcntl.LOCK_EX)
        try:
            self._catch_up(exclusive=True)
        except BaseException:
            self._flock(fcntl.LOCK_UN)
            raise
        self._start, self._pending, self._dropped = len(self._index), [], False

    def _commit(self) -> None:
        self._commit_pending()

    def _rollback(self) -> None:
        self._pending = []
        self._index.truncate(self._start)
        del self._offsets[self._start :]

    def _end(self) -> None:
        self._flock(fcntl.LOCK_UN)

    def _view_again(self) -> None:
        """Read the file again after a failed forget dropped the view, when the section goes on
        (its caller caught the error): under the section's exclusive lock, the file holds every
        event up to the forget. The section's next checks and chain records were made against
        an empty view ("unknown fact"; a genesis record in the middle of the chain)."""
        if self._dropped:
            self._catch_up(exclusive=True)
            self._start, self._dropped = len(self._index), False

    def append(self, events: Sequence[Event]) -> None:
        self._require_transaction()
        self._view_again()
        for event in events:
            line = (event.to_json() + "\n").encode("utf-8")
            self._index.add(event)
            self._offsets.append(-1)  # assigned when written
            self._pending.append(line)

    def _commit_pending(self) -> None:
        if not self._pending:
            return
        prefix = b"\n" if self._needs_newline else b""
        data = prefix + b"".join(self._pending)
        batch = len(self._pending) > 1
        # The file itself: through a symlink naming no file yet, it is created where the link
        # points (``O_EXCL`` refuses to create through a link).
        try:
            fd, created = open_private(self._target, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:  # no descriptor left (EMFILE), or a full disk creating it
            raise EventBackendError(
                f"could not append to {self.location}: {exc}; nothing was written"
            ) from exc
        try:
            before = os.fstat(fd).st_size
            try:
                if batch:
                    self._recovery.begin_batch(before, len(data))
                write_all(fd, data)
                os.fsync(fd)
            except OSError as exc:
                # Leave no partial line behind: the caller is told nothing was written.
                try:
                    os.ftruncate(fd, before)
                    os.fsync(fd)
                    self._recovery.journal.unlink(missing_ok=True)
                except OSError:
                    # The rejected bytes stay in the file (a failing disk). This process never
                    # reads past them and cuts them off before its next write; a journal, if it
                    # can still be written, makes other processes do the same.
                    self._cut_at = Rejected(fd, before, data)
                    with suppress(OSError):
                        self._recovery.begin_batch(before, len(data) + 1)
                raise EventBackendError(
                    f"could not append to {self.location}: {exc}; nothing was written"
                ) from exc
            st = os.fstat(fd)
        finally:
            os.close(fd)
        if batch:
            self._recovery.end_batch()
        if created:
            _fsync_dir(self._target.parent)
        offset = before + len(prefix)
        first = len(self._offsets) - len(self._pending)
        for i, line in enumerate(self._pending):
            self._offsets[first + i] = offset
            offset += len(line)
        self._pending = []
        self._needs_newline = False
        if not self._file.names(st):  # this append created the file
            self._file.hold(self.path)
        self._read_to = st.st_size
        warn_on_crossing(before, st.st_size, self.location, self._max_mb)

    def forget(self, fact_id: str, forgotten: Forgotten, event: ForgetEvent) -> None:
        self._require_transaction()
        self._view_again()
        self._commit_pending()
        replaced = False
        try:
            current = self.path.read_bytes() if self.path.exists() else b""  # EMFILE: refused
            if self._needs_newline:
                current += b"\n"
            positions = self._index.rewrite_forgotten(fact_id, forgotten)
            rewritten = {
                self._offsets[pos]: (self._index.events[pos].to_json() + "\n").encode("utf-8")
                for pos in positions
            }
            out, new_offsets = replace_lines(current, self._offsets, rewritten)
            new_offsets.append(len(out))
            out += (event.to_json() + "\n").encode("utf-8")
            target = replace_file(self.path, bytes(out))
            replaced = True
            _fsync_dir(target.parent)
        except BaseException as exc:
            # The index was rewritten ahead of the file: reload it from disk at the next look
            # (not now, which could fail the same way and hide this error). Any exception: an
            # interrupt left the fact forgotten in memory only, and a rollback does not undo it.
            self._reset()
            self._file.release()
            self._dropped = True
            if not isinstance(exc, OSError):
                raise
            if replaced:
                raise EventBackendError(
                    f"forgot {fact_id} in {self.location}, but could not sync its directory: "
                    f"{exc}; the erasure may not survive a power loss"
                ) from exc
            raise EventBackendError(
                f"could not forget {fact_id} in {self.location}: {exc}; the ledger is unchanged"
            ) from exc
        self._index.add(event)
        self._offsets = new_offsets
        self._read_to = self._file.hold(self.path).st_size
        self._needs_newline = False
        # Everything up to the forget event is in the file now: a later failure in this
        # section rolls back only what follows (it dropped the forget from the index).
        self._start = len(self._index)
        warn_on_crossing(len(current), len(out), self.location, self._max_mb)

    def stored_events(self) -> Iterator[bytes]:
        return shared_lines(self.path, self._shared)

    def checkpoint_log(self) -> FileCheckpointLog:
        """``<file>.checkpoints``: signed notes beside the ledger file itself, and those an older
        version kept beside a symlink to it (``ledger.checkpoints``)."""
        return own_checkpoint_log(self.path, self._names, self.lock_timeout)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._file.release()
            self._lock_file.close()
