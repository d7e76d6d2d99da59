"""SPEC section 3's events table: its columns, DDL, indexes, and the row stored for an event.

Shared by every SQL event backend; the DDL is written out as text so a table made here is byte for
byte the one the TypeScript implementation makes. ``Prepared`` runs a Core statement compiled once
on the driver's cursor.
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa

from agent_custody_state.plugin import AssertEvent, Event, wire_time_key

#: The four columns filled for asserts only (an older layout lacks them).
QUERY_COLUMNS = ("space", "subject", "predicate", "supersedes")

#: The columns every layout of SPEC 3's table has (an older one lacks only ``QUERY_COLUMNS``).
CORE_COLUMNS = ("seq", "event_id", "kind", "tx_time", "fact_id", "json")

#: Index name suffix -> indexed columns (SPEC 3). The name is ``<prefix>_<suffix>``.
INDEXES: dict[str, tuple[str, ...]] = {
    "fact": ("fact_id",),
    "subject": ("subject", "predicate"),
    "space": ("space", "tx_time"),
    "supersedes": ("supersedes",),
    "tx": ("tx_time",),
}

#: Columns after ``seq``, with their SPEC types; ``seq``'s type is the dialect's.
COLUMNS_DDL = (
    "event_id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, tx_time TEXT NOT NULL, "
    "fact_id TEXT NOT NULL, space TEXT, subject TEXT, predicate TEXT, supersedes TEXT, "
    "json TEXT NOT NULL"
)

#: SPEC 3's rule for a Postgres ``?table=`` (kept here so every SQL backend can share it).
TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$")

#: The columns written for an event, in order (``seq`` is the database's).
ROW_COLUMNS = ("event_id", "kind", "tx_time", "fact_id", *QUERY_COLUMNS, "json")


def events_table(name: str, schema: str | None = None) -> sa.Table:
    """The SQLAlchemy Core description of the events table (for queries; DDL is ``create_ddl``)."""
    return sa.Table(
        name,
        sa.MetaData(),
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=True),
        *(
            sa.Column(
                c, sa.Text, nullable=c not in ("event_id", "kind", "tx_time", "fact_id", "json")
            )
            for c in ROW_COLUMNS
        ),
        schema=schema,
    )


def create_ddl(qualified: str, index_prefix: str, seq_type: str) -> list[str]:
    """``CREATE TABLE`` and ``CREATE INDEX`` statements, exactly SPEC section 3's layout.

    ``qualified`` is the (already quoted if need be) table name, ``index_prefix`` the index name
    stem (``events`` for SQLite, the table name with ``.`` replaced by ``_`` for Postgres).
    """
    statements = [f"CREATE TABLE IF NOT EXISTS {qualified} (seq {seq_type}, {COLUMNS_DDL})"]
    statements += index_ddl(qualified, index_prefix, INDEXES)
    return statements


def index_ddl(qualified: str, prefix: str, indexes: dict[str, tuple[str, ...]]) -> list[str]:
    """``CREATE INDEX IF NOT EXISTS`` for each of ``indexes`` (suffix -> columns)."""
    return [
        f"CREATE INDEX IF NOT EXISTS {prefix}_{suffix} ON {qualified} ({', '.join(columns)})"
        for suffix, columns in indexes.items()
    ]


def event_values(event: Event) -> tuple[Any, ...]:
    """The row stored for an event, as a tuple in ``ROW_COLUMNS`` order: query columns for
    asserts only, the wire JSON verbatim. What bulk appends hand the driver (no dict per row)."""
    if isinstance(event, AssertEvent):
        f = event.fact
        return (
            event.event_id,
            "assert",
            wire_time_key(event.tx_time),
            f.fact_id,
            f.space,
            f.subject,
            f.predicate,
            event.supersedes,
            event.to_json(),
        )
    return (
        event.event_id,
        event.kind,
        wire_time_key(event.tx_time),
        event.fact_id,
        None,
        None,
        None,
        None,
        event.to_json(),
    )


def event_row(event: Event) -> dict[str, Any]:
    """The row stored for an event, by column name (``event_values`` as a dict)."""
    return dict(zip(ROW_COLUMNS, event_values(event), strict=True))


class Prepared:
    """A Core statement compiled once for a dialect, run with plain parameters on a DBAPI cursor.

    Bound values fixed in the statement (``kind = 'assert'``) are remembered from compilation;
    the caller supplies the named ``bindparam`` values.
    """

    __slots__ = ("defaults", "names", "sql")

    def __init__(self, stmt: sa.ClauseElement, dialect: sa.Dialect) -> None:
        compiled: Any = stmt.compile(dialect=dialect)  # a SQLCompiler: positional, positiontup
        self.sql = str(compiled)
        self.defaults = {k: v for k, v in compiled.params.items() if v is not None}
        self.names: tuple[str, ...] | None = (
            tuple(compiled.positiontup or ()) if compiled.positional else None
        )

    def rows_args(self, rows: list[tuple[Any, ...]], columns: tuple[str, ...]) -> list[Any]:
        """Driver parameters for ``rows`` (tuples of ``columns``): the tuples themselves when
        the statement is positional in that order (SQLite's insert), else one mapping each."""
        if self.names == columns and not self.defaults:
            return rows
        return [self.args(dict(zip(columns, row, strict=True))) for row in rows]

    def args(self, params: dict[str, Any]) -> Any:
        merged = {**self.defaults, **params} if self.defaults else params
        if self.names is None:
            return merged
        return tuple(merged[n] for n in self.names)


class SideTable:
    """A table ``<events table>_<suffix>`` in the events' schema, beside a SQL ledger's events
    (its checkpoints, its settings): ``table``, its quoted ``name`` and a display ``location``.
    The schema is the one the events table was found in (``_home``), never a name looked up
    along ``search_path`` on its own: that could be another schema's table, or create one there.
    The original reads only the events table, so a side table changes nothing for it."""

    def __init__(self, backend: Any, suffix: str, *columns: sa.Column[Any]) -> None:
        self._backend = backend
        self._dialect: sa.Dialect = backend._engine.dialect
        self.table = sa.Table(
            f"{backend._table_name}_{suffix}", sa.MetaData(), *columns, schema=backend._home
        )
        self.name = self._dialect.identifier_preparer.format_table(self.table)
        self.location = f"{backend.location} table {self.name}"

    def exists(self) -> bool:
        """Whether the table is there, asked of the catalog: a query of a missing table would
        fail (on PostgreSQL aborting the transaction it runs in), and its error text cannot
        tell (a server's messages may be translated: ``lc_messages``)."""
        backend, table = self._backend, self.table
        return bool(
            backend._run(
                lambda: sa.inspect(backend._conn).has_table(table.name, schema=table.schema)
            )
        )
