"""The PostgreSQL key store of crypto-shred mode: the data keys in a database of their own.

By default a Postgres ledger ``postgresql://.../<db>?table=<t>`` keeps its keys on the same
server in the database ``<db>_keys``, table ``<t>_keys`` (intents in ``<t>_keys_doomed``),
created on first use when the role may create databases (else the error says what to create).
A separate database, not a table beside the events: ``pg_dump <db>`` (the usual backup of a
ledger) then never carries a key, so a dump taken before a forget and restored after it holds
only ciphertext. ``key_store=`` / ``--key-store`` names any other place, a ``postgres://`` URL
(``?table=`` names the table) or a file path; docs/forget.md says which copies of the key
database must be kept apart from the events' (physical backups and WAL archives of a shared
server carry both).

Destroying a key deletes its row; ``compact`` (run by the ledger after every forget or sweep)
does ``VACUUM FULL`` on the key tables, so the dead row version is gone from the table's files,
and clears the planner statistics of the ``key`` column, where ``ANALYZE`` copies sample keys.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Collection, Mapping
from contextlib import suppress
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql

from agent_custody_state.plugin import KeyStore, KeyStoreError

from .location import (
    MAX_IDENTIFIER,
    LocationError,
    PostgresLocation,
    libpq_url,
    parse_location,
)
from .relfiles import find_relations, relation_files
from .vacuum import clear_statistics

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
        self, location: str, *, creator_url: str | None = None, connect_timeout: int = 10
    ) -> None:
        try:
            where = parse_location(location)
        except LocationError as exc:
            raise KeyStoreError(str(exc)) from None
        self.location = where.display
        self._url = libpq_url(where.connect_url)
        self._timeout = connect_timeout
        names = where.qualified.split(".")
        if len(names[-1].encode()) >= MAX_IDENTIFIER:  # "<t>_doomed", cut to 63 bytes, is "<t>"
            raise KeyStoreError(
                f'key store {self.location}: table name "{names[-1]}" is too long: PostgreSQL '
                f'cuts names to {MAX_IDENTIFIER} bytes, and "{names[-1]}_doomed" would be it; '
                f"keep it within {MAX_IDENTIFIER - 1} bytes"
            )
        self._keys = sql.Identifier(*names)
        self._tables = [where.qualified, ".".join([*names[:-1], f"{names[-1]}_doomed"])]
        self._doomed = sql.Identifier(*names[:-1], f"{names[-1]}_doomed")
        self._schema = where.schema
        self._lock = threading.Lock()
        self._closed = False
        self._get_sql: str | None = None
        self._cur: psycopg.Cursor[Any] | None = None
        self._conn = self._connect(creator_url)
        try:
            self._setup(where.qualified)
        except BaseException:
            self.close()
            raise

    def _connect(self, creator_url: str | None = None) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self._url, autocommit=True, connect_timeout=self._timeout)
        except psycopg.OperationalError as exc:
            # Whether the database is missing is asked of the server's catalog, not read from
            # the message (a server's messages may be translated: ``lc_messages``).
            if creator_url is None or not self._create_database(creator_url):
                raise KeyStoreError(f"key store {self.location}: {_reason(exc)}") from None
        try:
            return psycopg.connect(self._url, autocommit=True, connect_timeout=self._timeout)
        except psycopg.Error as exc:
            raise KeyStoreError(f"key store {self.location}: {_reason(exc)}") from None

    def _create_database(self, creator_url: str) -> bool:
        """Create the key database, connected to the events' database (same server), if the
        catalog says it is missing; False when it is there or the server cannot be asked (the
        first connection's error then stands)."""
        database = unquote(urlsplit(self._url).path.lstrip("/"))
        try:
            conn = psycopg.connect(
                libpq_url(creator_url), autocommit=True, connect_timeout=self._timeout
            )
        except psycopg.Error:
            return False
        with conn:
            try:
                known = "SELECT 1 FROM pg_database WHERE datname = %s"
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

    def _setup(self, qualified: str) -> None:
        digest = hashlib.sha256(f"agent-custody-state:keys:{qualified}".encode()).digest()
        lock = int.from_bytes(digest[:8], "big", signed=True)

        def run() -> None:
            with self._conn.transaction():
                self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
                if self._schema:
                    self._conn.execute(
                        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                            sql.Identifier(self._schema)
                        )
                    )
                self._conn.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} (kid TEXT PRIMARY KEY, key BYTEA NOT NULL)"
                    ).format(self._keys)
                )
                self._conn.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} (kid TEXT PRIMARY KEY, fact_id TEXT NOT NULL)"
                    ).format(self._doomed)
                )

        self._run(run)

    # -- running statements ------------------------------------------------------------------

    def _run(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` under the lock; a connection the server dropped is replaced once (every
        method is one statement or one transaction, so a retry cannot apply twice)."""
        with self._lock:
            if self._closed:
                raise KeyStoreError(f"key store {self.location} is closed")
            try:
                return fn()
            except psycopg.Error as exc:
                if not (self._conn.closed or self._conn.broken):
                    raise KeyStoreError(f"key store {self.location}: {_reason(exc)}") from None
            with suppress(psycopg.Error):
                self._conn.close()
            self._conn = self._connect()
            try:
                return fn()
            except psycopg.Error as exc:
                raise KeyStoreError(f"key store {self.location}: {_reason(exc)}") from None

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
        # Every crypto-shred read asks this: composed once, prepared on the server, and run on a
        # kept cursor (composing, a cursor and parsing cost more than the lookup itself).
        text = self._get_sql
        if text is None:
            query = sql.SQL("SELECT kid, key FROM {} WHERE kid = ANY(%s)").format(self._keys)
            text = self._get_sql = query.as_string(self._conn)

        def run() -> list[Any]:
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
                for table in (self._keys, self._doomed):
                    self._execute(sql.SQL("DELETE FROM {} WHERE kid = ANY(%s)").format(table), ids)

        self._run(run)

    def doom(self, intents: Mapping[str, str]) -> None:
        if intents:
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

    def local_files(self) -> list[str] | None:
        """The relation files of the key tables (and their TOAST tables and indexes) when the
        server's data directory is on this machine, as the event table answers (``relfiles``);
        None otherwise: not scannable."""
        return relation_files(self._run(lambda: find_relations(self._conn, self._tables)))

    def compact(self) -> None:
        """``VACUUM FULL`` both tables: the dead row versions of destroyed keys are rewritten
        away (the connection is in autocommit mode, as VACUUM requires)."""

        def run() -> bool:
            for table in (self._keys, self._doomed):
                self._execute(sql.SQL("VACUUM FULL {}").format(table))
            return clear_statistics(self._conn, self._keys.as_string(self._conn), "key")

        if not self._run(run):  # ANALYZE copied keys into pg_statistic (``vacuum``)
            raise KeyStoreError(
                f"key store {self.location}: the planner statistics of the key column could "
                "not be cleared; destroyed keys remain in pg_statistic until the table owner "
                "runs ANALYZE on it"
            )

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            with suppress(psycopg.Error):
                self._conn.close()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
