"""The PostgreSQL key store of crypto-shred mode: the data keys in a database of their own.

By default a Postgres ledger ``postgresql://.../<db>?table=<t>`` keeps its keys on the same
server in the database ``<db>_keys``, table ``<t>_keys`` (intents in ``<t>_keys_doomed``),
created on first use when the role may create databases (else the error says what to create).
Its intents and erasure flag are named in the schema the key table is found in (``keytables``).
A separate database, not a table beside the events: ``pg_dump <db>`` (the usual backup of a
ledger) then never carries a key, so a dump taken before a forget and restored after it holds
only ciphertext. ``key_store=`` / ``--key-store`` names any other place, a ``postgres://`` URL
(``?table=`` names the table) or a file path; docs/forget.md says which copies of the key
database must be kept apart from the events' (physical backups and WAL archives of a shared
server carry both).

Destroying a key deletes its row; ``compact`` (run by the ledger after every forget or sweep)
does ``VACUUM FULL`` on the key tables, so the dead row version is gone from the table's files,
and clears the planner statistics of the ``key`` column, where ``ANALYZE`` copies sample keys.
As for the events (``pending``), the transaction destroying a forget's keys (doomed ones, not
the unused keys a pool gives back) marks the erasure pending in ``<t>_erasure`` (created at open
when the role may); ``compact`` clears the mark once no older transaction kept a dead version
(``vacuum.holders``), and the next open of the key store finishes a compaction that was cut off
(its process killed, its connection dropped), one opener at a time, warning instead of failing.
``settle=False`` (a read-only ledger's open) leaves the mark for a writer; a role that may only
read the keys neither sees nor settles it, and creates nothing at open.

Made by the ledger's backend (``PostgresBackend.keystore``), the key store keeps an erasure log
in the events' database (``erasurelog``: ``erasures``): each ``doom`` logs its key ids and fact
there first, and ``buried`` reads them back, so a key database restored alone is found.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Mapping
from contextlib import suppress
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql

from agent_custody_state.plugin import EventBackendError, KeyStore, KeyStoreError, watch_forks
from agent_custody_state_sql import forked

from .deadline import DEFAULT_OPERATION_TIMEOUT, NoAnswer, open_bounded
from .deadline import operation_timeout as operation_timeout_
from .erasurelog import ErasureLog
from .keytables import KeyTables
from .limits import hinted
from .location import LocationError, PostgresLocation, libpq_url, parse_location
from .pending import ErasureFlag, xid_of
from .relfiles import find_relations, relation_files
from .vacuum import clear_statistics, holders, vacuum_full

T = TypeVar("T")


def default_keys_location(where: PostgresLocation) -> str:
    """The key store of the ledger at ``where``: database ``<db>_keys``, table ``<t>_keys``."""
    parts = urlsplit(where.connect_url)
    database = parts.path.lstrip("/")
    if not database:
        raise KeyStoreError(
            f"{where.display}: name the database in the ledger URL, or give the key store's "
            "location (key_store= / --key-store)"
        )
    query = [*parse_qsl(parts.query, keep_blank_values=True), ("table", f"{where.qualified}_keys")]
    return urlunsplit(("postgresql", parts.netloc, f"/{database}_keys", urlencode(query), ""))


class PostgresKeyStore(KeyStore):
    """Keys in a PostgreSQL table (``location``: a ``postgres[ql]://`` URL with ``?table=``)."""

    kind = "postgres"

    def __init__(
        self,
        location: str,
        *,
        creator_url: str | None = None,
        connect_timeout: int = 10,
        operation_timeout: float = DEFAULT_OPERATION_TIMEOUT,
        settle: bool = True,
        erasures: ErasureLog | None = None,
    ) -> None:
        try:
            where = parse_location(location)
        except LocationError as exc:
            raise KeyStoreError(str(exc)) from None
        self.location = where.display
        self._url = libpq_url(where.connect_url)
        self._timeout, self._bound = connect_timeout, operation_timeout_(operation_timeout)
        self._names = KeyTables(where.qualified, self.location)  # in one schema (``setup``)
        self._keys, self._doomed = self._names.keys, self._names.doomed
        self._lock = threading.Lock()
        self._closed = False
        self._get_sql: str | None = None
        self._cur: psycopg.Cursor[Any] | None = None
        self._settling: list[str] = []  # the transaction of the destroy being settled
        self._erasures = erasures  # the erasure log beside the events (``erasurelog``)
        self._pid = os.getpid()  # the process the connection was opened in (``forked``)
        self._conn = self._connect(creator_url)
        watch_forks(self)
        try:
            self._erasure = self._setup(settle)
            if settle:  # a destroy cut off before its compaction (``pending``)
                self._run(lambda: self._erasure.settle(self._conn, self._settle_vacuum, self._held))
            if erasures is not None:
                erasures.prepare(create=settle)
        except BaseException:
            self.close()
            raise

    def _open(self, url: str) -> psycopg.Connection[Any]:
        """A connection to ``url`` bounded as the ledger's (``deadline``)."""
        return open_bounded(url, self._timeout, self._bound)

    def _connect(self, creator_url: str | None = None) -> psycopg.Connection[Any]:
        try:
            return self._open(self._url)
        except psycopg.OperationalError as exc:
            # Whether the database is missing is asked of the server's catalog, not read from
            # the message (a server's messages may be translated: ``lc_messages``).
            if creator_url is None or not self._create_database(creator_url):
                raise KeyStoreError(f"key store {self.location}: {_reason(exc)}") from None
        try:
            return self._open(self._url)
        except psycopg.Error as exc:
            raise KeyStoreError(f"key store {self.location}: {_reason(exc)}") from None

    def _create_database(self, creator_url: str) -> bool:
        """Create the key database, connected to the events' database (same server), if the
        catalog says it is missing; False when it is there or the server cannot be asked (the
        first connection's error then stands)."""
        database = unquote(urlsplit(self._url).path.lstrip("/"))
        try:
            conn = self._open(libpq_url(creator_url))
        except psycopg.Error:
            return False
        with conn:
            try:
                known = "SELECT 1 FROM pg_catalog.pg_database WHERE datname = %s"
                if conn.execute(known, (database,)).fetchone() is not None:
                    return False
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
            except psycopg.errors.DuplicateDatabase:
                return True  # another process created it first
            except psycopg.Error as exc:
                raise KeyStoreError(
                    f"key store {self.location}: the database {database!r} does not exist and "
                    f"cannot be created here ({_reason(exc)}); create it (CREATE DATABASE "
                    f"{database} OWNER <ledger role>) or give key_store= another location"
                ) from None
        return True

    def _setup(self, settle: bool) -> ErasureFlag:
        """Find or make the key tables, all in the key table's schema (``keytables``)."""
        flag = self._run(lambda: self._names.setup(self._conn, settle))
        self._keys, self._doomed = self._names.keys, self._names.doomed
        return flag

    # -- running statements ------------------------------------------------------------------

    def _run(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` under the lock; a connection the server dropped is replaced once (every
        method is one statement or one transaction, so a retry cannot apply twice). A server
        that did not answer within ``operation_timeout`` fails the call at once (a retry would
        wait as long again); its connection, closed (``deadline``), is replaced by the next."""
        with self._lock:
            if self._closed:
                raise KeyStoreError(f"key store {self.location} is closed")
            if self._pid != os.getpid():  # forked: a connection of this process's own
                self._leave_inherited()
                self._conn = self._connect()
                self._pid = os.getpid()
            elif self._conn.closed:  # closed by a call that had no answer in time
                self._conn = self._connect()
            try:
                return fn()
            except psycopg.Error as exc:
                if _unanswered(exc) or not (self._conn.closed or self._conn.broken):
                    raise KeyStoreError(f"key store {self.location}: {_reason(exc)}") from None
            with suppress(psycopg.Error):
                self._conn.close()
            self._conn = self._connect()
            try:
                return fn()
            except psycopg.Error as exc:
                raise KeyStoreError(f"key store {self.location}: {_reason(exc)}") from None

    def _leave_inherited(self) -> None:
        """The parent's connection set aside, kept and blind (``forked``); the next use connects."""
        if self._conn is not None:
            forked.forsake_psycopg(self._conn, self._cur)
        self._conn, self._cur = None, None  # type: ignore[assignment]

    def _after_fork(self) -> None:  # in a child, at the fork (``forked.watch``)
        if not self._closed:
            self._lock = threading.Lock()  # one a thread of the parent held stays held here
            self._leave_inherited()

    def _execute(self, query: sql.Composed | sql.SQL, params: tuple[Any, ...] = ()) -> list[Any]:
        cur = self._conn.execute(query, params)
        return cur.fetchall() if cur.description else []

    # -- the KeyStore interface ---------------------------------------------------------------

    def put(self, keys: Mapping[str, bytes]) -> None:
        if keys:
            query = sql.SQL(
                "INSERT INTO {} (kid, key) SELECT * FROM unnest(%s::text[], %s::bytea[])"
            )
            args = (list(keys), list(keys.values()))
            self._run(lambda: self._execute(query.format(self._keys), args))

    def get(self, kids: Collection[str]) -> dict[str, bytes]:
        if not kids:
            return {}

        def run() -> list[Any]:
            # Every crypto-shred read asks this: composed once (under the lock: a forked child
            # connects first), prepared on the server, and run on a kept cursor (composing, a
            # cursor and parsing cost more than the lookup itself).
            text = self._get_sql
            if text is None:
                query = sql.SQL("SELECT kid, key FROM {} WHERE kid = ANY(%s)").format(self._keys)
                text = self._get_sql = query.as_string(self._conn)
            cur = self._cur
            if cur is None or cur.closed or cur.connection is not self._conn:
                cur = self._cur = self._conn.cursor()
            return cur.execute(text, (list(kids),), prepare=True).fetchall()

        return {kid: bytes(key) for kid, key in self._run(run)}

    def destroy(self, kids: Collection[str]) -> None:
        if not kids:
            return
        ids = (list(kids),)

        def run() -> None:
            with self._conn.transaction():
                self._execute(sql.SQL("DELETE FROM {} WHERE kid = ANY(%s)").format(self._keys), ids)
                doomed = self._execute(_UNDOOM.format(self._doomed), ids)[0][0]
                # A forget's keys (doomed first) leave a compaction to come: marked pending. The
                # unused keys a pool gives back at close encrypted nothing: no mark (else every
                # later open would rewrite the key tables).
                mark = self._erasure.statement() if doomed else None
                if mark is not None:
                    self._conn.execute(mark)

        self._run(run)

    def doom(self, intents: Mapping[str, str]) -> None:
        if intents:
            if self._erasures is not None:  # first, on the events' connection: not under _lock
                self._erasures.append(intents)
            query = sql.SQL(
                "INSERT INTO {} (kid, fact_id) SELECT * FROM unnest(%s::text[], %s::text[]) "
                "ON CONFLICT (kid) DO UPDATE SET fact_id = EXCLUDED.fact_id"
            ).format(self._doomed)
            args = (list(intents), list(intents.values()))
            self._run(lambda: self._execute(query, args))

    def spare(self, kids: Collection[str]) -> None:
        if kids:
            query = sql.SQL("DELETE FROM {} WHERE kid = ANY(%s)").format(self._doomed)
            self._run(lambda: self._execute(query, (list(kids),)))

    def doomed(self) -> dict[str, str]:
        query = sql.SQL("SELECT kid, fact_id FROM {}").format(self._doomed)
        return dict(self._run(lambda: self._execute(query)))

    def buried(self) -> dict[str, list[str]]:
        return {} if self._erasures is None else self._erasures.read()

    def local_files(self) -> list[str] | None:
        """The relation files of the key tables (and their TOAST tables and indexes) when the
        server's data directory is on this machine, as the event table answers (``relfiles``);
        None otherwise: not scannable."""
        return relation_files(self._run(lambda: find_relations(self._conn, self._names.relations)))

    def compact(self) -> None:
        """``VACUUM FULL`` both tables: the dead row versions of destroyed keys are rewritten
        away (the connection is in autocommit mode, as VACUUM requires); the statistics of the
        key column cleared; the pending mark cleared if no older transaction kept a version."""
        flag = self._erasure

        def run() -> bool:
            value = flag.read(self._conn)
            erased, cleared = self._vacuum([] if value is None else [xid_of(value)])
            if erased and value is not None:
                flag.clear(self._conn, value)
            return cleared

        if not self._run(run):  # ANALYZE copied keys into pg_statistic (``vacuum``)
            raise KeyStoreError(_STATISTICS_LEFT.format(self.location))

    def _vacuum(self, xids: list[str]) -> tuple[bool, bool]:
        """The compaction: whether no older transaction kept a destroyed key's row version
        (one that did is vacuumed again if it has gone), and whether the statistics are clear.
        A role that may not vacuum the tables (PostgreSQL skips them with only a warning) is a
        ``KeyStoreError``."""
        kept = holders(self._conn, xids)
        self._vacuum_full()
        erased = not (kept and holders(self._conn, xids))
        if kept and erased:
            self._vacuum_full()  # they have gone: this one erases the rows
        return erased, clear_statistics(self._conn, self._keys.as_string(self._conn), "key")

    def _vacuum_full(self) -> None:
        for table in (self._keys, self._doomed):
            try:
                vacuum_full(self._conn, table.as_string(self._conn), self.location)
            except KeyStoreError:
                raise
            except EventBackendError as exc:
                raise KeyStoreError(f"key store {exc}") from None

    def _held(self, xid: str) -> None:
        self._settling = [xid]

    def _settle_vacuum(self) -> bool:
        """The open's compaction of a pending erasure (``ErasureFlag.settle``)."""
        erased, cleared = self._vacuum(self._settling)
        if not cleared:
            raise KeyStoreError(_STATISTICS_LEFT.format(self.location))
        return erased

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._pid != os.getpid():  # the parent's: set aside, not closed
                self._leave_inherited()
                return
            with suppress(psycopg.Error):
                self._conn.close()


#: A destroy's intents deleted, and how many there were.
_UNDOOM = sql.SQL(
    "WITH gone AS (DELETE FROM {} WHERE kid = ANY(%s) RETURNING 1) SELECT pg_catalog.count(*) FROM gone"
)

_STATISTICS_LEFT = (
    "key store {}: the planner statistics of the key column could not be cleared; destroyed "
    "keys remain in pg_statistic until the table owner runs ANALYZE on it"
)


def _unanswered(exc: BaseException) -> bool:
    """Whether ``exc`` is (or was raised while ending a transaction cut off by) ``NoAnswer``."""
    return isinstance(exc, NoAnswer) or isinstance(exc.__context__, NoAnswer)


def _reason(exc: BaseException) -> str:
    exc = exc.__context__ if isinstance(exc.__context__, NoAnswer) else exc
    text = str(exc).strip()
    return hinted(text.splitlines()[0] if text else type(exc).__name__, exc)
