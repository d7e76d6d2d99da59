"""The shared SQL event store: SPEC section 3's ``events`` table on SQLAlchemy Core.

The SQLite and PostgreSQL plugins are thin dialect subclasses of ``SqlEventStore``; everything
they share lives here: the table layout and its DDL, the row written for an event, the indexed
query behind each ``EventStore`` question, decoding rows back into events, in-place migration of
tables that lack the query columns, and the write section.

Nothing in the core imports this module (only the plugins do), so the core installs and imports
without SQLAlchemy.

Design notes, because each was a choice:

* One connection per store, in driver autocommit mode, guarded by a re-entrant lock. Reads are
  single statements that see every committed write, including other processes'; a write section
  is an explicit ``BEGIN`` (the dialect adds its write lock) ... ``COMMIT``, so the ledger's
  validate-then-append is one database transaction.
* The DDL is written out as text, byte for byte the layout of SPEC section 3, so a table made by
  the TypeScript implementation and one made here are the same; queries are SQLAlchemy Core.
* ``tx_time`` holds the normalised wire time, so comparing the column as text compares instants.
* Result sets that can be large (``find_asserts`` without filters, ``iter_events``) are read in
  pages keyed on ``seq``, so memory stays flat and no cursor stays open between pages.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .eventstore import EventStore, EventStoreError
from .ledger.model import (
    AssertEvent,
    Event,
    ForgetEvent,
    Forgotten,
    event_from_json,
    forget_assert,
)
from .timeutil import wire_time_key

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The four columns filled for asserts only (an older layout lacks them).
QUERY_COLUMNS = ("space", "subject", "predicate", "supersedes")

#: Index name suffix -> indexed columns (SPEC 3). The name is ``<prefix>_<suffix>``.
INDEXES: dict[str, tuple[str, ...]] = {
    "fact": ("fact_id",),
    "subject": ("subject", "predicate"),
    "space": ("space", "tx_time"),
    "supersedes": ("supersedes",),
    "tx": ("tx_time",),
}

#: Columns after ``seq``, with their SPEC types; ``seq``'s type is the dialect's.
_COLUMNS_DDL = (
    "event_id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, tx_time TEXT NOT NULL, "
    "fact_id TEXT NOT NULL, space TEXT, subject TEXT, predicate TEXT, supersedes TEXT, "
    "json TEXT NOT NULL"
)

#: Ids per ``IN (...)`` list: far below every engine's parameter limit.
_IN_CHUNK = 500
#: Rows per page of a streamed read.
_PAGE = 2000

TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$")


def events_table(name: str, schema: str | None = None, *, json_type: Any = None) -> sa.Table:
    """The SQLAlchemy Core description of the events table (for queries; DDL is ``create_ddl``)."""
    return sa.Table(
        name,
        sa.MetaData(),
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("event_id", sa.Text, nullable=False, unique=True),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("tx_time", sa.Text, nullable=False),
        sa.Column("fact_id", sa.Text, nullable=False),
        sa.Column("space", sa.Text),
        sa.Column("subject", sa.Text),
        sa.Column("predicate", sa.Text),
        sa.Column("supersedes", sa.Text),
        sa.Column("json", json_type if json_type is not None else sa.Text, nullable=False),
        schema=schema,
    )


def create_ddl(qualified: str, index_prefix: str, seq_type: str) -> list[str]:
    """``CREATE TABLE`` and ``CREATE INDEX`` statements, exactly SPEC section 3's layout.

    ``qualified`` is the (already quoted if need be) table name, ``index_prefix`` the index name
    stem (``events`` for SQLite, the table name with ``.`` replaced by ``_`` for Postgres).
    """
    statements = [f"CREATE TABLE IF NOT EXISTS {qualified} (seq {seq_type}, {_COLUMNS_DDL})"]
    statements += index_ddl(qualified, index_prefix, INDEXES)
    return statements


def index_ddl(qualified: str, prefix: str, indexes: dict[str, tuple[str, ...]]) -> list[str]:
    return [
        f"CREATE INDEX IF NOT EXISTS {prefix}_{suffix} ON {qualified} ({', '.join(columns)})"
        for suffix, columns in indexes.items()
    ]


def event_row(event: Event) -> dict[str, Any]:
    """The row stored for an event: query columns for asserts only, the wire JSON verbatim."""
    row: dict[str, Any] = {
        "event_id": event.event_id,
        "kind": event.kind,
        "tx_time": wire_time_key(event.tx_time),
        "fact_id": event.fact_id,
        "space": None,
        "subject": None,
        "predicate": None,
        "supersedes": None,
        "json": event.to_json(),
    }
    if isinstance(event, AssertEvent):
        row["space"] = event.fact.space
        row["subject"] = event.fact.subject
        row["predicate"] = event.fact.predicate
        row["supersedes"] = event.supersedes
    return row


def _chunks(items: Sequence[T], size: int = _IN_CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class SqlEventStore(EventStore):
    """An ``EventStore`` over one SQL table; dialect subclasses supply connection and locking.

    Subclasses set ``kind`` and implement ``_begin_write`` (start a transaction holding the
    cross-process write lock), ``_schema_lock`` (serialise schema setup when the table may not
    exist yet), ``_json_field`` (SQL extracting a text field from the stored JSON, for migration)
    and optionally ``compact``.
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
        try:
            self._conn: Connection = engine.connect()
        except sa.exc.SQLAlchemyError as exc:
            raise EventStoreError(f"cannot open {self.location}: {_reason(exc)}") from None
        try:
            self._ensure_schema()
        except BaseException:
            self.close()
            raise

    # -- dialect hooks -----------------------------------------------------------------------

    def _begin_write(self, conn: Connection) -> None:
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

    def _json_column_type(self, conn: Connection) -> Any:
        """The SQLAlchemy type to use for the json column (Postgres may find jsonb)."""
        return None

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
        columns, indexes = self._run(lambda: self._inspect(conn))
        if not self._schema_ok(columns, indexes):
            with self._schema_lock(conn):
                columns, indexes = self._inspect(conn)  # another process may have done it
                if columns is None:
                    for statement in create_ddl(self._qualified, self._index_prefix, self.seq_ddl):
                        conn.exec_driver_sql(statement)
                else:
                    self._migrate(conn, columns, indexes)
        self.table = events_table(
            self._table_name, self._schema, json_type=self._json_column_type(conn)
        )
        t = self.table
        self._json_out: sa.ColumnElement[Any] = (
            t.c.json if isinstance(t.c.json.type, sa.Text) else sa.cast(t.c.json, sa.Text)
        )

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
        wanted = {s: cols for s, cols in INDEXES.items() if f"{self._index_prefix}_{s}" not in indexes}
        for statement in index_ddl(self._qualified, self._index_prefix, wanted):
            conn.exec_driver_sql(statement)

    # -- plumbing ----------------------------------------------------------------------------

    def _run(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` under the store lock, turning driver errors into ``EventStoreError``."""
        with self._lock:
            if self._closed:
                raise EventStoreError(f"ledger {self.location} is closed")
            try:
                return fn()
            except sa.exc.SQLAlchemyError as exc:
                raise EventStoreError(f"{self.location}: {_reason(exc)}") from None

    def _rows(self, stmt: sa.Executable, params: dict[str, Any] | None = None) -> list[Any]:
        return self._run(lambda: self._conn.execute(stmt, params or {}).all())

    def _select(self) -> sa.Select[Any]:
        return sa.select(self.table.c.seq, self._json_out)

    def _decode(self, rows: Sequence[Any]) -> list[Any]:
        try:
            return [event_from_json(row[1]) for row in rows]
        except ValueError:
            for seq, text in rows:  # find and name the bad row
                try:
                    event_from_json(text)
                except ValueError as exc:
                    raise EventStoreError(
                        f"{self.location}: the event with seq {seq} is not a valid event: {exc}"
                    ) from None
            raise

    def _by_ids(self, column: sa.ColumnElement[Any], ids: Collection[str]) -> list[Any]:
        """Rows whose ``column`` is in ``ids`` (chunked), in ``seq`` order."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        rows: list[Any] = []
        for chunk in _chunks(unique):
            stmt = self._select().where(column.in_(chunk)).order_by(self.table.c.seq)
            rows += self._rows(stmt)
        if len(unique) > _IN_CHUNK:
            rows.sort(key=lambda r: r[0])
        return rows

    # -- writing -----------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            if self._closed:
                raise EventStoreError(f"ledger {self.location} is closed")
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            conn = self._conn
            try:
                self._begin_write(conn)
            except sa.exc.SQLAlchemyError as exc:
                self._rollback_quietly()
                raise EventStoreError(
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
                    conn.exec_driver_sql("COMMIT")
                except sa.exc.SQLAlchemyError as exc:
                    self._rollback_quietly()
                    raise EventStoreError(
                        f"{self.location}: commit failed, nothing was written: {_reason(exc)}"
                    ) from None
            finally:
                self._depth = 0

    def _rollback_quietly(self) -> None:
        # Fails harmlessly when no transaction is open (BEGIN itself failed).
        with suppress(sa.exc.SQLAlchemyError):
            self._conn.exec_driver_sql("ROLLBACK")

    def _require_tx(self) -> None:
        if not self._depth:
            raise RuntimeError("append/forget must run inside store.transaction()")

    def append(self, events: Sequence[Event]) -> None:
        self._require_tx()
        if not events:
            return
        rows = [event_row(e) for e in events]
        # A list of parameter sets is one executemany (or multi-row VALUES) per batch.
        self._run(lambda: self._conn.execute(self.table.insert(), rows))

    def forget(self, fact_id: str, forgotten: Forgotten, event: ForgetEvent) -> None:
        self._require_tx()
        t = self.table
        rows = self._rows(
            self._select().where(t.c.fact_id == fact_id, t.c.kind == "assert").order_by(t.c.seq)
        )
        updates = [
            {"s": row[0], "j": forget_assert(event, forgotten).to_json()}
            for row, event in zip(rows, self._decode(rows), strict=True)
        ]
        if updates:
            stmt = (
                t.update()
                .where(t.c.seq == sa.bindparam("s"))
                .values(json=sa.bindparam("j", type_=t.c.json.type))
            )
            self._run(lambda: self._conn.execute(stmt, updates))
        self.append([event])

    # -- reading -----------------------------------------------------------------------------

    def get_assert(self, fact_id: str) -> AssertEvent | None:
        t = self.table
        stmt = (
            self._select()
            .where(t.c.fact_id == fact_id, t.c.kind == "assert")
            .order_by(t.c.seq)
            .limit(1)
        )
        rows = self._rows(stmt)
        return self._decode(rows)[0] if rows else None

    def events_for(self, fact_ids: Collection[str]) -> list[Event]:
        return self._decode(self._by_ids(self.table.c.fact_id, fact_ids))

    def superseders(self, fact_ids: Collection[str]) -> list[AssertEvent]:
        return self._decode(self._by_ids(self.table.c.supersedes, fact_ids))

    def history(self, fact_id: str) -> list[Event]:
        t = self.table
        stmt = (
            self._select()
            .where(sa.or_(t.c.fact_id == fact_id, t.c.supersedes == fact_id))
            .order_by(t.c.seq)
        )
        return self._decode(self._rows(stmt))

    def find_asserts(
        self,
        *,
        space: str | None = None,
        subject: str | None = None,
        predicate: str | None = None,
        tx_at: str | None = None,
        tx_before: str | None = None,
    ) -> Iterator[AssertEvent]:
        t = self.table
        where: list[sa.ColumnElement[bool]] = [t.c.kind == "assert"]
        if space is not None:
            where.append(t.c.space == space)
        if subject is not None:
            where.append(t.c.subject == subject)
        if predicate is not None:
            where.append(t.c.predicate == predicate)
        if tx_at is not None:
            where.append(t.c.tx_time <= tx_at)
        if tx_before is not None:
            where.append(t.c.tx_time < tx_before)
        # The first page is fetched now, so the common small answer costs one query and a
        # caller sees errors at the call, not at the first next().
        first = self._page(where, 0)
        return self._pages(where, first)

    def _page(self, where: list[sa.ColumnElement[bool]], after: int) -> list[Any]:
        t = self.table
        stmt = self._select().where(*where, t.c.seq > after).order_by(t.c.seq).limit(_PAGE)
        return self._rows(stmt)

    def _pages(self, where: list[sa.ColumnElement[bool]], rows: list[Any]) -> Iterator[Any]:
        while True:
            yield from self._decode(rows)
            if len(rows) < _PAGE:
                return
            rows = self._page(where, rows[-1][0])

    def spaces(self) -> list[str]:
        # A loose index scan over events_space: one index probe per distinct space, instead of
        # reading every entry of the index.
        t = self.table
        first = sa.select(sa.func.min(t.c.space).label("space")).cte("spaces", recursive=True)
        nxt = sa.select(
            sa.select(sa.func.min(t.c.space))
            .where(t.c.space > first.c.space)
            .scalar_subquery()
        ).where(first.c.space.is_not(None))
        walk = first.union_all(nxt)
        rows = self._rows(sa.select(walk.c.space).where(walk.c.space.is_not(None)))
        return sorted(r[0] for r in rows)

    def count(self) -> int:
        rows = self._rows(sa.select(sa.func.count()).select_from(self.table))
        return int(rows[0][0])

    def iter_events(self) -> Iterator[Event]:
        last = 0
        t = self.table
        while True:
            rows = self._rows(self._select().where(t.c.seq > last).order_by(t.c.seq).limit(_PAGE))
            yield from self._decode(rows)
            if len(rows) < _PAGE:
                return
            last = rows[-1][0]

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
