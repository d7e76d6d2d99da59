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
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Any

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
)
from agent_custody_state_sql import SqlEventBackend

from .readonly import connector

log = logging.getLogger(__name__)

#: Seconds a writer waits for another process's write section before giving up.
DEFAULT_BUSY_TIMEOUT = 30.0
#: Per-connection page cache (KiB): enough for the upper index levels of a large ledger.
DEFAULT_CACHE_KIB = 32 * 1024


def _journal_mode(cur: sqlite3.Cursor, ask: str, busy_timeout: float) -> Any:
    """Ask (or set) the journal mode, waiting out another process doing the same.

    Two processes opening a new file at once both turn it to WAL; each holds a shared lock and
    wants the exclusive one, and SQLite answers one of them "database is locked" at once, without
    the busy handler (waiting could deadlock). The other finishes the switch in milliseconds, so
    the refused one asks again, for up to the busy timeout.
    """
    deadline = time.monotonic() + busy_timeout
    pause = 0.005
    while True:
        try:
            return cur.execute(ask).fetchone()[0]
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


#: Why a hard-linked SQLite file is not written (``refuse_hard_links``).
_HARD_LINKS = (
    "SQLite keeps its WAL after the name it is opened by, so writers through two names corrupt "
    "it (sqlite.org/howtocorrupt.html, 2.3)"
)


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
        **_options: object,
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
        self._tail: ChainHead | None = None  # the head after this section's last append
        self._head_seen: tuple[int, ChainHead] | None = None  # (data_version, head) at commit
        self._section_version: int | None = None  # data_version read inside this section
        engine = sa.create_engine(
            "sqlite+pysqlite://",
            # The file is opened by path (read-only: a ``file:`` URI that quotes it), so ``?``,
            # ``#`` or ``%`` in a file name mean nothing special.
            creator=partial(self._connect, check_same_thread=False),
            # Autocommit at the driver: we issue BEGIN IMMEDIATE / COMMIT ourselves, and a bare
            # read then sees every write other processes have committed.
            isolation_level="AUTOCOMMIT",
            poolclass=sa.pool.NullPool,
        )

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            try:
                # A read-only open reads in the mode the file is in: asking WAL would write.
                ask = "PRAGMA journal_mode" if read_only else "PRAGMA journal_mode=WAL"
                mode = _journal_mode(cur, ask, busy_timeout)
                if str(mode).lower() != "wal" and not read_only:
                    raise EventBackendError(
                        f"{location}: SQLite refused WAL mode (got {mode!r}); the ledger needs "
                        "a local file system that supports shared memory"
                    )
                cur.execute("PRAGMA synchronous=FULL")
                cur.execute("PRAGMA secure_delete=ON")
                cur.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
                cur.execute(f"PRAGMA cache_size=-{int(cache_kib)}")
            finally:
                cur.close()

        super().__init__(engine, location=str(location), table="events")
        self._busy_ms = int(busy_timeout * 1000)
        self._settle_wal()

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

    def append(self, events: Sequence[Event]) -> None:
        self._head_seen = None  # this connection's own writes do not change the version
        super().append(events)
        self._tail = ChainHead.recorded(events[-1]) if events else None

    def forget(self, fact_id: str, forgotten: Forgotten, event: ForgetEvent) -> None:
        self._tail = self._head_seen = None
        super().forget(fact_id, forgotten, event)

    def _data_version(self) -> int:
        return int(self._raw.execute("PRAGMA data_version").fetchone()[0])

    def _commit(self) -> None:
        tail, self._tail, self._head_seen = self._tail, None, None
        version, self._section_version = self._section_version, None
        super()._commit()
        if tail is None:
            return
        if version is None:  # the section did not ask the head (an unchained append)
            with suppress(sqlite3.Error):
                version = self._data_version()
        if version is not None:
            self._head_seen = (version, tail)

    def _rollback(self) -> None:
        self._tail = self._head_seen = self._section_version = None
        super()._rollback()

    def _reconnect(self) -> None:
        self._tail = self._head_seen = self._section_version = None
        super()._reconnect()

    def chain_head(self) -> ChainHead:
        version = self._run(self._data_version)
        if self._depth:  # inside a write section: the version at its commit (see above)
            self._section_version = version
        seen = self._head_seen
        if seen is not None and version == seen[0]:
            return seen[1]
        return super().chain_head()

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
        """Checkpoint the WAL into the file and truncate it, erasing old page images."""
        if self._depth:
            raise EventBackendError(f"{self.location}: compact cannot run inside a transaction")
        for attempt in range(3):
            busy, _log, _done = self._run(
                lambda: self._raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            )
            if not busy:
                self._erasure_pending = False
                return
            time.sleep(0.05 * (attempt + 1))
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
