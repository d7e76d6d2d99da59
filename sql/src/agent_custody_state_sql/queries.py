"""The statements behind each ``EventBackend`` question, as SQLAlchemy Core, compiled once.

Building and executing a Core statement costs 30-180 µs of Python per call, several times the
indexed lookup itself; compiled once per backend for its dialect (``Prepared``) and run on the
driver's cursor, a lookup is a few microseconds, which is what lets a read stay within a small
factor of hand-written SQL.

Id lists are one parameter (a JSON array for SQLite's ``json_each``, an array for Postgres'
``= ANY``), so one statement serves any number of ids; the dialect supplies that predicate.
Every read returns rows whose first two columns are ``seq`` and the event's JSON text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from agent_custody_state_sql.builtins import Builtins
from agent_custody_state_sql.schema import ROW_COLUMNS, Prepared

#: A one-column SELECT of the ids passed in the named bind parameter.
IdsSelect = Callable[[str], "sa.Select[Any]"]
#: ``column`` is one of the ids passed in the named bind parameter.
InIds = Callable[[sa.ColumnElement[Any], str], sa.ColumnElement[bool]]


#: ``OFFSET 0`` and ``LIMIT 1`` written into the statement (not parameters): a subquery with
#: either is never merged into the query around it, so it stays an index probe per row.
_FENCE: sa.ColumnElement[int] = sa.literal_column("0")
_ONE: sa.ColumnElement[int] = sa.literal_column("1")

#: The lowest ``seq`` a table can hold (a 64-bit integer, SQLite's rowid and PostgreSQL's
#: ``bigint``): a read of "every row" starts here, not at 1, so a row written into the table
#: below the sequence's start (by hand: the ledger never does) is read by ``verify`` and
#: ``export`` like any other, and not only by the reads that filter by a column.
FIRST = -(2**63)
_LAST = 2**63 - 1


def following(seq: int) -> int | None:
    """The ``from_`` of the page after a page ending at ``seq``; None: no row can follow."""
    return None if seq >= _LAST else seq + 1


class Statements:
    """Every statement a SQL backend runs, compiled for one dialect.

    The fixed ones are attributes. The filtered reads vary in which filters are given, so each
    shape (a tuple of booleans, one per filter: given or not) is compiled on first use and kept.
    """

    def __init__(
        self,
        table: sa.Table,
        dialect: sa.Dialect,
        *,
        jsonb: bool,
        ids_select: IdsSelect,
        in_ids: InIds,
    ) -> None:
        self.table = t = table
        self._dialect = dialect
        self.fn = fn = Builtins(dialect.name)
        self._find: dict[tuple[bool, ...], Prepared] = {}
        self._around: dict[tuple[bool, ...], Prepared] = {}
        self._keys: dict[tuple[str, bool], Prepared] = {}
        json_out = sa.cast(t.c.json, sa.Text) if jsonb else t.c.json
        self.base = base = sa.select(t.c.seq, json_out)
        p = self.compile
        seq, kind = t.c.seq, t.c.kind
        self.assert_of = p(
            base.where(t.c.fact_id == sa.bindparam("f"), kind == "assert").order_by(seq).limit(1)
        )
        self.events_for = p(base.where(in_ids(t.c.fact_id, "ids")).order_by(seq))
        self.superseders = p(base.where(in_ids(t.c.supersedes, "ids")).order_by(seq))
        # events_around: the ids themselves and the facts superseding them (``_around_rows``).
        self.events_around = p(self._around_rows(ids_select("ids"), []))
        self.events_along = p(self._along_stmt(ids_select, in_ids))
        self.history = p(
            base.where(
                sa.or_(t.c.fact_id == sa.bindparam("f"), t.c.supersedes == sa.bindparam("f2"))
            ).order_by(seq)
        )
        # Every row and the last one, as two subqueries of one statement (one snapshot, and
        # each planned alone: the count on the smallest index, the max at the key's end).
        self.count_top = p(
            sa.select(
                sa.select(fn.count()).select_from(t).scalar_subquery(),
                sa.select(fn.max(t.c.seq)).scalar_subquery(),
            )
        )
        # The rows after the last one counted, and the last of them (``count``).
        self.count_after = p(
            sa.select(fn.count(), fn.max(t.c.seq)).where(t.c.seq > sa.bindparam("after"))
        )
        # The row with the highest seq, with its ``tx_time`` column (third: the key a writer's
        # stamp is raised to, unparsed), as one probe at the primary key's end. PostgreSQL:
        # the first entry of a backward scan, the cheaper statement to plan (a write section
        # sends it unprepared with the order lock, so it is planned at every write: 45-55 µs
        # less server CPU than the max() subquery). SQLite: the max() subquery, whose plan
        # reads as the probe it is.
        last = base.add_columns(t.c.tx_time)
        if dialect.name == "postgresql":
            self.last = p(last.order_by(seq.desc()).limit(sa.literal_column("1")))
        else:
            self.last = p(last.where(seq == sa.select(fn.max(seq)).scalar_subquery()))
        # Every row from ``from_`` on (``FIRST``: all of them), in order.
        self.page = p(
            base.where(seq >= sa.bindparam("from_")).order_by(seq).limit(sa.bindparam("n"))
        )
        # The same pages from the end backwards (``events_newest_first``).
        self.page_back = p(
            base.where(seq < sa.bindparam("before")).order_by(seq.desc()).limit(sa.bindparam("n"))
        )
        # A loose index scan over events_space: one index probe per distinct space, instead
        # of reading every entry of the index.
        first = sa.select(fn.min(t.c.space).label("space")).cte("acs_spaces", recursive=True)
        nxt = sa.select(
            sa.select(fn.min(t.c.space)).where(t.c.space > first.c.space).scalar_subquery()
        ).where(first.c.space.is_not(None))
        walk = first.union_all(nxt)
        self.spaces = p(sa.select(walk.c.space).where(walk.c.space.is_not(None)))
        json_in: sa.ColumnElement[Any] = sa.bindparam("json", type_=sa.Text)
        if jsonb:
            from sqlalchemy.dialects.postgresql import JSONB

            json_in = sa.cast(json_in, JSONB)
        values = {c: sa.bindparam(c, type_=sa.Text) for c in ROW_COLUMNS if c != "json"}
        self.insert = p(t.insert().values(**values, json=json_in))
        self.rewrite = p(t.update().where(t.c.seq == sa.bindparam("s")).values(json=json_in))
        self.fact_asserts = p(
            base.where(t.c.fact_id == sa.bindparam("f"), kind == "assert").order_by(seq)
        )

    def _along_stmt(self, ids_select: IdsSelect, in_ids: InIds) -> sa.Select[Any]:
        """``events_along``: the events of the facts asked for and of every fact down their
        supersession chains that the effective-superseder walk can reach: the direct
        superseders of the facts asked for, then the superseders of any superseder retracted
        or forgotten now (a recursive query; a chain of live links stops after one step)."""
        if self._dialect.name == "postgresql":
            return self._along_probes(ids_select, in_ids)
        t = self.table
        seed = ids_select("ids").subquery("asked")
        walk = sa.select(seed.c[0].label("fact_id")).cte("acs_walk", recursive=True)
        sup, ended = t.alias("walk_sup"), t.alias("walk_end")
        # Whether a link is retracted: an outer join, not EXISTS (PostgreSQL allows the
        # recursive name once in the step, and not inside a subquery).
        ended_link = sa.and_(
            ended.c.fact_id == walk.c.fact_id,
            sa.or_(ended.c.kind == "retract", ended.c.kind == "forget"),
        )
        step = (
            sa.select(sup.c.fact_id)
            .select_from(
                walk.join(sup, sup.c.supersedes == walk.c.fact_id).outerjoin(ended, ended_link)
            )
            .where(sa.or_(in_ids(walk.c.fact_id, "ids"), ended.c.seq.is_not(None)))
        )
        walk = walk.union(step)
        return self.base.where(t.c.fact_id.in_(sa.select(walk.c.fact_id))).order_by(t.c.seq)

    def _along_probes(self, ids_select: IdsSelect, in_ids: InIds) -> sa.Select[Any]:
        """``_along_stmt`` for PostgreSQL, as index probes per walked fact: each step and the
        final rows are ``LATERAL`` subqueries fenced with ``OFFSET 0``/``LIMIT 1``, so the
        planner cannot turn them into joins. It cannot size a recursive query's result, and
        on a table of a few thousand rows (a new ledger) it chose sequential scans and hash
        joins: 0.35 ms of server time per walk of two ids, against 0.2 ms as probes (and the
        walk is part of every supersession's checks)."""
        t = self.table
        seed = ids_select("ids").subquery("asked")
        walk = sa.select(seed.c[0].label("fact_id")).cte("acs_walk", recursive=True)
        sup, ended = t.alias("walk_sup"), t.alias("walk_end")
        nxt = (
            sa.select(sup.c.fact_id)
            .where(sup.c.supersedes == walk.c.fact_id)
            .offset(_FENCE)
            .lateral("walk_next")
        )
        end = (
            sa.select(ended.c.seq)
            .where(
                ended.c.fact_id == walk.c.fact_id,
                sa.or_(ended.c.kind == "retract", ended.c.kind == "forget"),
            )
            .limit(_ONE)
            .lateral("walk_ended")
        )
        step = (
            sa.select(nxt.c.fact_id)
            .select_from(walk.join(nxt, sa.true()).outerjoin(end, sa.true()))
            .where(sa.or_(in_ids(walk.c.fact_id, "ids"), end.c.seq.is_not(None)))
        )
        walk = walk.union(step)
        rows = self.base.where(t.c.fact_id == walk.c.fact_id).offset(_FENCE).lateral("walk_rows")
        return sa.select(*rows.c).select_from(walk.join(rows, sa.true())).order_by(rows.c.seq)

    def key_values(self, column: str, ranged: bool) -> Prepared:
        """``key_values`` for one column: its distinct values among asserts of facts with no
        forget event, starting with ``p`` (``plen`` characters), at most ``n``.

        ``substr`` makes the match exact under any collation, and PostgreSQL orders by code
        point (``COLLATE "C"``) as the ledger answers; on SQLite (code-point order) a range on
        the column (``ranged``: ``lo`` <= value < ``hi``) lets its index find the first value
        with the prefix.
        """
        q = self._keys.get((column, ranged))
        if q is None:
            t = self.table
            col = t.c[column]
            forgotten = t.alias("forgotten")
            where = [
                t.c.kind == "assert",
                self.fn.substr(col, 1, sa.bindparam("plen")) == sa.bindparam("p"),
                ~sa.exists().where(
                    forgotten.c.fact_id == t.c.fact_id, forgotten.c.kind == "forget"
                ),
            ]
            if ranged and self._dialect.name == "sqlite":
                where += [col >= sa.bindparam("lo"), col < sa.bindparam("hi")]
            # Code-point order, whatever the column's collation: the first ``n`` in the
            # database's order (en_US: "a" before "Z") were not the first ``n`` the ledger
            # answers in (EB-2.9-keys), so a value was left out. SQLite's order is code points.
            # On PostgreSQL the collation is named in ``pg_catalog`` (``Builtins.code_points``).
            order = self.fn.code_points(col)
            stmt = sa.select(col).where(*where).group_by(col).order_by(order)
            stmt = stmt.limit(sa.bindparam("n"))
            q = self._keys[(column, ranged)] = self.compile(stmt)
        return q

    def compile(self, stmt: sa.ClauseElement) -> Prepared:
        return Prepared(stmt, self._dialect)

    def find(self, shape: tuple[bool, ...]) -> Prepared:
        """``find_asserts`` with the filters given in ``shape`` (space, subject, predicate,
        tx_at, tx_before), one page: rows after ``seq`` ``after``, at most ``n``."""
        q = self._find.get(shape)
        if q is None:
            q = self._find[shape] = self.compile(self._find_stmt(shape))
        return q

    def asserts_around(self, shape: tuple[bool, ...]) -> Prepared:
        """``asserts_around`` with the filters given in ``shape`` (space, subject, predicate,
        tx_at; then whether hold and release events are left out): see
        ``_asserts_around_stmt``."""
        q = self._around.get(shape)
        if q is None:
            q = self._around[shape] = self.compile(self._asserts_around_stmt(shape))
        return q

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
        where.append(t.c.seq >= sa.bindparam("from_"))
        return self.base.where(*where).order_by(t.c.seq).limit(sa.bindparam("n"))

    def _asserts_around_stmt(self, shape: tuple[bool, ...]) -> sa.Select[Any]:
        """Rows of the matching asserts and of everything around them, each flagged (third
        column) if it is one of the matching asserts (the filter re-applied to the row's own
        columns)."""
        t, found = self.table, self.table.alias("found")
        names = ("space", "subject", "predicate")

        def match(x: sa.FromClause) -> list[sa.ColumnElement[bool]]:
            given = [x.c[n] == sa.bindparam(n) for n, on in zip(names, shape, strict=False) if on]
            at = [x.c.tx_time <= sa.bindparam("tx_at")] if shape[3] else []
            return [x.c.kind == "assert", *given, *at]

        seed = sa.select(found.c.fact_id).where(*match(found))
        if self._dialect.name == "postgresql" and shape[1]:
            # Found by the subject's index alone: the other filters are applied to its rows
            # behind a fence. Without planner statistics the server also scanned the index of
            # ``tx_time <= tx_at`` (every entry, for a read of "now") to AND the two.
            key = [found.c[n] == sa.bindparam(n) for n in ("subject", "predicate")[: 1 + shape[2]]]
            needed = [found.c[n] for n in ("fact_id", "kind", "tx_time", *names)]
            rows = sa.select(*needed).where(*key).offset(_FENCE).subquery("by_subject")
            seed = sa.select(rows.c.fact_id).where(*match(rows))
        flag = sa.case((sa.and_(*match(t)), 1), else_=0)
        where: list[sa.ColumnElement[bool]] = []
        if shape[4]:
            where += [t.c.kind != "hold", t.c.kind != "release"]  # no IN: it would expand
        return self._around_rows(seed, where, flag)

    def _around_rows(
        self,
        seed: sa.Select[Any],
        where: list[sa.ColumnElement[bool]],
        *flag: sa.ColumnElement[Any],
    ) -> sa.Select[Any]:
        """The rows (``seq``, JSON, then ``flag``) of the facts ``seed`` selects and of the
        facts directly superseding them, in ``seq`` order. On PostgreSQL each superseder lookup
        and each fact's rows are ``LATERAL`` index probes fenced with ``OFFSET 0``, as in
        ``_along_probes``: planned as joins, on a table without planner statistics (autovacuum
        off, or not yet run after a restore) they became sequential scans and hash joins, 19-31
        ms of server time per read at 100,000 events."""
        t = self.table
        columns = (*self.base.selected_columns, *flag)
        if self._dialect.name != "postgresql":
            sup = t.alias("sup")
            listed = sa.union(seed, sa.select(sup.c.fact_id).where(sup.c.supersedes.in_(seed)))
            return sa.select(*columns).where(t.c.fact_id.in_(listed), *where).order_by(t.c.seq)
        asked = seed.cte("around_seed")
        sup = t.alias("around_sup")
        nxt = (
            sa.select(sup.c.fact_id)
            .where(sup.c.supersedes == asked.c[0])
            .offset(_FENCE)
            .lateral("around_next")
        )
        ids = sa.union(
            sa.select(asked.c[0].label("fact_id")),
            sa.select(nxt.c.fact_id).select_from(asked.join(nxt, sa.true())),
        ).subquery("around_ids")
        rows = (
            sa.select(*columns)
            .where(t.c.fact_id == ids.c.fact_id, *where)
            .offset(_FENCE)
            .lateral("around_rows")
        )
        return sa.select(*rows.c).select_from(ids.join(rows, sa.true())).order_by(rows.c.seq)
