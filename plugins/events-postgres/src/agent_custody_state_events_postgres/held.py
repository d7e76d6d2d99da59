"""What rides in another statement's round trip: a write section's opening (``BEGIN`` and its
locks) goes with the section's first statement, and a single append's ``INSERT`` with the
section's ``COMMIT``. A round trip costs the writer and its server backend about 0.1 ms of CPU
each (a wake-up on both sides), more than most statements of a section.

The opening is held from ``_begin_write`` until the section's first statement, sent in front of
it in one simple query: a simple statement (the order lock with the head read) is appended as
it is; a prepared read (the supersession walk) as ``EXECUTE`` of a statement prepared on the
connection, its parameters written in as literals (``ClientCursor.mogrify``). The section's
reads still follow its locks, in the same message, so nothing is read before they are held. A
section that sends nothing sends nothing, not even ``BEGIN``. A first round trip that finds the
connection dropped (a server restart since the last section) reconnects and is sent again:
nothing of the section had reached the server. Any other statement (``executemany``, ``COPY``)
sends the opening alone first.

A write section that appends one event (every ``assert_fact``, retract, confirm, hold,
release) ends ``... INSERT; COMMIT``, and in a keyed section both statements run under the
order lock, which every other writer of the table waits for. The backend therefore holds the
row when the ledger appends it, and sends it as the first statement of the commit's round
trip: its parameters written into the statement as literals by the driver's own quoting
(``ClientCursor.mogrify``), then ``COMMIT`` (and the grouped commit's flush), one simple query.
PostgreSQL runs a simple query's statements in order and stops at the first error: an
``INSERT`` the server refuses leaves the transaction aborted and the ``COMMIT`` unrun, which
the backend tells (``transaction_status``) from a ``COMMIT`` whose answer was lost.

Any other statement of the section (a read, an update, a ``COPY``, another append) sends the
held row first, so the section reads what it wrote; the ledger's single appends are the
section's last statement, so that path is the exception. A section that rolls back drops the
row unsent.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any, TypeVar

from psycopg import ClientCursor
from psycopg.errors import DuplicatePreparedStatement, InvalidSqlStatementName
from psycopg.pq import TransactionStatus

from agent_custody_state.plugin import Event, EventBackendError
from agent_custody_state_sql import SqlEventBackend, forked
from agent_custody_state_sql.schema import ROW_COLUMNS, Prepared, event_values

from .keyfit import matchable, unfit_jsonb, unfit_key

T = TypeVar("T")

#: A named parameter as the dialect compiles it (``%(name)s``), and the escaped percent sign.
_PARAM = re.compile(r"%\((\w+)\)s|%%")


class HeldRow:
    """The row of a single append, not yet sent (at most one at a time)."""

    def __init__(self) -> None:
        self.args: Any = None
        self._mogrifier: ClientCursor[Any] | None = None

    def take(self) -> Any:
        """The held row's driver parameters (None if none), no longer held."""
        args, self.args = self.args, None
        return args

    def statement(self, raw: Any, insert: str, args: Any) -> str:
        """``insert`` with ``args`` written in as literals, by the driver's quoting for this
        connection (its encoding and ``standard_conforming_strings``)."""
        if self._mogrifier is None or self._mogrifier.connection is not raw:
            self._mogrifier = ClientCursor(raw)
        return self._mogrifier.mogrify(insert, args)


def aborted(raw: Any) -> bool:
    """Whether the connection's transaction is aborted: a statement before its ``COMMIT``
    failed, so the ``COMMIT`` did not run (and nothing of the section was written)."""
    return bool(not raw.closed and raw.info.transaction_status == TransactionStatus.INERROR)


