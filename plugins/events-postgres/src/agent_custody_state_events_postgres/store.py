"""The PostgreSQL event store: SPEC 3's table in any database, shared by many server replicas.

A write section locks only what it touches (docs/scale-out.md): the ledger names its keys
(``locking``: the fact ids and topics it validates against or changes) and the section is
``BEGIN`` plus a transaction-scoped advisory lock per key, under a shared lock on the table's
*write key*. Sections with disjoint keys run side by side; sections sharing a key queue, and under
READ COMMITTED every statement after the lock sees all commits before it, so the ledger's
validate-then-append cannot race another replica's on the same fact. A section with unknown keys
(import, recovery) takes the write key exclusively and so waits for every keyed one.

Appends still form one total order: a keyed section takes the table's *order lock* (an
exclusive advisory lock held to commit) only when the ledger enters its ordered phase
(``ordered``: after its reads and checks, before it stamps the transaction time), so the
validation of sections with disjoint keys overlaps and only stamp, seal, insert and commit are
serialised. Rows still commit in ``seq`` and time order (a reader paging by ``seq`` never skips a
row that commits later below its page), and the chain head read under the lock extends the head
every other writer sees. A write path that appends without entering the phase gets the lock at
its first head read or append.

Grouped commit (the default; ``?commit=sync`` turns it off): a keyed section commits with
``synchronous_commit = off``, so the order lock is released once the commit record is in the WAL
buffers, not after its flush; the call then waits, outside every lock, for a transaction of its
own that writes one WAL record and commits with the session's ``synchronous_commit``. WAL is
sequential, so that commit's flush (and, with synchronous standbys, their confirmation) covers
the section's; writers waiting at once share one flush. Other sessions can read the section's
rows before they are durable (docs/scale-out.md, "Grouped commit"); a chain head read outside a
section waits for the same flush, so a head handed out (the head resource, a signed checkpoint)
is always durable.

``?lock=table`` restores the previous write section, ``LOCK TABLE <t> IN SHARE ROW EXCLUSIVE
MODE``: every writer queues, including writers that know nothing of this code.

A batch of events (``assert_many``, ``import_events``) is appended with ``COPY``; once a
writer's copies have grown the table fourfold since its planner statistics were taken, the
section ends with a quick ``ANALYZE`` (``statistics``).

Forget updates the assert rows in place in the same transaction as the forget event; ``compact``
(run by the ledger after a forget or sweep) does ``VACUUM FULL`` on the table, which rewrites it
without the dead row versions, unless the location says ``?vacuum=false``; what it cannot erase
(a version older transactions still need, planner statistics) is told (``vacuum``); the forget
marks its erasure pending, and a writer's open finishes one cut off (``pending``).

A ``jsonb`` column (older writers) is read and written through a cast.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection

from agent_custody_state.plugin import (
    ChainHead,
    Event,
    EventBackendError,
    ForgetEvent,
    Forgotten,
    KeyStore,
)
from agent_custody_state_sql.schema import ROW_COLUMNS, event_values

from .catalog import flush_granted, json_is_jsonb, qualify_dialect
from .deadline import DEFAULT_OPERATION_TIMEOUT, Bounded, BoundedReader, connect_args, install
from .deadline import operation_timeout as operation_timeout_
from .held import HoldingBackend
from .limits import hinted
from .location import LocationError, fits, parse_location, reader
from .lockname import XACT_LOCK, advisory_key, lock_name, resolve
from .pending import ErasureFlag
from .relfiles import find_relations, relation_files
from .statistics import Growth, quick_analyze, rows_known
from .vacuum import UNFINISHED, ForgetResidue

log = logging.getLogger(__name__)

#: Appends of this many events or more are sent with ``COPY ... FROM STDIN`` (the bulk loading
#: floor: one statement streaming every row) rather than a prepared INSERT per row.
COPY_MIN = 2

#: What makes a ``COPY ... FROM STDIN`` binary.
BINARY = " (FORMAT BINARY)"

#: More keys than this in one section take the exclusive write lock instead: every advisory
#: lock is an entry in the server's shared lock table (``max_locks_per_transaction`` per
#: connection on average), which a bulk ingest of thousands of facts would exhaust.
MAX_KEYS = 64

#: Every statement of a write section runs on its prepared statement's generic plan. Left to
#: choose, the server kept planning the supersession walk (``events_along``) at every
#: execution, its generic plan's estimated cost being higher: 0.18 against 0.05 ms of server
#: time per walk, on a path every supersession takes. A section's statements are index
#: lookups by key, which a generic plan serves as well as a custom one.
GENERIC_PLANS = "SET LOCAL plan_cache_mode = force_generic_plan"

#: The durability wait after a grouped commit: its own transaction (simple query protocol, after
#: the ``COMMIT`` in the same round trip) writing one transactional logical decoding message (no
#: table; EXECUTE is granted to PUBLIC; any ``wal_level``). Having written WAL with a
#: transaction id, it commits with the session's ``synchronous_commit`` and so returns once WAL
#: up to its commit record, which comes after the section's, is flushed (and replicated).
FLUSH = "SELECT pg_catalog.pg_logical_emit_message(true, 'agent-custody-state', '')"
#: The columns reads filter and join on (not the wide ``json`` text).
_KEYS = tuple(c for c in ROW_COLUMNS if c not in ("json", "event_id"))


class PostgresBackend(Bounded, ForgetResidue, HoldingBackend):
    """Events in a PostgreSQL table; ``location`` is a ``postgres[ql]://`` URL."""

    kind = "postgres"
    # A read made of several queries sees one snapshot (the default READ COMMITTED gives each
    # statement its own, so an as-of read could mix states around a concurrent retraction).
    _begin_read = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
    # Reads are server-side prepared statements from their first run (psycopg's default waits
    # for the fifth): each is parsed and planned once per connection.
    _read_options = {"prepare": True}  # noqa: RUF012 - never mutated
    seq_ddl = "BIGSERIAL PRIMARY KEY"
    locks_keys = True

    def __init__(
        self,
        location: str,
        *,
        connect_timeout: int = 10,
        read_only: bool = False,
        operation_timeout: float = DEFAULT_OPERATION_TIMEOUT,
    ) -> None:
        try:
            where = fits(parse_location(str(location)))
        except LocationError as exc:
            raise EventBackendError(str(exc)) from None
        self.vacuum, self.where = where.vacuum, where
        self.read_only = read_only is True  # no DDL, READ ONLY (``readonly``)
        self._connect_timeout, self._bound = connect_timeout, operation_timeout_(operation_timeout)
        try:
            engine = sa.create_engine(
                where.connect_url,
                # Autocommit at the driver: a read never leaves a transaction open (which would
                # block VACUUM FULL); write sections are explicit BEGIN ... COMMIT.
                isolation_level="AUTOCOMMIT",
                poolclass=sa.pool.NullPool,
                connect_args=connect_args(where.connect_url, connect_timeout),  # ``deadline``
            )
            install(engine, self._bound)
            qualify_dialect(engine)  # no built-in called by its bare name
        except (sa.exc.ArgumentError, ValueError) as exc:  # a URL the driver cannot read
            # No host part, so no password: the location as given, without its options.
            shown = where.display if "//" in where.display else str(location).split("?")[0]
            raise EventBackendError(f"{shown}: not a PostgreSQL URL ({exc})") from None
        # The advisory key for schema setup (before the table exists, LOCK TABLE cannot work).
        self._advisory_key = advisory_key(where.qualified)
        self._ordered = False  # whether this section holds the order lock
        self._wrote = False  # whether this section appended or forgot anything
        self._head_rows: list[Any] | None = None  # the last row, read with the order lock
        self._grouped = False  # whether keyed sections commit grouped (set once connected)
        quoted = ".".join(f'"{part}"' for part in where.qualified.split("."))
        super().__init__(
            engine,
            location=where.display,
            table=where.table,
            schema=where.schema,
            quoted_table=quoted,
            index_prefix=where.qualified.replace(".", "_"),
        )
        try:  # a failure here must not leave the connection open
            self._lock_name = self._run(
                lambda: lock_name(self._raw, self._qualified, where.qualified)
            )
            self._write_key = advisory_key(self._lock_name, "write")
            self._order_key = advisory_key(self._lock_name, "order")
            if where.commit == "grouped" and where.lock == "keys":
                self._grouped = self._run(lambda: flush_granted(self._raw, self.location))
            if self.vacuum and not self.read_only:  # a forget cut off before its VACUUM FULL
                flag = ErasureFlag.beside(self, self._lock_name, self._home)
                self._run(lambda: self.settle_erasure(self._raw, self._qualified, flag))
        except BaseException:
            self.close()
            raise
        self._growth = Growth(lambda: self._run(lambda: rows_known(self._raw, self._qualified)))

    def _reader(self) -> Callable[[], Any]:
        return BoundedReader(reader(self.where, self._connect_timeout), self._bound)

    # -- dialect hooks -----------------------------------------------------------------------

    def _begin_write(self) -> None:
        # Held, and sent in front of the section's first statement (``held``; simple query
        # protocol, the keys are our integers): each round trip of an append shows in the rate.
        self._ordered = self._wrote = False
        self._head_rows = None
        self._growth.begin()
        if self.where.lock == "table":
            table = self._qualified
            self._hold_opening(
                f"BEGIN; {GENERIC_PLANS}; LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE"
            )
        elif self._section_keys is None or len(self._section_keys) > MAX_KEYS:
            self._hold_opening(f"BEGIN; {GENERIC_PLANS}; SELECT {XACT_LOCK}({self._write_key})")
        else:
            # The order lock waits for ``ordered`` (the ledger's stamp): the reads and checks
            # before it run under the key locks alone.
            self._hold_opening(
                f"BEGIN; {GENERIC_PLANS}; SELECT {XACT_LOCK}_shared({self._write_key})"
                + self._key_locks(self._section_keys)
                + ("; SET LOCAL synchronous_commit = off" if self._grouped else "")
            )

    def _commit(self) -> None:
        super()._commit()
        if self._growth.committed():
            self._analyze()

    def _analyze(self) -> None:
        """``ANALYZE`` the table after a bulk load (``statistics``). The write is committed
        already: a failure here (a role that may not analyse the table) is only logged."""
        try:
            warnings = self._run(lambda: quick_analyze(self._raw, self._qualified, _KEYS))
        except EventBackendError as exc:
            warnings = [str(exc)]
        if warnings:  # e.g. a role that may not analyse the table: skipped with a warning
            log.warning("%s: ANALYZE after a bulk load: %s", self.location, "; ".join(warnings))
        self._growth.analysed()

    def _commit_statement(self) -> str:
        # Only a keyed section that wrote commits asynchronously (SET LOCAL above) and so needs
        # the flush; one that wrote nothing has no commit record to wait for.
        if self._grouped and self._ordered and self._wrote:
            return "COMMIT; " + FLUSH
        return "COMMIT"

    def _key_locks(self, keys: frozenset[str]) -> str:
        """``; SELECT pg_advisory_xact_lock(k), ...`` for the keys, in ascending order (two
        sections locking overlapping keys take them in one order: no deadlock)."""
        ints = sorted({advisory_key(self._lock_name, "key", k) for k in keys})
        if not ints:
            return ""
        return "; SELECT " + ", ".join(f"{XACT_LOCK}({k})" for k in ints)

    def _widen(self, keys: frozenset[str] | None) -> None:
        if self.where.lock == "table":
            return
        if keys is None or len(keys | (self._section_keys or frozenset())) > MAX_KEYS:
            raise EventBackendError(
                f"{self.location}: an exclusive write section cannot nest in a keyed one"
            )
        self._run(
            lambda: self._exec(self._key_locks(keys - (self._section_keys or frozenset()))[2:])
        )

    def ordered(self) -> None:
        # Taken before the ledger stamps the transaction time, never after: a section stamped
        # before taking it could commit after one stamped later, and transaction time would go
        # backwards along the append order (found by the reliability tier's two-server run).
        self._require_transaction()
        if self._section_keys is None or self._ordered or self.where.lock == "table":
            return  # an exclusive section, or the order lock is held already
        lock = f"SELECT {XACT_LOCK}({self._order_key}); {self._q.last.sql}"

        # One round trip (simple query protocol): the lock, then the last row, the head this
        # section will extend (the next thing every ordered phase reads); both are under the
        # lock, so each round trip saved here shortens every writer's wait.
        self._head_rows = self._run(lambda: self._exec_rows(lock))
        self._ordered = True

    def _last_rows(self) -> list[Any]:
        if self._depth and self._head_rows is not None:
            return self._head_rows
        return super()._last_rows()

    def chain_head(self) -> ChainHead:
        # Inside a keyed section the head is read under the order lock (taken here if the
        # ledger has not entered its ordered phase yet), so the head this section extends is
        # the last committed one and no other section can append after it until it commits.
        if self._depth:
            self.ordered()
            return super().chain_head()
        head = super().chain_head()
        if self._grouped and not self._in_read:
            # Outside a section the head may cover another writer's grouped commit that is not
            # durable yet; a head given out must survive a crash, so wait for the flush.
            self._run(lambda: self._exec(FLUSH))
        return head

    def forget(self, fact_id: str, forgotten: Forgotten, event: ForgetEvent) -> None:
        super().forget(fact_id, forgotten, event)  # and its transaction, for ``compact``
        self.remember_forget(self._run(lambda: self._exec_rows(self.forget_statement()))[0][0])

    def _before_write(self) -> None:
        self._wrote = True
        self.ordered()
        self._head_rows = None  # this write moves the head

    def _insert_events(self, events: Sequence[Event]) -> None:
        if len(events) < COPY_MIN:  # one event: held until the commit (``held``)
            super()._insert_events(events)
            return
        self._send_held()
        # A binary COPY into the same columns: every value is text, sent as its UTF-8 bytes
        # (no escaping on either side); into a jsonb ``json`` column (older writers) a text
        # COPY, which parses the text as an INSERT's cast would. Rows get their ``seq`` in the
        # order they are written. Each row is made as it is written: the driver sends a full
        # buffer while the next rows are made, so the server inserts and indexes while this
        # process encodes.
        sql = f"COPY {self._qualified} ({', '.join(ROW_COLUMNS)}) FROM STDIN"
        binary = not self._jsonb

        def copy() -> None:
            with self._raw.cursor() as cur, cur.copy(sql + BINARY * binary) as stream:
                if binary:
                    stream.set_types(["text"] * len(ROW_COLUMNS))
                for event in events:
                    stream.write_row(event_values(event))

        self._run(copy)
        self._growth.copied(len(events))

    @contextmanager
    def _schema_lock(self, conn: Connection) -> Iterator[None]:
        conn.exec_driver_sql("BEGIN")
        try:
            conn.execute(sa.text(f"SELECT {XACT_LOCK}(:k)"), {"k": self._advisory_key})
            if self.where.schema:
                conn.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{self.where.schema}"')
            yield
        except BaseException:
            self._rollback_quietly()
            raise
        conn.exec_driver_sql("COMMIT")

    def _json_field(self, *path: str) -> str:
        return f"(json::jsonb #>> '{{{','.join(path)}}}')"

    def _ids_select(self, name: str) -> sa.Select[Any]:
        return sa.select(sa.func.pg_catalog.unnest(sa.bindparam(name, type_=ARRAY(sa.Text))))

    def _in_ids(self, column: sa.ColumnElement[Any], name: str) -> sa.ColumnElement[bool]:
        # One array parameter for any number of ids; the planner probes the index per element.
        return column == sa.any_(sa.bindparam(name, type_=ARRAY(sa.Text)))

    def _ids_param(self, ids: Sequence[str]) -> Any:
        return list(ids)

    def _json_is_jsonb(self, conn: Connection) -> bool:
        return json_is_jsonb(conn, self._qualified)

    def _home_schema(self) -> str | None:
        found = self._run(lambda: resolve(self._raw, self._qualified))
        return self.where.schema if found is None else found[0]

    def _reason(self, exc: BaseException) -> str:
        return hinted(super()._reason(exc), exc)

    def _connection_lost(self) -> bool:
        return bool(self._raw.closed or self._raw.broken)

    # -- housekeeping ------------------------------------------------------------------------

    def keystore(self, location: str | None = None) -> KeyStore:
        """Crypto-shred keys in a database of their own (see ``keystore``): by default
        ``<db>_keys`` on this server, created on first use if the role may; a file path puts
        them in a file key store instead. The erasure log is a table here (``erasurelog``)."""
        from .erasurelog import ErasureLog, LoggedFileKeys
        from .keystore import PostgresKeyStore, default_keys_location

        log, settle = ErasureLog(self), not self.read_only  # a reader settles nothing
        if location is not None and not location.lower().startswith(("postgres:", "postgresql:")):
            return LoggedFileKeys(location, log, create=settle)
        where = default_keys_location(self.where) if location is None else location
        creator = self.where.connect_url if location is None else None  # given: it must exist
        return PostgresKeyStore(
            where, creator_url=creator, settle=settle, erasures=log, **self.bounds()
        )

    def local_files(self) -> list[str] | None:
        """The relation files of the table, its TOAST table and their indexes, when the server's
        data directory is on this machine (an embedded or local server); None otherwise, or when
        the role may not read ``data_directory`` (``relfiles``)."""
        if self._depth:
            raise EventBackendError(f"{self.location}: local_files cannot run inside a transaction")
        return relation_files(self._run(lambda: find_relations(self._raw, [self._qualified])))

    def compact(self) -> None:
        """``VACUUM FULL`` (unless ``?vacuum=false``); what it cannot erase: ``vacuum``."""
        if self._depth and self.vacuum:
            raise EventBackendError(f"{self.location}: compact cannot run inside a transaction")
        try:
            self._run(lambda: self.vacuum_checked(self._raw, self._qualified, self.location))
        except EventBackendError as exc:
            if not self._forget_xids:  # no forget waits for it (a compact called on its own)
                raise
            # After a forget's commit (this backend's, or one marked pending): it stands.
            raise EventBackendError(f"{exc}; {UNFINISHED}") from None
