"""Schema setup for a SQL event backend: create SPEC section 3's table, or migrate an older one.

Opening a backend never reads events. It inspects the table: if it is missing it is created
(``schema.create_ddl``, byte for byte the TypeScript implementation's layout); if it lacks the
query columns of an older layout they are added and filled from the stored JSON, and any missing
index is created. Both happen inside the dialect's schema lock, so two processes opening a new
ledger at once do it once. From then on the table is named in the schema it was found in
(``_pin_home``: PostgreSQL looks an unqualified name up along ``search_path`` at every
statement). A bulk load into an empty table drops the secondary indexes and makes them again at
its end (``indexes_deferred``), each named in that schema.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agent_custody_state.plugin import EventBackendError
from agent_custody_state_sql import readonly
from agent_custody_state_sql.connection import SqlConnection
from agent_custody_state_sql.schema import (
    CORE_COLUMNS,
    INDEXES,
    QUERY_COLUMNS,
    create_ddl,
    index_ddl,
)

log = logging.getLogger(__name__)


class SchemaSetup(SqlConnection):
    """Creates or migrates the events table when a backend opens (``_ensure_schema``).

    Dialects set ``seq_ddl`` and implement ``_schema_lock`` and ``_json_field``, and may
    implement ``_json_is_jsonb``.
    """

    #: the dialect's type for ``seq`` in ``CREATE TABLE``
    seq_ddl: str = ""

    _table_name: str
    _schema: str | None
    _qualified: str
    _index_prefix: str
    _jsonb: bool
    #: The schema the side tables (``schema.SideTable``) are in: the events table's.
    _home: str | None = None

    # -- dialect hooks -----------------------------------------------------------------------

    @contextmanager
    def _schema_lock(self, conn: Connection) -> Iterator[None]:
        """A transaction serialising schema creation and migration across processes."""
        raise NotImplementedError
        yield  # pragma: no cover

    def _json_field(self, *path: str) -> str:
        """SQL text extracting ``path`` (e.g. ``fact``, ``space``) from the json column as text."""
        raise NotImplementedError

    def _home_schema(self) -> str | None:
        """The events table's schema as the server found it (PostgreSQL: an unqualified name is
        looked up along ``search_path``), so its side tables are made and found beside it."""
        return self._schema

    def _json_is_jsonb(self, conn: Connection) -> bool:
        """Whether the json column is jsonb (Postgres tables of older writers)."""
        return False

    # -- setup -------------------------------------------------------------------------------

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
            self._check_layout(columns)
            if self.read_only:  # inspected, never created or migrated
                missing = [c for c in QUERY_COLUMNS if c not in (columns or ())]
                readonly.check_schema(self.location, self._qualified, columns, missing)
            elif not self._schema_ok(columns, indexes):
                with self._schema_lock(conn):
                    columns, indexes = self._inspect(conn)  # another process may have done it
                    self._check_layout(columns)
                    if columns is None:
                        for statement in create_ddl(
                            self._qualified, self._index_prefix, self.seq_ddl
                        ):
                            conn.exec_driver_sql(statement)
                    else:
                        self._migrate(conn, columns, indexes)
            self._jsonb = self._json_is_jsonb(conn)
            self._home = self._home_schema()
            self._pin_home()
        except (sa.exc.SQLAlchemyError, self._driver_error) as exc:
            raise EventBackendError(f"cannot open {self.location}: {self._reason(exc)}") from None

    def _pin_home(self) -> None:
        """From now on name the table in the schema it was found in (``_home``), not by the
        location's unqualified name: each statement would look that up along PostgreSQL's
        ``search_path`` again, and a table of the name made later in a schema found first (the
        role's own, ``"$user"``) was another ledger's, written to and read under this one's
        locks (keyed on the table found at open), its own forgotten."""
        home = self._home
        if home is None or home == self._schema:
            return
        quote = self._engine.dialect.identifier_preparer.quote_identifier
        self._schema, self._qualified = home, f"{quote(home)}.{quote(self._table_name)}"

    def _check_layout(self, columns: set[str] | None) -> None:
        """Refuse a table of the name that is not a ledger's (an application's ``events`` found
        first, e.g. along PostgreSQL's ``search_path``): migrating it would alter someone
        else's table, and writing to it would fail half-way."""
        lacking = [c for c in CORE_COLUMNS if columns is not None and c not in columns]
        if lacking:
            raise EventBackendError(
                f"cannot open {self.location}: the table {self._qualified} found there is not a "
                f"ledger's events table (no column {', '.join(lacking)}); nothing was changed. "
                "Name the ledger's table (PostgreSQL: ?table=<schema>.<table>; an unqualified "
                "name is looked up along the role's search_path)"
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
            log.warning(
                "%s: added the query columns %s to an older table",
                self.location,
                ", ".join(missing),
            )
        prefix = self._index_prefix
        wanted = {s: cols for s, cols in INDEXES.items() if f"{prefix}_{s}" not in indexes}
        for statement in index_ddl(self._qualified, prefix, wanted):
            conn.exec_driver_sql(statement)

    def _drop_indexes(self) -> None:
        """Drop SPEC 3's secondary indexes of this ledger's table (``indexes_deferred``): those
        the catalog lists on the table itself, each named in the table's schema (``_home``). An
        unqualified ``DROP INDEX`` is looked up along PostgreSQL's ``search_path``, where an
        index of the name in another schema (another ledger's: ``tenant2.events`` and a table
        ``tenant2_events`` both name theirs ``tenant2_events_*``) came first and was dropped."""
        _, own = self._inspect(self._conn)
        quote = self._engine.dialect.identifier_preparer.quote
        schema = "" if self._home is None else f"{quote(self._home)}."
        for suffix in INDEXES:
            name = f"{self._index_prefix}_{suffix}"
            if name in own:
                self._exec(f"DROP INDEX IF EXISTS {schema}{quote(name)}")

    @contextmanager
    def indexes_deferred(self) -> Iterator[None]:
        """A bulk load into an empty table (``EventBackend.bulk_load``; a dialect opts in):
        SPEC section 3's five secondary indexes dropped first, under the write lock, and made
        again at the end, each sorted once rather than kept up row by row. The unique event id
        stays, so a duplicate is refused as ever. A table that is not empty keeps its indexes. A
        process that dies inside leaves the table without them until the next open, which
        creates them (``migration``); reads meanwhile scan, with the same answers."""
        prefix = self._index_prefix
        with self.transaction():
            dropped = self.count() == 0
            if dropped:
                self._run(self._drop_indexes)
        try:
            yield
        finally:
            if dropped:
                with self.transaction():
                    for statement in index_ddl(self._qualified, prefix, INDEXES):
                        self._exec(statement)
