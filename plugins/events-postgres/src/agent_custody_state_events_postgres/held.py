"""A single append's ``INSERT`` sent with the section's ``COMMIT``, in one round trip.

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

from collections.abc import Sequence
from typing import Any

from psycopg import ClientCursor
from psycopg.pq import TransactionStatus

from agent_custody_state.plugin import Event
from agent_custody_state_sql import SqlEventBackend
from agent_custody_state_sql.schema import ROW_COLUMNS, Prepared, event_values


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


class HoldingBackend(SqlEventBackend):
    """A SQL backend whose single appends are held and sent with the ``COMMIT`` (this module's
    docstring); PostgreSQL's backend is one. Its driver connection must be psycopg's."""

    _held: HeldRow | None = None  # made at the first single append

    def _begin(self) -> None:
        if self._held is not None:
            self._held.take()  # nothing carried over from a section that failed
        super()._begin()

    def _insert_events(self, events: Sequence[Event]) -> None:
        self._send_held()
        if len(events) != 1:
            super()._insert_events(events)
            return
        if self._held is None:
            self._held = HeldRow()
        self._held.args = self._q.insert.rows_args([event_values(events[0])], ROW_COLUMNS)[0]

    def _send_held(self) -> None:
        """A statement of the section follows the held row: send the row first."""
        if self._held is not None and self._held.args is not None:
            super()._many_args(self._q.insert, [self._held.take()])

    def _commit(self) -> None:
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
        super()._rollback_quietly()

    def _rows(self, q: Prepared, params: dict[str, Any] | None = None) -> list[Any]:
        self._send_held()
        return super()._rows(q, params)

    def _many_args(self, q: Prepared, args: list[Any]) -> None:
        self._send_held()
        super()._many_args(q, args)

    def _exec(self, sql: str) -> None:
        self._send_held()
        super()._exec(sql)