def executable(q: Prepared) -> tuple[str, str, tuple[str, ...]]:
    """``q`` as a statement to ``PREPARE`` under a name of its own (``$n`` parameters), and
    the names of its parameters in ``$n`` order: what ``EXECUTE`` of it needs."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return "%"
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    text = _PARAM.sub(number, q.sql)
    name = "acs_" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]
    return name, f"PREPARE {name} AS {text}", tuple(names)


class HoldingBackend(SqlEventBackend):
    """A SQL backend whose write sections open in their first statement's round trip and
    whose single appends are held and sent with the ``COMMIT`` (this module's docstring);
    PostgreSQL's backend is one. Its driver connection must be psycopg's."""

    _held: HeldRow | None = None  # made at the first single append
    _opening: str | None = None  # the section's BEGIN and locks, until its first statement
    _executes: dict[str, tuple[str, str, tuple[str, ...]]] | None = None  # by statement
    _prepared_on: Any = None  # the connection the names in ``_names`` are prepared on
    _names: set[str] | None = None

    def _forsake(self, raw: Any) -> None:
        # Inherited across fork(): closing it (also by garbage collection through SQLAlchemy's
        # pool) would send Terminate on the parent's socket (``forked``).
        forked.blind(raw.pgconn.socket)

    def _after_fork(self) -> None:
        super()._after_fork()
        self._opening = None  # a section a thread of the parent was opening is not the child's
        if self._held is not None:
            self._held.take()

    def _begin(self) -> None:
        if self._held is not None:
            self._held.take()  # nothing carried over from a section that failed
        self._opening = None
        super()._begin()

    def _hold_opening(self, sql: str) -> None:
        """Send ``sql`` (``BEGIN`` and the section's locks) with the section's first
        statement."""
        self._opening = sql

    def _send_opening(self) -> None:
        """A statement that cannot carry the opening follows: send it alone."""
        if self._opening is not None:
            self._opened(lambda text: SqlEventBackend._exec(self, text), lambda: None)

    def _opened(self, send: Callable[[str], T], sql: Callable[[], str | None]) -> T:
        """``send`` the held opening and the statement ``sql()`` gives (None: the opening
        alone) as one simple query; on a connection found dropped, reconnect and send again
        (``sql()`` asked again: a statement prepares on the new connection)."""
        opening = self._opening
        assert opening is not None

        def text() -> str:
            more = sql()
            return opening if more is None else f"{opening}; {more}"

        try:
            try:
                return send(text())
            except InvalidSqlStatementName:
                # psycopg deallocates every prepared statement of the session when it sees a
                # ROLLBACK, DROP or ALTER (``_names`` forgets them at our own ROLLBACK; this is
                # any other): end the aborted section and send it again, prepared anew.
                with suppress(self._driver_error):
                    SqlEventBackend._exec(self, "ROLLBACK")
                self._names = None
            except self._driver_error:
                if not self._connection_lost():
                    raise
                self._reconnect()  # nothing of the section had reached the server
            return send(text())
        finally:
            self._opening = None

    def _simple_rows(self, text: str) -> list[Any]:
        """Run ``text`` (one or more statements, simple query protocol) and return the rows of
        its last statement."""
        cur = self._cursor()
        try:
            cur.execute(text)
            while cur.nextset():
                pass
            return list(cur.fetchall()) if cur.description is not None else []
        except BaseException:
            self._drop_cursor()
            raise

    def _execute(self, q: Prepared, params: dict[str, Any] | None) -> str:
        """``EXECUTE`` of ``q`` with ``params`` written in as literals, ``q`` prepared on the
        connection first if it is not yet (a round trip once per statement and connection)."""
        if self._prepared_on is not self._raw or self._names is None:
            self._prepared_on, self._names = self._raw, set()
        if self._executes is None:
            self._executes = {}
        shape = self._executes.get(q.sql)
        if shape is None:
            shape = self._executes[q.sql] = executable(q)
        name, prepare, names = shape
        if name not in self._names:
            with suppress(DuplicatePreparedStatement):  # kept by a ROLLBACK psycopg let be
                SqlEventBackend._exec(self, prepare)
            self._names.add(name)
        if self._held is None:
            self._held = HeldRow()
        if not names:
            return f"EXECUTE {name}"
        call = f"EXECUTE {name}(" + ", ".join(f"%({n})s" for n in names) + ")"
        return self._held.statement(self._raw, call, q.args(params or {}))

    def append(self, events: Sequence[Event]) -> None:
        # Keys the table cannot index are refused before any row is sent (``keyfit``): the
        # driver's error came mid-``COPY``, named no event, and left the section aborted.
        problem = unfit_key(events) or (unfit_jsonb(events) if self._jsonb else None)
        if problem is not None:
            raise EventBackendError(f"{self.location}: cannot append {problem}")
        super().append(events)

    def _insert_events(self, events: Sequence[Event]) -> None:
        self._send_held()
        if len(events) != 1:
            super()._insert_events(events)
            return
        if self._held is None:
            self._held = HeldRow()
        self._held.args = self._q.insert.rows_args([event_values(events[0])], ROW_COLUMNS)[0]

    def _send_held(self) -> None:
        """A statement of the section follows: send the opening and the held row first."""
        self._send_opening()
        if self._held is not None and self._held.args is not None:
            super()._many_args(self._q.insert, [self._held.take()])

    def _commit(self) -> None:
        if self._opening is not None:  # nothing of the section was sent: nothing to commit
            self._opening = None
            return
        held = self._held
        args = None if held is None else held.take()
        if held is None or args is None:
            super()._commit()
            return
        insert = self._run(lambda: held.statement(self._raw, self._q.insert.sql, args))
        self._finish(f"{insert}; {self._commit_statement()}")

    def _refused(self) -> bool:
        return aborted(self._raw)

    def _rollback_quietly(self) -> None:
        if self._held is not None:
            self._held.take()  # never sent: a refused row would keep ROLLBACK from running
        if self._opening is not None:  # nothing of the section was sent: nothing to undo
            self._opening = None
            return
        super()._rollback_quietly()
        self._names = None  # psycopg deallocates every prepared statement at a ROLLBACK

    def _rows(self, q: Prepared, params: dict[str, Any] | None = None) -> list[Any]:
        if params:
            params = matchable(params)  # a key holding U+0000 (``keyfit``)
        with self._lock:  # ``_opening`` is the section's of the thread holding the lock
            if self._opening is None:
                self._send_held()
                return super()._rows(q, params)
            return self._run(
                lambda: self._opened(self._simple_rows, lambda: self._execute(q, params))
            )

    def _many_args(self, q: Prepared, args: list[Any]) -> None:
        self._send_held()
        super()._many_args(q, args)

    def _exec(self, sql: str) -> None:
        if self._opening is None:
            self._send_held()
            super()._exec(sql)
        else:
            self._opened(lambda text: SqlEventBackend._exec(self, text), lambda: sql)

    def _exec_rows(self, sql: str) -> list[Any]:
        """The rows of the last statement of ``sql`` (with the opening, if held)."""
        if self._opening is None:
            self._send_held()
            return self._simple_rows(sql)
        return self._opened(self._simple_rows, lambda: sql)
