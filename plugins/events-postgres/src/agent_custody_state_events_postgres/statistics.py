"""Maintenance statements: planner statistics that keep up with bulk loads, and ``warned``,
which runs ``VACUUM`` or ``ANALYZE`` and returns the warnings PostgreSQL answers instead of an
error when the role may not maintain the table.

Without statistics (a table filled by an import before autovacuum has looked at it, or on a
server with autovacuum off) the planner guesses that a subject or fact id matches 0.5% of the
rows, and answers an as-of by subject with sequential scans and hash joins: 31 ms instead of
0.3 ms of server time at 100,000 events (``events_around`` 19 ms instead of 0.2 ms).
Autovacuum analyses a table once a tenth of it changed, but only at its next round (a minute
by default), and a bulk load does not wait for it. So once a writer's ``COPY`` appends reach
``ANALYZE_MIN`` rows and have grown the table fourfold since its statistics were taken, the
section ends with a quick ``ANALYZE`` (``QUICK_ANALYZE``): the key columns only (not the wide
``json`` text, which no plan filters on) from a sample of 3,000 rows (statistics target 10).
That is enough for every read to be an index probe again (as-of 0.13 ms of server time at
100,000 events), costs 10-15 ms however large the table, and a load of N rows pays it about
log4(N / 10,000) times; autovacuum's later full ``ANALYZE`` replaces it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from typing import Any

from psycopg.pq import TransactionStatus

#: Fewer rows copied than this never trigger an ``ANALYZE`` (a small table is cheap to scan).
ANALYZE_MIN = 10_000

#: The statistics target of the writer's quick ``ANALYZE`` (a sample of 300 rows per unit).
QUICK_TARGET = 10


#: The row count the planner statistics of a table describe (``rows_known``).
_RELTUPLES = "SELECT reltuples FROM pg_catalog.pg_class WHERE oid = pg_catalog.to_regclass(%s)"

#: The SQLSTATE of ``SKIP_LOCKED``'s notice: another process holds a conflicting lock.
LOCK_NOT_AVAILABLE = "55P03"


def quick_analyze(raw: Any, table: str, columns: tuple[str, ...]) -> list[str]:
    """The quick ``ANALYZE`` of ``columns`` in one round trip (the target set for it alone);
    the server's warnings. ``SKIP_LOCKED``: a writer never waits here for autovacuum (or a
    ``VACUUM FULL``) working on the table, which can take minutes; the table is then being
    maintained anyway, and that skip is no warning."""
    statement = (
        f"BEGIN; SET LOCAL default_statistics_target = {QUICK_TARGET}; "
        f"ANALYZE (SKIP_LOCKED) {table} ({', '.join(columns)}); COMMIT"
    )
    try:
        return warned(raw, statement, expected=(LOCK_NOT_AVAILABLE,))
    except BaseException:
        # An error (a statement timeout, a cancel) stops the query before its COMMIT: end the
        # aborted transaction, or every later statement of the connection fails.
        if not raw.closed and raw.info.transaction_status != TransactionStatus.IDLE:
            with suppress(Exception):
                raw.execute("ROLLBACK")
        raise


def rows_known(raw: Any, table: str) -> float:
    """The row count the table's planner statistics describe (-1: never analysed)."""
    row = raw.execute(_RELTUPLES, (table,)).fetchone()
    return float(row[0]) if row is not None and row[0] is not None else 0.0


class Growth:
    """Rows this connection copied into the table since its statistics were taken.

    ``rows_known``: asks the row count the statistics describe (``pg_class.reltuples``; -1 or
    0 when the table was never analysed), once, when the copies first reach ``ANALYZE_MIN``
    (so a backend that never bulk-loads never asks). Rows of a section count once it commits.
    """

    def __init__(self, rows_known: Callable[[], float]) -> None:
        self._ask = rows_known
        self._known: float | None = None
        self._pending = 0  # copied in the open section
        self._copied = 0  # committed since the statistics were taken

    def begin(self) -> None:
        self._pending = 0  # a section rolled back leaves nothing behind

    def copied(self, rows: int) -> None:
        self._pending += rows

    def committed(self) -> bool:
        """Count the section's rows; whether the statistics are due now."""
        self._copied += self._pending
        self._pending = 0
        if self._copied < ANALYZE_MIN:
            return False
        if self._known is None:
            self._known = max(float(self._ask()), 0.0)
        return self._copied >= 3 * self._known

    def analysed(self) -> None:
        self._known = (self._known or 0.0) + self._copied
        self._copied = 0


def warned(raw: Any, statement: str, *, expected: tuple[str, ...] = ()) -> list[str]:
    """Run ``statement`` on the driver connection ``raw``; the warnings and errors the server
    reported as notices (PostgreSQL skips a table the role may not vacuum or analyse with a
    warning, not an error), except those with an ``expected`` SQLSTATE."""
    warnings: list[str] = []

    def on_notice(diag: Any) -> None:
        if diag.severity in ("WARNING", "ERROR") and diag.sqlstate not in expected:
            warnings.append(str(diag.message_primary))

    raw.add_notice_handler(on_notice)
    try:
        with raw.cursor() as cur:
            cur.execute(statement)
    finally:
        raw.remove_notice_handler(on_notice)
    return warnings
