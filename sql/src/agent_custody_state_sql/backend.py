"""The shared SQL event store: SPEC section 3's ``events`` table on SQLAlchemy Core.

The SQLite and PostgreSQL plugins are thin dialect subclasses of ``SqlEventBackend``; everything
they share lives here (the table layout, its DDL and the row written for an event are in
``sqlschema``): the indexed query behind each ``EventBackend`` question, decoding rows back into events, in-place migration of
tables that lack the query columns, and the write section.

Nothing in the core imports this module (only the plugins do), so the core installs and imports
without SQLAlchemy.

Design notes, because each was a choice:

* One connection per store, in driver autocommit mode, guarded by a re-entrant lock. Reads are
  single statements that see every committed write, including other processes'; a write section
  is an explicit ``BEGIN`` (the dialect adds its write lock) ... ``COMMIT``, so the ledger's
  validate-then-append is one database transaction.
* The DDL is written out as text, byte for byte the layout of SPEC section 3, so a table made by
  the TypeScript implementation and one made here are the same.
* Queries are SQLAlchemy Core statements, compiled once per store for its dialect and then run
  on the driver's cursor (``Prepared``). Building and executing a Core statement costs 30-180 µs
  of Python per call, several times the indexed lookup itself; compiled once, a lookup is a
  few microseconds, which is what lets a read stay within a small factor of hand-written SQL.
* No cache of decoded events (see ``_decode``): the garbage collector pays for every one.
* Id lists are one parameter (a JSON array for SQLite's ``json_each``, an array for Postgres'
  ``= ANY``), so one statement serves any number of ids.
* ``tx_time`` holds the normalised wire time, so comparing the column as text compares instants.
* Result sets that can be large (``find_asserts`` without filters, ``iter_events``) are read in
  pages keyed on ``seq``, so memory stays flat and no cursor stays open between pages.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from agent_custody_state.ledger.backend import EventBackend, EventBackendError
from agent_custody_state_sql.schema import (
    _ROW_COLUMNS,
    INDEXES,
    QUERY_COLUMNS,
    Prepared,
    create_ddl,
    event_row,
    events_table,
    index_ddl,
)
from agent_custody_state.ledger.model import (
    AssertEvent,
    Event,
    ForgetEvent,
    Forgotten,
    event_from_json,
    forget_assert,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Ids per statement: bounds the size of one parameter, not a driver limit.
_ID_CHUNK = 5000
#: Rows per page of a streamed read.
_PAGE = 2000


class SqlEventBackend(EventBackend):
    """An ``EventBackend`` over one SQL table; dialect subclasses supply connection and locking.

    Subclasses set ``kind`` and ``seq_ddl`` and implement ``_begin_write`` (start a transaction
    holding the cross-process write lock), ``_schema_lock`` (serialise schema setup when the
    table may not exist yet), ``_json_field`` (SQL extracting a text field from the stored JSON,
    for migration) and ``_in_ids``/``_ids_param`` (an id-list predicate with one parameter), and
    optionally ``_json_is_jsonb`` and ``compact``.
    """

    #: the dialect's type for ``seq`` in ``CREATE TABLE``
    seq_ddl: str = ""

    def __init__(
        self,
        engine: Engine,
        *,
        location: str,
        table: str = "events",
        schema: str | None = None,
        quoted_table: str | None = None,
        index_prefix: str | None = None,
    ) -> None:
        self.location = location
        self._engine = engine
        self._lock = threading.RLock()
        self._depth = 0
        self._closed = False
        self._table_name = table
        self._schema = schema
        self._qualified = quoted_table or (f"{schema}.{table}" if schema else table)
        self._index_prefix = index_prefix or (f"{schema}_{table}" if schema else table)
        self._find: dict[tuple[bool, ...], Prepared] = {}
        self._around_by: dict[tuple[bool, ...], Prepared] = {}
        self._driver_error: type[Exception] = engine.dialect.loaded_dbapi.Error
        try:
            self._conn: Connection = engine.connect()
        except sa.exc.SQLAlchemyError as exc:
            raise EventBackendError(f"cannot open {self.location}: {_reason(exc)}") from None
        try:
            self._raw: Any = self._conn.connection.driver_connection
            self._ensure_schema()
            self._prepare()
        except BaseException:
            self.close()
            raise

    # -- dialect hooks -----------------------------------------------------------------------

    def _begin_write(self) -> None:
        """Start a transaction that holds the table's write lock until commit or rollback."""
        raise NotImplementedError

    @contextmanager
    def _schema_lock(self, conn: Connection) -> Iterator[None]:
        """A transaction serialising schema creation and migration across processes."""
        raise NotImplementedError
        yield  # pragma: no cover

    def _json_field(self, *path: str) -> str:
        """SQL text extracting ``path`` (e.g. ``fact``, ``space``) from the json column as text."""
        raise NotImplementedError

    def _ids_select(self, name: str) -> sa.Select[Any]:
        """A one-column SELECT of the ids passed (as ``_ids_param``) in bind parameter ``name``."""
        raise NotImplementedError

    def _in_ids(self, column: sa.ColumnElement[Any], name: str) -> sa.ColumnElement[bool]:
        """``column`` is one of the ids passed in bind parameter ``name``."""
        return column.in_(self._ids_select(name))

    def _ids_param(self, ids: Sequence[str]) -> Any:
        raise NotImplementedError

    def _json_is_jsonb(self, conn: Connection) -> bool:
        """Whether the json column is jsonb (Postgres tables of older writers)."""
        return False

    # -- schema ------------------------------------------------------------------------------

    def _inspect(self, conn: Connection) -> tuple[set[str] | None, set[str]]:
        """Column names (None if the table is missing) and index names of the table."""
        insp = sa.inspect(conn)
        if not insp.has_table(self._table_name, schema=self._schema):
            return None, set()
        columns = {c["name"] for c in insp.get_columns(self._table_name, schema=self._schema)}
        indexes = {i["name"] for i in insp.get_indexes(self._table_name, schema=self._schema)}
        return columns, {i for i in indexes if i}

    def _schema_ok(self, columns: set[str] | None, indexes: set[str]) -> bool:
        return (
            columns is not None
            and set(QUERY_COLUMNS) <= columns
            and {f"{self._index_prefix}_{s}" for s in INDEXES} <= indexes
        )

    def _ensure_schema(self) -> None:
        """Create the table, or migrate an older one in place; never reads events."""
        conn = self._conn
        try:
            columns, indexes = self._inspect(conn)
            if not self._schema_ok(columns, indexes):
                with self._schema_lock(conn):
                    columns, indexes = self._inspect(conn)  # another process may have done it
                    if columns is None:
                        for statement in create_ddl(
                            self._qualified, self._index_prefix, self.seq_ddl
                        ):
                            conn.exec_driver_sql(statement)
                    else:
                        self._migrate(conn, columns, indexes)
            self._jsonb = self._json_is_jsonb(conn)
        except (sa.exc.SQLAlchemyError, self._driver_error) as exc:
            raise EventBackendError(f"cannot open {self.location}: {_reason(exc)}") from None

    def _migrate(self, conn: Connection, columns: set[str], indexes: set[str]) -> None:
        """Add and fill the query columns an older layout lacks, then any missing index."""
        missing = [c for c in QUERY_COLUMNS if c not in columns]
        for column in missing:
            conn.exec_driver_sql(f"ALTER TABLE {self._qualified} ADD COLUMN {column} TEXT")
        if missing:
            sources = {
                "space": self._json_field("fact", "space"),
                "subject": self._json_field("fact", "subject"),
                "predicate": self._json_field("fact", "predicate"),
                "supersedes": self._json_field("supersedes"),
            }
            assignments = ", ".join(f"{c} = {sources[c]}" for c in missing)
            conn.exec_driver_sql(
                f"UPDATE {self._qualified} SET {assignments} WHERE kind = 'assert'"
            )
            log.warning("%s: added the query columns %s to an older table", self.location,
                        ", ".join(missing))
        prefix = self._index_prefix
        wanted = {s: cols for s, cols in INDEXES.items() if f"{prefix}_{s}" not in indexes}
        for statement in index_ddl(self._qualified, prefix, wanted):
            conn.exec_driver_sql(statement)

    def _prepare(self) -> None:
        """Compile every statement the store runs, once."""
        t = self.table = events_table(self._table_name, self._schema)
        json_out = sa.cast(t.c.json, sa.Text) if self._jsonb else t.c.json
        self._base = sa.select(t.c.seq, json_out)
        p = self._compile
        seq, kind = t.c.seq, t.c.kind
        self._q_assert = p(self._base.where(t.c.fact_id == sa.bindparam("f"), kind == "assert")
                           .order_by(seq).limit(1))
        self._q_for = p(self._base.where(self._in_ids(t.c.fact_id, "ids")).order_by(seq))
        self._q_supers = p(self._base.where(self._in_ids(t.c.supersedes, "ids")).order_by(seq))
        # events_around: the ids themselves and the facts superseding them, in one IN list.
        sup = t.alias("sup")
        around_ids = sa.union(
            self._ids_select("ids"),
            sa.select(sup.c.fact_id).where(self._in_ids(sup.c.supersedes, "ids")),
        )
        self._q_around = p(self._base.where(t.c.fact_id.in_(around_ids)).order_by(seq))
        self._q_history = p(self._base.where(sa.or_(t.c.fact_id == sa.bindparam("f"),
                                                    t.c.supersedes == sa.bindparam("f2")))
                            .order_by(seq))
        self._q_count = p(sa.select(sa.func.count()).select_from(t))
        self._q_page = p(self._base.where(seq > sa.bindparam("after")).order_by(seq)
                         .limit(sa.bindparam("n")))
        # A loose index scan over events_space: one index probe per distinct space, instead
        # of reading every entry of the index.
        first = sa.select(sa.func.min(t.c.space).label("space")).cte("spaces", recursive=True)
        nxt = sa.select(
            sa.select(sa.func.min(t.c.space)).where(t.c.space > first.c.space).scalar_subquery()
        ).where(first.c.space.is_not(None))
        walk = first.union_all(nxt)
        self._q_spaces = p(sa.select(walk.c.space).where(walk.c.space.is_not(None)))
        json_in: sa.ColumnElement[Any] = sa.bindparam("json", type_=sa.Text)
        if self._jsonb:
            from sqlalchemy.dialects.postgresql import JSONB

            json_in = sa.cast(json_in, JSONB)
        values = {c: sa.bindparam(c, type_=sa.Text) for c in _ROW_COLUMNS if c != "json"}
        self._q_insert = p(t.insert().values(**values, json=json_in))
        self._q_rewrite = p(t.update().where(t.c.seq == sa.bindparam("s")).values(json=json_in))
        self._q_fact_asserts = p(self._base.where(t.c.fact_id == sa.bindparam("f"),
                                                  kind == "assert").order_by(seq))

    def _compile(self, stmt: sa.ClauseElement) -> Prepared:
        return Prepared(stmt, self._engine.dialect)

    # -- plumbing ----------------------------------------------------------------------------

    def _run(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` under the store lock, turning driver errors into ``EventBackendError``.

        A connection the server dropped (restart, idle timeout) is replaced once and ``fn``
        retried, but only outside a write section: inside one, the transaction is gone and the
        caller must see the failure.
        """
        with self._lock:
            if self._closed:
                raise EventBackendError(f"ledger {self.location} is closed")
            try:
                return fn()
            except UnicodeEncodeError as exc:
                # A Python str with a lone surrogate (JSON cannot carry one) has no UTF-8 form,
                # so no SQL text column can store or match it: a refusal, not a crash.
                bad = exc.object[exc.start : exc.end]
                raise EventBackendError(
                    f"{self.location}: text with a lone surrogate ({bad!r}) cannot be stored "
                    "or looked up; pass valid Unicode"
                ) from None
            except (sa.exc.SQLAlchemyError, self._driver_error) as exc:
                if self._depth or not self._connection_lost():
                    raise EventBackendError(f"{self.location}: {_reason(exc)}") from None
            try:
                self._reconnect()
                return fn()
            except (sa.exc.SQLAlchemyError, self._driver_error) as exc:
                raise EventBackendError(f"{self.location}: {_reason(exc)}") from None

    def _connection_lost(self) -> bool:
        """Whether the driver connection is dead (the dialect knows how to tell)."""
        return False

    def _reconnect(self) -> None:
        with suppress(Exception):
            self._conn.invalidate()
        self._conn = self._engine.connect()
        self._raw = self._conn.connection.driver_connection

    def _rows(self, q: Prepared, params: dict[str, Any] | None = None) -> list[Any]:
        def run() -> list[Any]:
            cur = self._raw.cursor()
            try:
                cur.execute(q.sql, q.args(params or {}))
                return list(cur.fetchall())
            finally:
                cur.close()

        return self._run(run)

    def _many(self, q: Prepared, params: list[dict[str, Any]]) -> None:
        def run() -> None:
            cur = self._raw.cursor()
            try:
                if len(params) == 1:  # a single append: executemany's batching only costs
                    cur.execute(q.sql, q.args(params[0]))
                else:
                    cur.executemany(q.sql, [q.args(p) for p in params])
            finally:
                cur.close()

        self._run(run)

    def _exec(self, sql: str) -> None:
        cur = self._raw.cursor()
        try:
            cur.execute(sql)
        finally:
            cur.close()

    def _decode(self, rows: Sequence[Any]) -> list[Any]:
        # No cache of decoded events: a read by subject asks one query that returns each event
        # once, and thousands of cached, long-lived events made every GC pass (and so the p99
        # of reads) several times slower than the decoding they saved.
        try:
            return [event_from_json(row[1]) for row in rows]
        except ValueError:
            for row in rows:  # name the bad row
                self._decode_one(row[0], row[1])
            raise

    def _by_ids(self, q: Prepared, ids: Collection[str]) -> list[Any]:
        """Rows of ``q`` for ``ids`` (in chunks), in ``seq`` order."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        rows: list[Any] = []
        for start in range(0, len(unique), _ID_CHUNK):
            chunk = unique[start : start + _ID_CHUNK]
            rows += self._rows(q, {"ids": self._ids_param(chunk)})
        if len(unique) > _ID_CHUNK:
            rows.sort(key=lambda r: r[0])
        return rows

    # -- writing -----------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            if self._closed:
                raise EventBackendError(f"ledger {self.location} is closed")
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            try:
                try:
                    self._begin_write()
                except (sa.exc.SQLAlchemyError, self._driver_error):
                    if not self._connection_lost():
                        raise
                    self._reconnect()  # nothing was written yet: safe to start again
                    self._begin_write()
            except (sa.exc.SQLAlchemyError, self._driver_error) as exc:
                self._rollback_quietly()
                raise EventBackendError(
                    f"{self.location}: could not take the write lock: {_reason(exc)}"
                ) from None
            self._depth = 1
            try:
                try:
                    yield
                except BaseException:
                    self._rollback_quietly()
                    raise
                try:
                    self._exec("COMMIT")
                except (sa.exc.SQLAlchemyError, self._driver_error) as exc:
                    self._rollback_quietly()
                    # Not "nothing was written": a COMMIT whose answer was lost (connection
                    # dropped) may have committed, and so may a SQLite commit whose WAL fsync
                    # failed (the next open replays the frames). Retrying blindly duplicates.
                    raise EventBackendError(
                        f"{self.location}: commit failed: {_reason(exc)}; the write is not "
                        "acknowledged and may or may not have been recorded: look (e.g. "
                        "memory.get / history) before retrying"
                    ) from None
            finally:
                self._depth = 0

    def _rollback_quietly(self) -> None:
        # Fails harmlessly when no transaction is open (BEGIN itself failed).
        with suppress(sa.exc.SQLAlchemyError, self._driver_error):
            self._exec("ROLLBACK")

    def _require_tx(self) -> None:
        if not self._depth:
            raise RuntimeError("append/forget must run inside store.transaction()")

    def append(self, events: Sequence[Event]) -> None:
        self._require_tx()
        if events:
            self._many(self._q_insert, [event_row(e) for e in events])

    def forget(self, fact_id: str, forgotten: Forgotten, event: ForgetEvent) -> None:
        self._require_tx()
        rows = self._rows(self._q_fact_asserts, {"f": fact_id})
        updates = [
            {"s": row[0], "json": forget_assert(old, forgotten).to_json()}
            for row, old in zip(rows, self._decode(rows), strict=True)
        ]
        if updates:
            self._many(self._q_rewrite, updates)
        self.append([event])

    # -- reading -----------------------------------------------------------------------------

    def get_assert(self, fact_id: str) -> AssertEvent | None:
        rows = self._rows(self._q_assert, {"f": fact_id})
        return self._decode(rows)[0] if rows else None

    def events_for(self, fact_ids: Collection[str]) -> list[Event]:
        return self._decode(self._by_ids(self._q_for, fact_ids))

    def superseders(self, fact_ids: Collection[str]) -> list[AssertEvent]:
        return self._decode(self._by_ids(self._q_supers, fact_ids))

    def events_around(self, fact_ids: Collection[str]) -> list[Event]:
        return self._decode(self._by_ids(self._q_around, fact_ids))

    def asserts_around(
        self,
        *,
        space: str | None = None,
        subject: str | None = None,
        predicate: str | None = None,
        tx_at: str | None = None,
    ) -> tuple[list[AssertEvent], list[Event]]:
        if subject is None:  # possibly huge: the paged two-step path
            return super().asserts_around(
                space=space, subject=subject, predicate=predicate, tx_at=tx_at
            )
        params = {"space": space, "subject": subject, "predicate": predicate, "tx_at": tx_at}
        shape = tuple(v is not None for v in params.values())
        q = self._around_by.get(shape)
        if q is None:
            q = self._around_by[shape] = self._compile(self._asserts_around_stmt(shape))
        rows = self._rows(q, {k: v for k, v in params.items() if v is not None})
        events = self._decode(rows)
        found = [e for row, e in zip(rows, events, strict=True) if row[2]]
        return found, events

    def _asserts_around_stmt(self, shape: tuple[bool, ...]) -> sa.Select[Any]:
        """Rows of the matching asserts and of everything around them, each flagged if it is
        one of the matching asserts (the filter re-applied to the row's own columns)."""
        t = self.table
        names = ("space", "subject", "predicate")
        match = [t.c.kind == "assert"]
        match += [t.c[n] == sa.bindparam(n) for n, given in zip(names, shape, strict=False)
                  if given]
        if shape[3]:
            match.append(t.c.tx_time <= sa.bindparam("tx_at"))
        found = sa.select(t.c.fact_id).where(*match)
        sup = t.alias("sup")
        ids = sa.union(found, sa.select(sup.c.fact_id).where(sup.c.supersedes.in_(found)))
        flag = sa.case((sa.and_(*match), 1), else_=0)
        return (
            sa.select(t.c.seq, self._base.selected_columns[1], flag)
            .where(t.c.fact_id.in_(ids))
            .order_by(t.c.seq)
        )

    def history(self, fact_id: str) -> list[Event]:
        return self._decode(self._rows(self._q_history, {"f": fact_id, "f2": fact_id}))

    def find_asserts(
        self,
        *,
        space: str | None = None,
        subject: str | None = None,
        predicate: str | None = None,
        tx_at: str | None = None,
        tx_before: str | None = None,
    ) -> Iterator[AssertEvent]:
        params = {"space": space, "subject": subject, "predicate": predicate, "tx_at": tx_at,
                  "tx_before": tx_before}
        shape = tuple(v is not None for v in params.values())
        q = self._find.get(shape)
        if q is None:
            q = self._find[shape] = self._compile(self._find_stmt(shape))
        given = {k: v for k, v in params.items() if v is not None}
        # The first page is fetched now, so the common small answer costs one query and a
        # caller sees errors at the call, not at the first next().
        rows = self._rows(q, {**given, "after": 0, "n": _PAGE})
        return self._pages(q, given, rows)

    def _find_stmt(self, shape: tuple[bool, ...]) -> sa.Select[Any]:
        t = self.table
        space, subject, predicate, tx_at, tx_before = shape
        where: list[sa.ColumnElement[bool]] = [t.c.kind == "assert"]
        if space:
            where.append(t.c.space == sa.bindparam("space"))
        if subject:
            where.append(t.c.subject == sa.bindparam("subject"))
        if predicate:
            where.append(t.c.predicate == sa.bindparam("predicate"))
        if tx_at:
            where.append(t.c.tx_time <= sa.bindparam("tx_at"))
        if tx_before:
            where.append(t.c.tx_time < sa.bindparam("tx_before"))
        where.append(t.c.seq > sa.bindparam("after"))
        return self._base.where(*where).order_by(t.c.seq).limit(sa.bindparam("n"))

    def _pages(self, q: Prepared, given: dict[str, Any], rows: list[Any]) -> Iterator[Any]:
        while True:
            yield from self._decode(rows)
            if len(rows) < _PAGE:
                return
            rows = self._rows(q, {**given, "after": rows[-1][0], "n": _PAGE})

    def spaces(self) -> list[str]:
        return sorted(r[0] for r in self._rows(self._q_spaces))

    def count(self) -> int:
        return int(self._rows(self._q_count)[0][0])

    def iter_events(self) -> Iterator[Event]:
        last = 0
        while True:
            rows = self._rows(self._q_page, {"after": last, "n": _PAGE})
            yield from self._decode(rows)
            if len(rows) < _PAGE:
                return
            last = rows[-1][0]

    def _decode_one(self, seq: int, text: str) -> Event:
        try:
            return event_from_json(text)
        except ValueError as exc:
            raise EventBackendError(
                f"{self.location}: the event with seq {seq} is not a valid event: {exc}"
            ) from None

    # -- housekeeping ------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._conn.close()
            finally:
                self._engine.dispose()

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "location": self.location, "table": self._qualified}


def _reason(exc: BaseException) -> str:
    """The driver's own message, without SQLAlchemy's statement dump and help link."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
