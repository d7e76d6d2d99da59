"""The shared SQL event backend: SPEC section 3's ``events`` table on SQLAlchemy Core.

The SQLite and PostgreSQL plugins are thin dialect subclasses of ``SqlEventBackend``. What they
share is split by responsibility:

* ``schema``: the table layout, its DDL and the row written for an event;
* ``connection``: the one connection, driver errors, reconnects and the write section;
* ``migration``: creating the table, or migrating an older one in place, when a backend opens;
* ``queries``: the statement behind each ``EventBackend`` question, compiled once;
* ``decoding``: rows back into events;
* ``indexcheck``: the query columns against the stored JSON (what ``verify`` adds);
* this module: the ``EventBackend`` methods themselves, on top of those.

Nothing in the core imports this distribution (only the plugins do), so the core installs and
imports without SQLAlchemy.

Design notes, because each was a choice:

* The DDL is written out as text, byte for byte the layout of SPEC section 3, so a table made by
  the TypeScript implementation and one made here are the same.
* ``tx_time`` holds the normalised wire time, so comparing the column as text compares instants.
* Result sets that can be large (``find_asserts`` without filters, ``iter_events``) are read in
  pages keyed on ``seq``, so memory stays flat and no cursor stays open between pages.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from agent_custody_state.plugin import (
    AssertEvent,
    ChainHead,
    Event,
    ForgetEvent,
    Forgotten,
    KeyName,
    ModeMark,
    forget_assert,
    json_loads,
)
from agent_custody_state_sql.checkpoints import SqlCheckpointLog
from agent_custody_state_sql.decoding import decode
from agent_custody_state_sql.indexcheck import index_problems
from agent_custody_state_sql.migration import SchemaSetup
from agent_custody_state_sql.queries import FIRST, Statements, following
from agent_custody_state_sql.schema import (
    ROW_COLUMNS,
    Prepared,
    event_values,
    events_table,
)
from agent_custody_state_sql.settings import SqlSettings
from agent_custody_state_sql.stored import SqlChunk, stored_chunks

#: Ids per statement: bounds the size of one parameter, not a driver limit.
ID_CHUNK = 5000
#: Rows per page of a streamed read.
PAGE = 2000


class SqlEventBackend(SchemaSetup):
    """An ``EventBackend`` over one SQL table; dialect subclasses supply connection and locking.

    Subclasses set ``kind`` and ``seq_ddl`` and implement ``_begin_write`` (start a transaction
    holding the cross-process write lock), ``_schema_lock`` (serialise schema setup when the
    table may not exist yet), ``_json_field`` (SQL extracting a text field from the stored JSON,
    for migration) and ``_ids_select``/``_ids_param`` (an id-list predicate with one parameter),
    and optionally ``_in_ids``, ``_json_is_jsonb``, ``_connection_lost`` and ``compact``.

    Behaviour declared for the layers above (``EventBackend``): shared between processes,
    blocking, and group commits worth it from two concurrent asserts (the defaults).
    """

    #: What ``count`` keeps: the last seq counted and the rows up to it.
    _counted: tuple[int, int] | None = None

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
        self._table_name = table
        self._schema = schema
        self._qualified = quoted_table or (f"{schema}.{table}" if schema else table)
        self._index_prefix = index_prefix or (f"{schema}_{table}" if schema else table)
        super().__init__(engine, location=location)
        try:
            self._ensure_schema()
            self._q = Statements(
                events_table(self._table_name, self._schema),
                engine.dialect,
                jsonb=self._jsonb,
                ids_select=self._ids_select,
                in_ids=self._in_ids,
            )
            self.table = self._q.table
            self._settings = SqlSettings(self)
        except BaseException:
            self.close()
            raise

    # -- dialect hooks (id lists) ------------------------------------------------------------

    def _ids_select(self, name: str) -> sa.Select[Any]:
        """A one-column SELECT of the ids passed (as ``_ids_param``) in bind parameter ``name``."""
        raise NotImplementedError

    def _in_ids(self, column: sa.ColumnElement[Any], name: str) -> sa.ColumnElement[bool]:
        """``column`` is one of the ids passed in bind parameter ``name``."""
        return column.in_(self._ids_select(name))

    def _ids_param(self, ids: Sequence[str]) -> Any:
        raise NotImplementedError

    # -- writing (inside ``transaction()``, see ``connection``) ------------------------------

    def _before_write(self) -> None:
        """Called before the section's first write (a dialect locking keys takes its order
        lock here)."""

    def _last_rows(self) -> list[Any]:
        """The last row (``last``) for ``chain_head``; a dialect may answer it from a read it
        made with its order lock."""
        return self._rows(self._q.last)

    def append(self, events: Sequence[Event]) -> None:
        self._require_transaction()
        if events:
            self._before_write()
            self._insert_events(events)

    def _insert_events(self, events: Sequence[Event]) -> None:
        """Insert the events' rows (``event_values``) in order; a dialect with a faster bulk
        path (PostgreSQL's COPY) overrides it."""
        rows = [event_values(e) for e in events]
        self._many_args(self._q.insert, self._q.insert.rows_args(rows, ROW_COLUMNS))

    def forget(self, fact_id: str, forgotten: Forgotten, event: ForgetEvent) -> None:
        self._require_transaction()
        self._before_write()
        rows = self._rows(self._q.fact_asserts, {"f": fact_id})
        updates = [
            {"s": row[0], "json": forget_assert(old, forgotten).to_json()}
            for row, old in zip(rows, self._decode(rows), strict=True)
        ]
        if updates:
            self._many(self._q.rewrite, updates)
        self.append([event])

    # -- reading -----------------------------------------------------------------------------

    def _decode(self, rows: Sequence[Any]) -> list[Any]:
        return decode(rows, self.location)

    def _by_ids(self, q: Prepared, ids: Collection[str]) -> list[Any]:
        """Rows of ``q`` for ``ids`` (in chunks), in ``seq`` order."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        rows: list[Any] = []
        for start in range(0, len(unique), ID_CHUNK):
            chunk = unique[start : start + ID_CHUNK]
            rows += self._rows(q, {"ids": self._ids_param(chunk)})
        if len(unique) > ID_CHUNK:
            rows.sort(key=lambda r: r[0])
        return rows

    def get_assert(self, fact_id: str) -> AssertEvent | None:
        rows = self._rows(self._q.assert_of, {"f": fact_id})
        return self._decode(rows)[0] if rows else None

    def events_for(self, fact_ids: Collection[str]) -> list[Event]:
        return self._decode(self._by_ids(self._q.events_for, fact_ids))

    def superseders(self, fact_ids: Collection[str]) -> list[AssertEvent]:
        return self._decode(self._by_ids(self._q.superseders, fact_ids))

    def events_around(self, fact_ids: Collection[str]) -> list[Event]:
        return self._decode(self._by_ids(self._q.events_around, fact_ids))

    def events_along(self, fact_ids: Collection[str]) -> tuple[list[Event], bool]:
        return self._decode(self._by_ids(self._q.events_along, fact_ids)), True

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
        return self._around(params, holds=True)

    def asserts_for_as_of(
        self,
        *,
        space: str | None = None,
        subject: str | None = None,
        predicate: str | None = None,
        tx_at: str | None = None,
    ) -> tuple[list[AssertEvent], list[Event]]:
        if subject is None:
            return super().asserts_for_as_of(
                space=space, subject=subject, predicate=predicate, tx_at=tx_at
            )
        params = {"space": space, "subject": subject, "predicate": predicate, "tx_at": tx_at}
        return self._around(params, holds=False)

    def _around(
        self, params: dict[str, str | None], *, holds: bool
    ) -> tuple[list[AssertEvent], list[Event]]:
        """The matching asserts and the events around them, in one indexed query (without
        hold and release events unless ``holds``)."""
        shape = (*(v is not None for v in params.values()), not holds)
        q = self._q.asserts_around(shape)
        rows = self._rows(q, {k: v for k, v in params.items() if v is not None})
        events = self._decode(rows)
        found = [e for row, e in zip(rows, events, strict=True) if row[2]]
        return found, events

    def history(self, fact_id: str) -> list[Event]:
        return self._decode(self._rows(self._q.history, {"f": fact_id, "f2": fact_id}))

    def find_asserts(
        self,
        *,
        space: str | None = None,
        subject: str | None = None,
        predicate: str | None = None,
        tx_at: str | None = None,
        tx_before: str | None = None,
    ) -> Iterator[AssertEvent]:
        params = {
            "space": space,
            "subject": subject,
            "predicate": predicate,
            "tx_at": tx_at,
            "tx_before": tx_before,
        }
        q = self._q.find(tuple(v is not None for v in params.values()))
        given = {k: v for k, v in params.items() if v is not None}
        # The first page is fetched now, so the common small answer costs one query and a
        # caller sees errors at the call, not at the first next().
        rows = self._rows(q, {**given, "from_": FIRST, "n": PAGE})
        return self._pages(q, given, rows)

    def _pages(self, q: Prepared, given: dict[str, Any], rows: list[Any]) -> Iterator[Any]:
        while True:
            yield from self._decode(rows)
            start = following(rows[-1][0]) if len(rows) == PAGE else None
            if start is None:
                return
            rows = self._rows(q, {**given, "from_": start, "n": PAGE})

    def spaces(self) -> list[str]:
        return sorted(r[0] for r in self._rows(self._q.spaces))

    def key_values(self, key: KeyName, prefix: str = "", limit: int = 100) -> list[str]:
        column = {"factId": "fact_id"}.get(key, key)
        if column not in ("fact_id", "subject", "predicate", "space"):
            raise ValueError(f"no such key: {key!r}")
        params: dict[str, Any] = {"p": prefix, "plen": len(prefix), "n": limit}
        # [prefix, prefix with its last character raised by one) holds exactly the values
        # starting with the prefix in code-point order (used on SQLite; substr decides anyway).
        ranged = bool(prefix) and ord(prefix[-1]) < 0x10FFFF
        if ranged:
            params.update(lo=prefix, hi=prefix[:-1] + chr(ord(prefix[-1]) + 1))
        rows = self._rows(self._q.key_values(column, ranged), params)
        return sorted(r[0] for r in rows)[:limit]

    def count(self) -> int:
        """Counted in full once (0.1-0.5 s at 10M rows on SQLite), then as the rows up to the
        last one seen plus those after it: the ledger deletes no row and its rows commit in
        ``seq`` order. A section's count (rows not yet committed) is not kept; a lost
        connection (a crashed server may have lost rows committed asynchronously) counts again."""
        with self._lock:
            known = self._counted
            if known is not None:
                more, top = self._rows(self._q.count_after, {"after": known[0]})[0]
                total = known[1] + int(more)
                if top is None:
                    top = known[0]
                if self._counted is not known:  # reconnected on the way: count again
                    known = None
            if known is None:
                total, top = self._rows(self._q.count_top)[0]
                total = int(total)
            if not self._depth and top is not None:
                self._counted = (int(top), total)
            return total

    def iter_events(self) -> Iterator[Event]:
        for rows in self._every_page():
            yield from self._decode(rows)

    def _every_page(self) -> Iterator[list[Any]]:
        """Every row in ``seq`` order, in pages of ``PAGE`` rows (from ``FIRST``: all of them)."""
        start: int | None = FIRST
        while start is not None:
            rows = self._rows(self._q.page, {"from_": start, "n": PAGE})
            yield rows
            start = following(rows[-1][0]) if len(rows) == PAGE else None

    def first_event(self) -> Event | None:
        rows = self._rows(self._q.page, {"from_": FIRST, "n": 1})  # not a first page of 2,000
        return self._decode(rows)[0] if rows else None

    def events_newest_first(self) -> Iterator[Event]:
        # Pages growing from 8 rows: the reader (``chain.head_after``) usually stops within
        # the first few events.
        before, n = 2**63 - 1, 8  # above every seq (a signed 64-bit column)
        while True:
            rows = self._rows(self._q.page_back, {"before": before, "n": n})
            yield from self._decode(rows)
            if len(rows) < n:
                return
            before, n = rows[-1][0], min(n * 4, PAGE)

    # -- the chain -----------------------------------------------------------------------------

    def last_event(self) -> Event | None:
        rows = self._last_rows()  # in an ordered phase, the row read with the order lock
        return self._decode(rows)[0] if rows else None

    def last_tx_time(self) -> str | None:
        # The row's ``tx_time`` column: the normal form of its time, no event decoded (every
        # write of a key-locking backend asks this, right after ``chain_head`` read the row).
        rows = self._last_rows()
        return str(rows[0][2]) if rows else None

    def chain_head(self) -> ChainHead:
        """The head recorded on the last row, read from its JSON without building the event
        (every chained append asks this inside its write section)."""
        rows = self._last_rows()
        if not rows:
            return ChainHead(0, "0" * 64, chained=False)
        try:
            record = json_loads(rows[0][1]).get("chain")
        except (ValueError, AttributeError):
            record = None
        if (
            isinstance(record, dict)
            and type(record.get("seq")) is int
            and isinstance(record.get("head"), str)
            and len(record["head"]) == 64
        ):
            return ChainHead(record["seq"], record["head"])
        return super().chain_head()  # no record on the last row: the genesis, computed once

    def stored_events(self) -> Iterator[str]:
        """The stored JSON text of each event, in pages (``verify`` parses it itself)."""
        for rows in self._every_page():
            for row in rows:
                yield row[1]

    def index_problems(self) -> list[tuple[int, str]]:
        return index_problems(self)  # ``indexcheck``: the columns against the JSON

    def _reader(self) -> Callable[[], Any] | None:
        """A picklable callable opening another driver connection to the table, in autocommit
        mode, in another process (``stored``); None: the dialect offers none."""
        return None

    def stored_chunks(self, size: int) -> Iterator[SqlChunk] | None:
        connect = self._reader()
        return None if connect is None else stored_chunks(self, connect, size)  # ``stored``

    def checkpoint_log(self) -> SqlCheckpointLog:
        return SqlCheckpointLog(self)

    def recorded_forget_mode(self) -> ModeMark | None:
        """The mark in ``<table>_settings`` (``settings``), else what a mixin before this
        class says (SQLite: its default key store beside the file)."""
        recorded = self._settings.mark()
        return recorded if recorded is not None else super().recorded_forget_mode()

    def record_forget_mode(self, mark: ModeMark) -> None:
        self._settings.record(mark)

    def _reconnect(self) -> None:
        self._counted = None
        super()._reconnect()

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "location": self.location, "table": self._qualified}
