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
from agent_custody_state_sql.schema import ROW_COLUMNS, event_values

if TYPE_CHECKING:
    from agent_custody_state_sql.backend import SqlEventBackend

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


def check_statement(qualified: str, dialect: str) -> str:
    """The statement naming every row whose columns may disagree with its JSON: ``seq``, the
    checked columns and the JSON, each row's JSON parsed once. SQLite: one ``json_extract`` of
    every path against ``json_array`` of the columns (both written by SQLite's own serialiser).
    PostgreSQL: the JSON cast to ``jsonb`` once per row (a lateral), each column compared
    NULL-safely. A column whose kind is not ``assert`` is compared with the non-assert paths:
    any disagreement on ``kind`` itself is named by the ``kind`` column's own comparison."""
    columns = ", ".join(ROW_COLUMNS)
    if dialect == "sqlite":
        paths = ", ".join(
            "CASE WHEN kind = 'assert' THEN '$.fact.factId' ELSE '$.factId' END"
            if path is None
            else f"'$.{'.'.join(path)}'"
            for path in _PATHS
        )
        return (
            f"SELECT seq, {columns} FROM {qualified} "
            f"WHERE json_array({', '.join(CHECKED)}) <> json_extract(json, {paths}) ORDER BY seq"
        )

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
    differs = " OR ".join(
        f"({column} <> {sql} OR ({column} IS NULL) <> ({sql} IS NULL))"
        for column, sql in zip(CHECKED, expected, strict=True)
    )
    columns = columns.replace("json", "json::text")  # a jsonb column (older writers) as text
    return (
        f"SELECT seq, {columns} FROM {qualified} "
        f"CROSS JOIN LATERAL (SELECT json::jsonb AS j) AS x WHERE {differs} ORDER BY seq"
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


def index_problems(backend: SqlEventBackend) -> list[tuple[int, str]]:
    """``EventBackend.index_problems`` of a SQL backend: ``(position, reason)`` of each row whose
    columns disagree with its JSON, on a connection of its own (so the statement may run beside
    ``verify``'s pass over the events on the backend's connection)."""
    statement = check_statement(backend._qualified, backend._engine.dialect.name)
    position = sa.text(f"SELECT count(*) FROM {backend._qualified} WHERE seq <= :s")
    try:
        with backend._engine.connect() as conn:
            rows = list(conn.exec_driver_sql(statement).fetchall())
            return [
                (int(conn.execute(position, {"s": seq}).scalar_one()), why)
                for seq, why in row_problems(rows)
            ]
    except (sa.exc.SQLAlchemyError, backend._driver_error) as exc:
        raise EventBackendError(f"{backend.location}: {reason(exc)}") from None
