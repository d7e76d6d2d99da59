"""The SQLite event store: one file, WAL, ``synchronous=FULL``, ``secure_delete=ON`` (SPEC 3).

Several processes may open the same file. A write section is ``BEGIN IMMEDIATE``: it takes the
file's single write lock before the ledger re-reads and validates, so two processes racing to
supersede one fact are serialised and the second sees the first's assert. Readers never block
writers (WAL). A commit is durable when it returns (the WAL is fsynced at every commit).

Forget rewrites the assert rows in place; ``secure_delete`` zeroes the freed bytes in the page,
and ``compact`` (which the ledger runs after every forget or sweep) checkpoints the WAL into the
file and truncates it to zero bytes, so the old page images are gone too.

A read-only open (``read_only=True``) changes nothing on disk (``readonly``): the file must
exist, it is opened ``mode=ro`` with ``query_only``, the schema is inspected, never created.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agent_custody_state.plugin import (
    ChainHead,
    Event,
    EventBackendError,
    ForgetEvent,
    Forgotten,
    SidecarKeys,
    check_folder,
    create_private,
    refuse_hard_links,
    wire_time_key,
)
from agent_custody_state_sql import SqlEventBackend

from . import pragmas
from .causes import explain
from .readonly import FileState, connector, file_state, unwritten

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds a writer waits for another process's write section before giving up.
DEFAULT_BUSY_TIMEOUT = 30.0
#: Milliseconds one checkpoint of ``compact`` may hold the write lock waiting for readers.
CHECKPOINT_SLICE_MS = 25
#: Per-connection page cache (KiB): enough for the upper index levels of a large ledger.
DEFAULT_CACHE_KIB = 32 * 1024


#: Why a hard-linked SQLite file is not written (``refuse_hard_links``).
_HARD_LINKS = (
    "SQLite keeps its WAL after the name it is opened by, so writers through two names corrupt "
    "it (sqlite.org/howtocorrupt.html, 2.3)"
)


def _weakly(
    method: weakref.WeakMethod[Callable[[], sqlite3.Connection]], location: str
) -> sqlite3.Connection:
    """The engine's ``creator``: the backend's ``_open_connection`` through a weak reference.
    SQLAlchemy's finalizer of a checked-out connection holds the pool, so a pool holding the
    backend kept a ledger dropped without ``close()`` alive for good, its connection and
    descriptors with it; now it is collected and its connection closed."""
    bound = method()
    if bound is None:  # pragma: no cover - nothing connects through a collected backend
        raise sqlite3.ProgrammingError(f"{location}: its backend was closed")
    return bound()


class SqliteBackend(SidecarKeys, SqlEventBackend):
    """Events in a SQLite file; ``location`` is its path (``.sqlite`` or ``.db``)."""

    kind = "sqlite"
    seq_ddl = "INTEGER PRIMARY KEY AUTOINCREMENT"

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        cache_kib: int = DEFAULT_CACHE_KIB,
        read_only: bool = False,
    ) -> None:
        self.path = Path(location)
        self.read_only = read_only
        check_folder(self.path, str(location))  # never created: SPEC 3
        # SQLite keeps -wal, -shm and -journal beside the file a symlink names: so do the byte
        # scan's list and the WAL settling (the key store is named so by ``SidecarKeys``).
        self._real = Path(os.path.realpath(self.path))
        if not read_only:
            refuse_hard_links(self.path, str(location), _HARD_LINKS)
        # SQLite would create the file 0644 minus the umask; created here first, owner-only, it
        # also passes 0600 on to the -wal, -shm and -journal files, which SQLite gives the main
        # file's mode. An existing file keeps the mode its operator chose.
        if not read_only:
            create_private(self.path)
        self._connect = connector(self.path, str(location), busy_timeout, read_only=read_only)
        self._erasure_pending = False
        self._busy_s = busy_timeout
        # The head and event after this section's last append; (data_version, head, its time)
        # at this connection's last commit; the last row as read in this section.
        self._tail: tuple[ChainHead, Event] | None = None
        self._head_seen: tuple[int, ChainHead, str] | None = None
        self._section_last: list[Any] | None = None
        self._section_version: int | None = None  # data_version read inside this section
        # A read-only open's immutable connection: the file as it was before that connect
        # (``readonly.file_state``); None for any other connection.
        self._opened_as: FileState | None = None
        engine = sa.create_engine(
            "sqlite+pysqlite://",
            # The file is opened by path (read-only: a ``file:`` URI that quotes it), so ``?``,
            # ``#`` or ``%`` in a file name mean nothing special.
            creator=partial(_weakly, weakref.WeakMethod(self._open_connection), str(location)),
            # Autocommit at the driver: we issue BEGIN IMMEDIATE / COMMIT ourselves, and a bare
            # read then sees every write other processes have committed.
            isolation_level="AUTOCOMMIT",
            poolclass=sa.pool.NullPool,
        )

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            pragmas.apply(
                dbapi_conn,
                str(location),
                read_only=read_only,
                busy_timeout=busy_timeout,
                cache_kib=cache_kib,
            )

        super().__init__(engine, location=str(location), table="events")
        self._busy_ms = int(busy_timeout * 1000)
        self._settle_wal()

    # -- a read-only open's immutable connection ---------------------------------------------

    def _open_connection(self) -> sqlite3.Connection:
        """The engine's connection. A read-only one is immutable when no ``-wal`` is there
        (``readonly``), and then remembers the file's state from before it opened."""
        if not self.read_only:
            return self._connect(check_same_thread=False)
        state = file_state(str(self._real))
        immutable = unwritten(str(self._real), state)
        self._opened_as = state if immutable else None
        return self._connect(check_same_thread=False, immutable=immutable)

    def _reason(self, exc: BaseException) -> str:
        text = super()._reason(exc)
        return explain(self._real, text, read_only=self.read_only, busy_timeout=self._busy_s)

    def _run(self, fn: Callable[[], T]) -> T:
        # An immutable connection trusts its page cache and the file for ever: a writer that
        # has been there since (a forget, compacted into the file) would not be seen, the value
        # it erased still served. So a read that starts outside a snapshot (a snapshot, and a
        # ``consistent`` read past its first question, keep their connection) first checks
        # the file, and reads on a new connection if it changed.
        if self._opened_as is None:
            return super()._run(fn)
        with self._lock:
            if self._in_read or self._depth or self._closed or self._solo:
                return super()._run(fn)
            if file_state(str(self._real)) == self._opened_as:
                return super()._run(fn)

            def fresh() -> T:
                self._reconnect()
                return fn()

            return super()._run(fresh)

    # -- dialect hooks -----------------------------------------------------------------------

    def _begin_write(self) -> None:
        # IMMEDIATE takes the write lock now, before the ledger re-reads and validates; a
        # deferred BEGIN would let two processes validate against the same snapshot.
        self._exec("BEGIN IMMEDIATE")

    @contextmanager
    def _schema_lock(self, conn: Connection) -> Iterator[None]:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._rollback_quietly()
            raise
        conn.exec_driver_sql("COMMIT")

    def _json_field(self, *path: str) -> str:
        return f"json_extract(json, '$.{'.'.join(path)}')"

    def _ids_select(self, name: str) -> sa.Select[Any]:
        # One JSON-array parameter for any number of ids; SQLite probes the index per element.
        return sa.select(sa.column("value")).select_from(
            sa.func.json_each(sa.bindparam(name, type_=sa.Text))
        )

    def _reader(self) -> Callable[[], Any]:
        return partial(self._connect, isolation_level=None)

    def _ids_param(self, ids: Sequence[str]) -> Any:
        return json.dumps(list(ids))

    def bulk_load(self) -> AbstractContextManager[None]:
        # An import into an empty ledger builds the secondary indexes once, at the end: 1.2x
        # the rows per second of inserts into the indexed table (``indexes_deferred``).
        return self.indexes_deferred()

    # -- the chain head, remembered across this connection's own commits --------------------

    # Every chained append reads the head inside its write section: the last row, its JSON
    # parsed, about as long as the insert that follows. After a commit of this connection whose
    # last write was an append, the head is that append's last record, and it stays the head
    # until another connection commits, which ``PRAGMA data_version`` tells (it changes on every
    # other connection's commit, never on this one's), so a remembered head is used only while
    # the version is the one at the commit, and not once this connection has written again.
    # The version is read once per append, inside its write section: ``BEGIN IMMEDIATE`` holds
    # the write lock from there to the commit, so no other connection commits in between and
    # the version read there is the one at the commit (a second read after the commit cost a
    # statement per append).

    # The same holds for the last event's transaction time (``last_tx_time``), which every
    # write reads before its head (``locking.in_order``): remembered with the head, from the
    # append's last event. Inside a write section the version is read once (no other
    # connection commits while it holds the write lock), and the last row, once read, is kept
    # until this connection writes (``_section_last``): the time and the head come from one
    # read of it.

    def append(self, events: Sequence[Event]) -> None:
        self._head_seen = None  # this connection's own writes do not change the version
        self._section_last = None
        super().append(events)
        head = ChainHead.recorded(events[-1]) if events else None
        self._tail = (head, events[-1]) if head is not None else None

    def forget(self, fact_id: str, forgotten: Forgotten, event: ForgetEvent) -> None:
        self._tail = self._head_seen = self._section_last = None
        super().forget(fact_id, forgotten, event)

    # This section's remembered rows belong to the backend, which every thread using the ledger
    # shares; ``_lock`` is held by a write section throughout, so a thread looks at them only
    # holding it (the read state, ``_solo`` and ``_in_read``, likewise: ``SqlConnection._rows``).

    def _data_version(self) -> int:
        return int(self._raw.execute("PRAGMA data_version").fetchone()[0])

    def _commit(self) -> None:
        tail, self._tail, self._head_seen = self._tail, None, None
        version, self._section_version = self._section_version, None
        self._section_last = None
        super()._commit()
        if tail is None:
            return
        if version is None:  # the section did not ask the head (an unchained append)
            with suppress(sqlite3.Error):
                version = self._data_version()
        if version is not None:
            self._head_seen = (version, tail[0], wire_time_key(tail[1].tx_time))

    def _rollback(self) -> None:
        self._tail = self._head_seen = self._section_version = self._section_last = None
        super()._rollback()

    def _reconnect(self) -> None:
        self._tail = self._head_seen = self._section_version = self._section_last = None
        super()._reconnect()

    def _remembered(self) -> tuple[int, ChainHead, str] | None:
        """The head and last time remembered at this connection's last commit, if no other
        connection has committed since (``data_version``, read once per write section)."""
        with self._lock:  # ``_depth`` is another thread's section's unless this one holds it
            version = self._section_version if self._depth else None
            if version is None:
                version = self._run(self._data_version)
                if self._depth:  # inside a write section: the version at its commit (see above)
                    self._section_version = version
            seen = self._head_seen
            return seen if seen is not None and version == seen[0] else None

    def _last_rows(self) -> list[Any]:
        with self._lock:
            if not self._depth:
                return super()._last_rows()
            if self._section_last is None:
                self._section_last = super()._last_rows()
            return self._section_last

    def chain_head(self) -> ChainHead:
        seen = self._remembered()
        return seen[1] if seen is not None else super().chain_head()

    def last_tx_time(self) -> str | None:
        seen = self._remembered()
        return seen[2] if seen is not None else super().last_tx_time()

    # -- housekeeping ------------------------------------------------------------------------

    def _settle_wal(self) -> None:
        """Finish the erasure of a forget that died between its commit and its WAL truncation.

        Such a forget is committed, but the WAL still holds the old page images with the value,
        and the main file the old page, until a checkpoint. So opening a file with a non-empty
        WAL checkpoints it, without waiting: if another connection holds a read snapshot, the
        next ``compact()`` or ``close()`` finishes the job.
        """
        wal = Path(f"{self._real}-wal")
        if self.read_only or not wal.exists() or wal.stat().st_size == 0:
            return  # a read-only open leaves it to the next writer

        def checkpoint() -> bool:
            conn = self._conn
            conn.exec_driver_sql("PRAGMA busy_timeout=0")
            try:
                busy = conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()[0]
            except sa.exc.OperationalError:
                busy = 1  # locked by another process: not an error at open
            finally:
                conn.exec_driver_sql(f"PRAGMA busy_timeout={self._busy_ms}")
            return bool(busy)

        self._erasure_pending = self._run(checkpoint)

    def compact(self) -> None:
        """Checkpoint the WAL into the file and truncate it, erasing old page images.

        A ``TRUNCATE`` checkpoint holds the file's write lock while it waits for other
        connections' read snapshots to end, so every other writer waits with it, and gives up
        ("database is locked") at its own busy timeout. So it waits in short slices
        (``CHECKPOINT_SLICE_MS``), the lock free between them, for at most the busy timeout in
        all: a long snapshot elsewhere delays this call, never another process's writes.
        """
        with self._lock:  # ``_depth`` is this thread's own section only while it holds the lock
            if self._depth:
                raise EventBackendError(f"{self.location}: compact cannot run inside a transaction")
        deadline = time.monotonic() + self._busy_ms / 1000
        pause = 0.01
        while True:
            if not self._run(self._checkpoint_slice):
                self._erasure_pending = False
                return
            if time.monotonic() + pause > deadline:
                break
            time.sleep(pause)  # outside the lock: this process's other threads go on too
            pause = min(pause * 2, 0.1)
        # Another connection kept an old snapshot open past the busy timeout. The value is
        # already gone from the live rows; its old page image stays in the WAL until the next
        # successful checkpoint, which close() and the next compact() retry.
        self._erasure_pending = True
        log.warning(
            "%s: could not truncate the WAL (another process holds a read snapshot); old page "
            "images of forgotten values remain in %s-wal until the next checkpoint",
            self.location,
            self._real,
        )

    def _checkpoint_slice(self) -> bool:
        """One ``TRUNCATE`` checkpoint waiting at most ``CHECKPOINT_SLICE_MS`` for the write
        lock and for readers; whether it was blocked."""
        raw = self._raw
        raw.execute(f"PRAGMA busy_timeout={CHECKPOINT_SLICE_MS}")
        try:
            return bool(raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            return True
        finally:
            raw.execute(f"PRAGMA busy_timeout={self._busy_ms}")

    def local_files(self) -> list[str]:
        """The database, its ``-wal``, ``-shm`` and (outside WAL mode) ``-journal``, by the
        file's own name whatever spelling opened it (SQLite resolves symlinks for them)."""
        real = self._real
        return [str(real)] + [f"{real}-{x}" for x in ("wal", "shm", "journal")]

    def close(self) -> None:
        if self._erasure_pending and not self._closed:
            with suppress(EventBackendError):
                self.compact()
        super().close()
