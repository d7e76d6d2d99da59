"""A forget whose ``VACUUM FULL`` was cut off is finished by the next writer that opens the ledger.

A forget commits the rewritten row (the value gone from the live version) and then ``compact``
rewrites the table without the dead version that still holds it. A process that dies, or whose
connection is cut, in between leaves that version in the table's files, and nothing else would
ever look for it: a second forget of the fact is refused. So the forget's own transaction also
writes a row ``erasure_pending`` into a small table beside the events, ``<table>_erasure``
(name, value; which the TypeScript original does not read), created by the first forget if the
role may create tables there; its value is the forget's 64-bit transaction id. Not the settings
table: every plain-mode write reads that one when it exists (the forget-mode mark), so a table
created there by one role would stop the writes of roles granted only the events table. A
role that may not use or create this table forgets as before, without the mark (warned once).

``compact`` reads the row before its ``VACUUM FULL`` and, when the vacuum erased every dead
version (no older transaction kept one: ``vacuum``), deletes it if it still holds the value
read: a forget that committed meanwhile keeps it set. A writer that opens the ledger and finds
it set runs the same compaction (``VACUUM FULL``, the older-transaction check, the statistics
cleared), logs that it did, and deletes the row. Only one opener vacuums at a time (a session
advisory lock, tried, not waited for: another opener goes on at once); the vacuum waits at
most ``LOCK_TIMEOUT`` for its lock, and whatever stops it (the lock, a role that may not vacuum
the table, a dropped connection) is a warning, never a failed open: the row stays, for the next
``compact`` or open. A read-only open, and a ``?vacuum=false`` location (which never sets the
row: it does not vacuum), leave it alone.

The key store of crypto-shred mode (``keystore``) uses the same flag for its destroyed keys: a
table ``<keys table>_erasure`` in the key database, created at the key store's open, set in the
destroy's transaction, cleared by its ``compact`` and settled at the next open of the key store
(not by a read-only ledger's open, nor by a role that may only read the keys).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import psycopg
import sqlalchemy as sa

from agent_custody_state.plugin import EventBackendError
from agent_custody_state_sql.schema import SideTable

from .location import MAX_IDENTIFIER
from .lockname import advisory_key

log = logging.getLogger(__name__)

#: The row of a forget whose compaction has not finished.
SETTING = "erasure_pending"

#: How long the open's ``VACUUM FULL`` waits for its lock on the table before it leaves the
#: erasure to the next ``compact`` or open (readers and writers queue behind it meanwhile).
LOCK_TIMEOUT = "2s"

#: Whether the table exists, whether this role may set, read and clear the row in it,
#: and whether it may create the table (``CREATE`` on the schema it would be created in).
_PROBE = """
SELECT t IS NOT NULL,
  t IS NOT NULL AND pg_catalog.has_table_privilege(t, 'SELECT')
    AND pg_catalog.has_table_privilege(t, 'INSERT')
    AND pg_catalog.has_table_privilege(t, 'UPDATE')
    AND pg_catalog.has_table_privilege(t, 'DELETE'),
  coalesce(pg_catalog.has_schema_privilege(coalesce(%(schema)s, pg_catalog.current_schema()),
    'CREATE'), false)
