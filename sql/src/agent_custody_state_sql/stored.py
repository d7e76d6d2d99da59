"""``verify``'s chunks of a SQL ledger (``EventBackend.stored_chunks``, ``ledger.stored``).

The process running ``verify`` only cuts the table into chunks of consecutive rows (one probe of
the primary key per chunk); each chunk is read by the worker process verifying it, on a
connection of its own (opened by the dialect's picklable ``_reader``), in one statement that
returns each row's JSON with the check of its query columns (``indexcheck.differs``) beside it.
So the table is read once, by the processes that parse it, and no event's text crosses a pipe.

A chunk flagged by that check, or one whose check stopped at a row whose JSON does not parse,
is read again with its columns and compared in Python (``indexcheck.row_problems``), which
names only real disagreements. A chunk covers the rows up to the last one stored when ``verify``
started; one that no longer holds the rows it was cut with raises ``LedgerChanged``.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from agent_custody_state.plugin import ChunkRead, LedgerChanged
from agent_custody_state_sql.indexcheck import differs, row_columns, row_problems
from agent_custody_state_sql.queries import FIRST

if TYPE_CHECKING:
    from agent_custody_state_sql.backend import SqlEventBackend


@dataclass(frozen=True)
class Statements:
    """The two reads of a chunk, as driver SQL with two positional parameters (first and last
    seq): each row's seq, JSON text and check flag; each row's seq, columns and JSON text."""

    flagged: str
    exact: str


@dataclass(frozen=True)
class SqlChunk:
    """Rows ``after < seq <= upto`` (``count`` of them when cut) and the row ``after`` itself
    (the event before the chunk; None: the chunk starts the ledger, every row up to ``upto``),
    read through ``connect`` (``StoredChunk``)."""

    key: str  # which ledger: the connection a worker keeps is for one key at a time
    connect: Callable[[], Any]
    statements: Statements
    after: int | None
    upto: int
    count: int

    def read(self) -> ChunkRead:
        cached = multiprocessing.parent_process() is not None  # a worker keeps its connection
        conn = _connection(self.key, self.connect) if cached else self.connect()
        try:
            return self._read(conn)
        finally:
            if not cached:
                conn.close()

    def _read(self, conn: Any) -> ChunkRead:
        bounds = (FIRST if self.after is None else self.after, self.upto)
        try:
            rows = _fetch(conn, self.statements.flagged, bounds)
            exact = any(row[2] for row in rows)
        except Exception:  # the driver's error at a row whose JSON does not parse
            if getattr(conn, "closed", False):  # the driver gave up on it (operation_timeout)
                raise
            rows, exact = [], True  # the exact read names it
        if exact:  # rare: an edited row, or one that is not JSON
            full = _fetch(conn, self.statements.exact, bounds)
            rows = [(row[0], row[-1]) for row in full]
        before = None
        if self.after is not None:
            if not rows or rows[0][0] != self.after:
                raise LedgerChanged(f"event seq {self.after} is gone: the ledger changed")
            before = rows[0][1]
            rows = rows[1:]
        problems: list[tuple[int, str]] = []
        if exact:
            offset = {row[0]: i for i, row in enumerate(rows)}
            problems = [
                (offset[seq], why)
                for seq, why in row_problems(full if self.after is None else full[1:])
            ]
        return ChunkRead(before, [row[1] for row in rows], problems)


def _fetch(conn: Any, statement: str, bounds: tuple[int, int]) -> list[Any]:
    cur = conn.cursor()
    try:
        cur.execute(statement, bounds)
        return list(cur.fetchall())
    finally:
        cur.close()


#: The connection a worker process keeps: (key, connection), at most one.
_kept: list[tuple[str, Any]] = []


def _connection(key: str, connect: Callable[[], Any]) -> Any:
    if _kept and _kept[0][0] == key:
        return _kept[0][1]
    while _kept:
        _kept.pop()[1].close()
    conn = connect()
    _kept.append((key, conn))
    return conn


def statements(backend: SqlEventBackend) -> Statements:
    """The chunk reads of ``backend``'s table, in its driver's parameter style."""
    dialect = backend._engine.dialect
    mark = "?" if dialect.paramstyle == "qmark" else "%s"
    table = backend._qualified if mark == "?" else backend._qualified.replace("%", "%%")
    lateral, condition = differs(dialect.name)
    json_text = "json" if dialect.name == "sqlite" else "json::text"
    where = f"WHERE seq >= {mark} AND seq <= {mark} ORDER BY seq"
    return Statements(
        flagged=f"SELECT seq, {json_text}, {condition} FROM {table}{lateral} {where}",
        exact=f"SELECT seq, {row_columns(dialect.name)} FROM {table} {where}",
    )


def stored_chunks(
    backend: SqlEventBackend, connect: Callable[[], Any], size: int
) -> Iterator[SqlChunk]:
    """The chunks of ``size`` rows of the table as it is now, cut on ``backend``'s connection;
    ``connect`` opens the table again (``_reader``).

    A table whose ``seq`` runs 1..N without a gap (what an append-only ledger holds: its
    sequence only skips where an insert was rolled back) is cut by arithmetic, after a count;
    another by a probe of the primary key per chunk, from the lowest ``seq`` a table can hold
    (a row put below 1 by hand is verified too). Either way each chunk knows how many rows it
    must read, so a row gone meanwhile stops ``verify``."""
    t = backend._q.table
    seq = t.c.seq
    compile_, fn = backend._q.compile, backend._q.fn
    top_q = compile_(sa.select(sa.func.coalesce(fn.max(seq), 0)))  # COALESCE: grammar, no name
    low_q = compile_(sa.select(fn.min(seq)))
    total_q = compile_(sa.select(fn.count()).select_from(t))
    in_range = (seq >= sa.bindparam("start"), seq <= sa.bindparam("top"))
    cut_q = compile_(sa.select(seq).where(*in_range).order_by(seq).offset(size - 1).limit(1))
    rest_q = compile_(sa.select(fn.count()).where(*in_range))
    reads = statements(backend)
    key = f"{backend.location}#{backend._qualified}"
    top = int(backend._rows(top_q)[0][0])
    low = backend._rows(low_q)[0][0]
    if low is None:
        return
    dense = low == 1 and int(backend._rows(total_q)[0][0]) == top
    after: int | None = None
    while after is None or after < top:
        start = FIRST if after is None else after + 1
        if dense:
            upto = min(start - 1 + size, top) if after is not None else min(size, top)
            count = upto - (after or 0)
        else:
            bounds = {"start": start, "top": top}
            cut = backend._rows(cut_q, bounds)
            upto, count = (
                (int(cut[0][0]), size) if cut else (top, int(backend._rows(rest_q, bounds)[0][0]))
            )
        if count:
            yield SqlChunk(key, connect, reads, after, upto, count)
        after = upto
