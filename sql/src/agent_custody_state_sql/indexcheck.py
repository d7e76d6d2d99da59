"""The query columns against the stored JSON: what ``verify`` checks beyond the chain on SQL.

Reads find events through SPEC 3's columns (kind, fact id, subject, predicate, space,
supersedes, transaction time), while the chain covers the JSON only. A row whose column was
edited (``kind`` set to ``retract``, another ``subject``) would hide its fact from every read
while the chain still verified. ``index_problems`` finds such rows: one statement compares each
column with the field the database extracts from the row's JSON (parsed once a row), then each
row it names is decoded here and compared with the row ``schema.event_values`` writes for its
event (a transaction time column in another spelling than the normal one is named too: reads
compare that column as text). A row whose JSON is not an event is left to the chain's check,
which names it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from agent_custody_state.plugin import EventBackendError, event_from_json
from agent_custody_state_sql.connection import reason
from agent_custody_state_sql.queries import FIRST, following
from agent_custody_state_sql.schema import ROW_COLUMNS, event_values

if TYPE_CHECKING:
    from agent_custody_state_sql.backend import SqlEventBackend

#: Rows per page when every row is compared here.
PAGE = 2000

#: The columns checked, in ``ROW_COLUMNS`` order (all but the JSON itself).
CHECKED = ROW_COLUMNS[:-1]


#: The JSON paths of the checked columns (an assert's fact id, space, subject and predicate are
#: in its ``fact``; the other kinds name their fact at the top and have none of the rest).
_PATHS = (
    ("eventId",),
    ("kind",),
    ("txTime",),
    None,  # fact id: by kind
    ("fact", "space"),
    ("fact", "subject"),
    ("fact", "predicate"),
    ("supersedes",),
)


def differs(dialect: str) -> tuple[str, str]:
    """What the FROM clause needs (after the table) and the condition true for a row whose
    columns may disagree with its JSON, each row's JSON parsed once. SQLite: one
    ``json_extract`` of every path against ``json_array`` of the columns (both written by
    SQLite's own serialiser). PostgreSQL: the JSON cast to ``jsonb`` once per row (a lateral),
    each column compared NULL-safely. A column whose kind is not ``assert`` is compared with the
    non-assert paths: any disagreement on ``kind`` itself is named by the ``kind`` column's own
    comparison. On a row whose JSON does not parse, the condition is an error."""
    if dialect == "sqlite":
        paths = ", ".join(
            "CASE WHEN kind = 'assert' THEN '$.fact.factId' ELSE '$.factId' END"
            if path is None
            else f"'$.{'.'.join(path)}'"
            for path in _PATHS
        )
        return "", f"json_array({', '.join(CHECKED)}) <> json_extract(json, {paths})"

    def field(*path: str) -> str:
        return f"(x.j #>> '{{{','.join(path)}}}')"

    expected = [
        "CASE WHEN kind = 'assert' THEN "
        + field("fact", "factId")
        + " ELSE "
        + field("factId")
        + " END"
        if path is None
        else field(*path)
        for path in _PATHS
    ]
    condition = " OR ".join(
        f"({column} <> {sql} OR ({column} IS NULL) <> ({sql} IS NULL))"
        for column, sql in zip(CHECKED, expected, strict=True)
    )
    return " CROSS JOIN LATERAL (SELECT json::jsonb AS j) AS x", f"({condition})"


def row_columns(dialect: str) -> str:
    """``ROW_COLUMNS`` as a select list, the JSON as text (a ``jsonb`` column of older
    PostgreSQL writers included)."""
    columns = ", ".join(ROW_COLUMNS)
    return columns if dialect == "sqlite" else columns.replace("json", "json::text")


def check_statement(qualified: str, dialect: str) -> str:
    """The statement naming every row whose columns may disagree with its JSON: ``seq``, the
    checked columns and the JSON (``differs``)."""
    lateral, condition = differs(dialect)
    return (
        f"SELECT seq, {row_columns(dialect)} FROM {qualified}{lateral} "
        f"WHERE {condition} ORDER BY seq"
    )


def row_problems(rows: list[Any]) -> Iterator[tuple[int, str]]:
    """``(seq, reason)`` for each row (as ``check_statement`` returns them) whose columns are
    not the ones its event is stored with."""
    for row in rows:
        try:
            want = event_values(event_from_json(row[-1]))
        except ValueError:
            continue  # not an event: the chain's check names it
        for column, have, should in zip(CHECKED, row[1:-1], want, strict=False):
            if have != should:
                yield (
                    int(row[0]),
                    f"its {column} column reads {have!r} but the event says {should!r} "
                    "(reads find events by that column)",
                )
                break


def _every_row(conn: Any, qualified: str, dialect: str) -> Iterator[tuple[int, str]]:
    """``row_problems`` of every row, read in pages of ``PAGE`` rows."""
    page = sa.text(
        f"SELECT seq, {row_columns(dialect)} FROM {qualified} WHERE seq >= :start "
        "ORDER BY seq LIMIT :n"
    )
    start: int | None = FIRST  # every row, one below the sequence's start too
    while start is not None and (rows := list(conn.execute(page, {"start": start, "n": PAGE}))):
        yield from row_problems(rows)
        start = following(rows[-1][0])


def index_problems(backend: SqlEventBackend) -> list[tuple[int, str]]:
    """``EventBackend.index_problems`` of a SQL backend: ``(position, reason)`` of each row whose
    columns disagree with its JSON, on a connection of its own (so the statement may run beside
    ``verify``'s pass over the events on the backend's connection). When some row's JSON does
    not parse (the database's check stops at it), every row is compared here instead."""
    dialect = backend._engine.dialect.name
    count = backend._q.fn.name("count")
    position = sa.text(f"SELECT {count}(*) FROM {backend._qualified} WHERE seq <= :s")
    try:
        with backend._engine.connect() as conn:
            try:
                rows = list(conn.exec_driver_sql(check_statement(backend._qualified, dialect)))
                found = list(row_problems(rows))
            except (sa.exc.SQLAlchemyError, backend._driver_error):
                conn.rollback()
                found = list(_every_row(conn, backend._qualified, dialect))
            return [
                (int(conn.execute(position, {"s": seq}).scalar_one()), why) for seq, why in found
            ]
    except (sa.exc.SQLAlchemyError, backend._driver_error) as exc:
        raise EventBackendError(f"{backend.location}: {reason(exc)}") from None