FROM (SELECT pg_catalog.to_regclass(%(table)s)::oid AS t) AS erasure
"""


def xid_of(value: str) -> str:
    """The 32-bit transaction id (``xid``, as ``vacuum.holders`` compares) of a 64-bit one."""
    return str(int(value) % 4294967296)


class ErasureFlag:
    """The ``erasure_pending`` row of the table ``table`` (quoted, as ``to_regclass`` reads it;
    in the schema ``schema``, None: the current one); the advisory lock ``settle_key`` lets one
    opener at a time finish it. ``fits``: False when PostgreSQL would cut the name (no mark)."""

    def __init__(
        self, table: str, location: str, settle_key: int, schema: str | None, *, fits: bool
    ) -> None:
        self.table, self.location, self._schema = table, location, schema
        self.settle_key = settle_key
        # A name PostgreSQL would cut could be another table's (the events' own): no mark then.
        self._fits = fits
        self._exists = False  # the table was there when last looked at
        self._usable = False  # and this role may set, read and clear the row
        self._may_create = False  # the role may create it (CREATE on the schema)
        self._warned = False

    @classmethod
    def beside(cls, backend: Any, lock_name: str, schema: str | None) -> ErasureFlag:
        """The flag beside the events of ``backend`` (a SQL backend; ``SideTable``), settled
        under the advisory lock of the table ``lock_name``."""
        side = SideTable(
            backend,
            "erasure",
            sa.Column("name", sa.Text, primary_key=True),
            sa.Column("value", sa.Text, nullable=False),
        )
        fits = len(side.table.name.encode()) <= MAX_IDENTIFIER
        return cls(
            side.name, backend.location, advisory_key(lock_name, "settle"), schema, fits=fits
        )

    def probe(self, raw: Any) -> None:
        """Whether the table exists, may be used, or may be created (``settle``)."""
        row = raw.execute(_PROBE, {"table": self.table, "schema": self._schema}).fetchone()
        self._exists, self._usable = bool(row[0]) and self._fits, bool(row[1]) and self._fits
        self._may_create = bool(row[2]) and self._fits

    def statement(self) -> str | None:
        """What a forget's transaction runs to set the row (None: the role may not use the
        table, or it is missing and the role may not create it; warned once): a forget never
        fails for want of it."""
        upsert = (
            f"INSERT INTO {self.table} (name, value) VALUES ('{SETTING}', "
            "pg_catalog.txid_current()::text) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value"
        )
        if self._exists and self._usable:
            return upsert
        if not self._exists and self._may_create:  # serialised by the order lock
            return f"{self._create()}; {upsert}"
        if not self._warned:
            self._warned = True
            log.warning(
                "%s: %s may not be used or created (the role's privileges, or a name PostgreSQL "
                "would cut): a forget cut off before its VACUUM FULL is not finished at the next "
                "open",
                self.location,
                self.table,
            )
        return None

    def _create(self) -> str:
        return (
            f"CREATE TABLE IF NOT EXISTS {self.table} (name TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )

    def create(self, raw: Any) -> None:
        """Create the table now if it is missing and the role may (the key store's open, under
        its setup lock: its destroys then only set the row)."""
        self.probe(raw)
        if not self._exists and self._may_create:
            raw.execute(self._create())
            self.probe(raw)

    def read(self, raw: Any) -> str | None:
        """The row's value (None: not set, no table, or the role may not read it)."""
        try:
            self.probe(raw)
            return self._value(raw) if self._exists and self._usable else None
        except psycopg.Error as exc:
            if raw.closed or raw.broken:
                raise  # the connection is gone: ``compact`` reconnects and tries again
            log.warning("%s: pending erasure not read (%s)", self.location, exc)
            return None

    def _value(self, raw: Any) -> str | None:
        row = raw.execute(f"SELECT value FROM {self.table} WHERE name = %s", (SETTING,)).fetchone()
        return None if row is None else str(row[0])

    def clear(self, raw: Any, value: str) -> None:
        """Delete the row if it still holds ``value`` (a later forget's stays)."""
        raw.execute(f"DELETE FROM {self.table} WHERE name = %s AND value = %s", (SETTING, value))

    def settle(self, raw: Any, vacuum: Callable[[], bool], remember: Callable[[str], None]) -> None:
        """At a writer's open: finish the compaction the row says was cut off (``vacuum``; its
        forget's transaction given to ``remember`` first, for the older-transaction check)."""
        try:
            if self.read(raw) is None:
                return
            got = raw.execute(
                "SELECT pg_catalog.pg_try_advisory_lock(%s)", (self.settle_key,)
            ).fetchone()
        except psycopg.Error as exc:  # the connection dropped: the open goes on, without it
            log.warning("%s: pending erasure not checked (%s)", self.location, exc)
            return
        if not got[0]:
            log.info("%s: another process is finishing a pending erasure", self.location)
            return
        try:
            self._settle(raw, vacuum, remember)
        except (psycopg.Error, EventBackendError) as exc:
            log.warning(
                "%s: a forget's VACUUM FULL was cut off and could not be finished at open (%s); "
                "its dead row version remains until the next compact or open",
                self.location,
                exc,
            )
        finally:
            with suppress(psycopg.Error):
                raw.execute("SELECT pg_catalog.pg_advisory_unlock(%s)", (self.settle_key,))

    def _settle(
        self, raw: Any, vacuum: Callable[[], bool], remember: Callable[[str], None]
    ) -> None:
        value = self.read(raw)  # again, under the lock: another opener may have finished
        if value is None:
            return
        remember(xid_of(value))
        raw.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
        try:
            erased = vacuum()
        finally:
            with suppress(psycopg.Error):
                raw.execute("RESET lock_timeout")
        if erased:
            self.clear(raw, value)
            log.warning(
                "%s: finished the erasure of a forget whose VACUUM FULL had been cut off "
                "(VACUUM FULL run at open)",
                self.location,
            )
        else:
            log.warning(
                "%s: a forget's VACUUM FULL was cut off; the one run at open kept the dead row "
                "version (an older transaction may read it); retried at the next compact or open",
                self.location,
            )
