"""One SQL connection per backend: driver errors translated, dropped connections replaced, and
the write section (``BEGIN`` with the dialect's write lock ... ``COMMIT``).

The connection runs in driver autocommit mode, guarded by the backend's re-entrant lock: reads
are single statements that see every committed write, including other processes'; a write
section is an explicit ``BEGIN`` (the dialect adds its write lock) ... ``COMMIT``, so the ledger's
validate-then-append is one database transaction. Statements run on the driver's cursor (see
``Prepared`` in ``schema``), not through SQLAlchemy's execution layer, which costs several times
an indexed lookup.

A process forked after the open never uses the parent's connection (``forked``): its first
statement opens one of its own, and the section and snapshot state a thread of the parent had at
the fork is not the child's (``_after_fork``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from agent_custody_state.plugin import EventBackend, EventBackendError, ReentrantTransactions
from agent_custody_state_sql import forked, readonly
from agent_custody_state_sql.schema import Prepared

T = TypeVar("T")


class _SecondStatement(BaseException):
    """A read run without a transaction (``consistent``) asked a second question, and its first
    answer is not the snapshot's: that run is abandoned and the read runs again in a snapshot.
    A ``BaseException``, so no ``except Exception`` between the read and the backend can
    swallow it."""


def reason(exc: BaseException) -> str:
    """The driver's own message, without SQLAlchemy's statement dump and help link."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class SqlConnection(ReentrantTransactions, EventBackend):
    """The connection and write section of a SQL event backend (still abstract: no queries).

    Dialects implement ``_begin_write`` and may implement ``_connection_lost``.
    """

    def __init__(self, engine: Engine, *, location: str) -> None:
        self.location = location
        self._engine = engine
        self._init_transactions()
        self._closed = False
        self._in_read = False
        # In a read run without a transaction (``consistent``): its first statement, parameters
        # and answer once asked; None outside such a read.
        self._solo: list[tuple[Prepared, dict[str, Any] | None, list[Any]]] | None = None
        self._cur: Any = None  # the cursor every statement reuses (``_cursor``)
        self._driver_error: type[Exception] = engine.dialect.loaded_dbapi.Error
        self._pid = os.getpid()  # the process the connection was opened in
        try:
            self._conn: Connection = engine.connect()
        except sa.exc.SQLAlchemyError as exc:
            raise EventBackendError(f"cannot open {self.location}: {self._reason(exc)}") from None
        try:
            self._raw: Any = self._conn.connection.driver_connection
            if self.read_only:  # set by the dialect before this runs (``readonly``)
                readonly.enter(self._raw, engine.dialect.name)
        except BaseException:
            self.close()
            raise

    # -- dialect hooks -----------------------------------------------------------------------

    def _begin_write(self) -> None:
        """Start a transaction that holds the table's write lock until commit or rollback."""
        raise NotImplementedError

    #: How a read snapshot starts (``reading``); PostgreSQL asks for REPEATABLE READ.
    _begin_read = "BEGIN"

    #: Keyword arguments of the driver's ``execute`` for a read (PostgreSQL: ``prepare``).
    _read_options: dict[str, Any] = {}  # noqa: RUF012 - never mutated

    def _reason(self, exc: BaseException) -> str:
        """What the caller is told of a driver error (``reason``); a dialect may add what it
        can see of the cause (SQLite: a file this process may not write)."""
        return reason(exc)

    def _connection_lost(self) -> bool:
        """Whether the driver connection is dead (the dialect knows how to tell)."""
        return False

    def _gave_up(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the driver giving up on a server that did not answer in time
        (PostgreSQL's ``operation_timeout``): failed at once, never retried on a new connection
        (which would wait as long again)."""
        return False

    def _forsake(self, raw: Any) -> None:
        """Make the driver connection ``raw``, inherited from the parent process, harmless to
        the parent whatever happens to it here (PostgreSQL: ``forked.blind`` its socket)."""

    def _commit_statement(self) -> str:
        """What ends a write section; it must return only once the section is durable
        (PostgreSQL may add a flush that runs after the commit has released the locks)."""
        return "COMMIT"

    # -- running statements ------------------------------------------------------------------

    def _run(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` under the backend lock, turning driver errors into ``EventBackendError``.

        A connection the server dropped (restart, idle timeout) is replaced once and ``fn``
        retried, but only outside a write section and a read snapshot (``reading``): inside
        one, the transaction is gone, and the caller must see the failure (a read's later
        questions answered on a new connection would not be the snapshot's).
        """
        with self._lock:
            if self._closed:
                raise EventBackendError(f"ledger {self.location} is closed")
            if self._pid != os.getpid():
                self._adopt()
            try:
                return fn()
            except UnicodeEncodeError as exc:
                # A Python str with a lone surrogate (JSON cannot carry one) has no UTF-8 form,
                # so no SQL text column can store or match it: a refusal, not a crash.
                bad = exc.object[exc.start : exc.end]
                raise EventBackendError(
                    f"{self.location}: text with a lone surrogate ({bad!r}) cannot be stored "
                    "or looked up; pass valid Unicode"
                ) from None
            except (sa.exc.SQLAlchemyError, self._driver_error) as exc:
                if (
                    self._depth
                    or self._in_read
                    or self._gave_up(exc)
                    or not self._connection_lost()
                ):
                    raise EventBackendError(f"{self.location}: {self._reason(exc)}") from None
            try:
                self._reconnect()
                return fn()
            except (sa.exc.SQLAlchemyError, self._driver_error) as exc:
                raise EventBackendError(f"{self.location}: {self._reason(exc)}") from None

    def _reconnect(self) -> None:
        """Replace the connection (a subclass resets its per-connection caches first). One
        inherited from another process is set aside, never closed (``_leave_inherited``)."""
        if self._pid == os.getpid():
            with suppress(Exception):
                self._conn.invalidate()
        else:
            self._leave_inherited()
        self._cur = None
        self._conn = self._engine.connect()
        self._raw = self._conn.connection.driver_connection
        if self.read_only:
            readonly.enter(self._raw, self._engine.dialect.name)
        self._pid = os.getpid()

    # -- a process forked after the open (``forked``) -------------------------------------------

    def _adopt(self) -> None:
        """First use in a forked child: a connection of its own (the caller holds ``_lock``)."""
        try:
            self._reconnect()
        except (sa.exc.SQLAlchemyError, self._driver_error) as exc:
            raise EventBackendError(
                f"cannot open {self.location} in this process: {self._reason(exc)}"
            ) from None

    def _leave_inherited(self) -> None:
        """Set the parent's connection aside: kept referenced, made harmless, never used."""
        if isinstance(self._raw, forked.Gone):
            return
        forked.keep(self._conn, self._raw, self._cur)
        with suppress(Exception):
            self._forsake(self._raw)
        gone = forked.Gone(self._driver_error, self.location)
        self._conn, self._raw, self._cur = gone, gone, None  # type: ignore[assignment]

    def _after_fork(self) -> None:
        """In a child, at the fork (``watch_forks``, from ``_init_transactions``): no thread of the parent exists here, so
        the lock a parent's thread may have held is replaced, and no section or snapshot is
        open. A section the forking thread itself was inside is not continued: its appends are
        refused (``_require_transaction``), and its commit or rollback never reaches the
        parent's connection (set aside here, before anything can use it)."""
        if self._closed:
            return
        self._lock = threading.RLock()
        self._depth = 0
        self._section_keys = None
        self._in_read = False
        self._solo = None
        self._leave_inherited()

    def _rows(self, q: Prepared, params: dict[str, Any] | None = None) -> list[Any]:
        def run() -> list[Any]:
            cur = self._cursor()
            try:
                cur.execute(q.sql, q.args(params or {}), **self._read_options)
                return list(cur.fetchall())
            except BaseException:
                self._drop_cursor()
                raise

        # ``_solo`` (and ``_in_read``) belong to the thread holding ``_lock`` (a ``consistent``
        # read holds it throughout): looked at without it, a thread's single read took another
        # thread's read for its own and opened a snapshot nothing ended (every later write
        # failed: "cannot start a transaction within a transaction").
        with self._lock:
            solo = self._solo
            if solo is None:
                return self._run(run)
            if not solo:  # the read's first question: its own snapshot
                rows = self._run(run)
                solo.append((q, params, rows))
                return rows
            # A second question: take a snapshot now and ask the first one again in it. The
            # same answer means the read so far is the snapshot's, and it goes on there (no
            # re-run of the decoding and logic already done); a different one, that it runs
            # again.
            self._solo = None
            self._run(lambda: self._exec(self._begin_read))
            self._in_read = True
            first, first_params, first_rows = solo[0]
            if self._rows(first, first_params) != first_rows:
                raise _SecondStatement
            return self._run(run)

    def _many(self, q: Prepared, params: list[dict[str, Any]]) -> None:
        self._many_args(q, [q.args(p) for p in params])

    def _many_args(self, q: Prepared, args: list[Any]) -> None:
        """Run ``q`` once per entry of ``args`` (driver parameters in the statement's form)."""

        def run() -> None:
            cur = self._cursor()
            try:
                if len(args) == 1:  # a single append: executemany's batching only costs
                    cur.execute(q.sql, args[0])
                else:
                    cur.executemany(q.sql, args)
            except BaseException:
                self._drop_cursor()
                raise

        self._run(run)

    def _exec(self, sql: str) -> None:
        cur = self._cursor()
        try:
            cur.execute(sql)
        except BaseException:
            self._drop_cursor()
            raise

    def _cursor(self) -> Any:
        """The connection's one cursor, which every statement reuses (a cursor per statement
        cost as much Python as the rest of the driver's work: three or four per write). A
        caller whose statement fails drops it (``_drop_cursor``)."""
        cur = self._cur
        if cur is None:
            cur = self._cur = self._raw.cursor()
        return cur

    def _drop_cursor(self) -> None:
        cur, self._cur = self._cur, None
        if cur is not None:
            with suppress(Exception):
                cur.close()

    # -- read snapshots ------------------------------------------------------------------------

    def consistent(self, read: Callable[[], T]) -> T:
        """``read`` on one snapshot: first with no transaction, where its first statement is its
        snapshot (one round trip, none for ``BEGIN`` and ``COMMIT``). A second question opens
        the snapshot then (``_rows``); only if the first answer changed in between does ``read``
        run again, inside ``reading()``."""
        with self._lock:
            if self._depth or self._in_read or self._solo is not None:
                return read()
            self._solo = []
            try:
                return read()
            except _SecondStatement:
                pass
            finally:
                self._solo = None
                if self._in_read:  # the snapshot a second question opened
                    self._end_read()
            with self.reading():
                return read()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """One snapshot for every query of a read (outside a write section, which has its own)."""
        with self._lock:
            if self._depth or self._in_read:
                yield
                return
            self._run(lambda: self._exec(self._begin_read))
            self._in_read = True
            try:
                yield
            finally:
                self._end_read()

    def _end_read(self) -> None:
        self._in_read = False
        with suppress(sa.exc.SQLAlchemyError, self._driver_error):
            self._exec("COMMIT")

    # -- the write section (``ReentrantTransactions``) ---------------------------------------

    def _begin(self) -> None:
        if self._closed:
            raise EventBackendError(f"ledger {self.location} is closed")
        readonly.refuse_section(self.read_only, self.location)
        if self._pid != os.getpid():
            self._adopt()
        try:
            try:
                self._begin_write()
            except (sa.exc.SQLAlchemyError, self._driver_error) as exc:
                if self._gave_up(exc) or not self._connection_lost():
                    raise
                self._reconnect()  # nothing was written yet: safe to start again
                self._begin_write()
        except (sa.exc.SQLAlchemyError, self._driver_error) as exc:
            self._rollback_quietly()
            raise EventBackendError(
                f"{self.location}: could not take the write lock: {self._reason(exc)}"
            ) from None

    def _commit(self) -> None:
        self._finish(self._commit_statement())

    def _refused(self) -> bool:
        """After a failed ``_finish``: whether the server refused a statement of the section
        before its ``COMMIT`` ran (its transaction is aborted: nothing was written)."""
        return False

    def _finish(self, statement: str) -> None:
        """Run ``statement``, which ends with the section's ``COMMIT`` (a dialect may send the
        section's last statements in the same round trip)."""
        try:
            self._exec(statement)
        except (sa.exc.SQLAlchemyError, self._driver_error) as exc:
            if self._refused():
                raise EventBackendError(f"{self.location}: {self._reason(exc)}") from None
            # Rolled back by ``_rollback`` on the way out. Not "nothing was written": a COMMIT
            # whose answer was lost (connection dropped) may have committed, and so may a SQLite
            # commit whose WAL fsync failed (the next open replays the frames). Retrying
            # blindly duplicates.
            raise EventBackendError(
                f"{self.location}: commit failed: {self._reason(exc)}; the write is not "
                "acknowledged and may or may not have been recorded: look (e.g. "
                "memory.get / history) before retrying"
            ) from None

    def _rollback(self) -> None:
        self._rollback_quietly()

    def _rollback_quietly(self) -> None:
        # Fails harmlessly when no transaction is open (BEGIN itself failed).
        with suppress(sa.exc.SQLAlchemyError, self._driver_error):
            self._exec("ROLLBACK")

    # -- housekeeping ------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._pid != os.getpid():  # the parent's: set aside, not closed
                self._leave_inherited()
                return
            try:
                if self._connection_lost():  # a dead one (``_gave_up``): no ROLLBACK to send
                    self._conn.invalidate()
                else:
                    self._conn.close()
            finally:
                self._engine.dispose()
