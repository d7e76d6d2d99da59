"""What a forget's ``VACUUM FULL`` cannot erase, told instead of hidden (erasure certificates).

``VACUUM FULL`` rewrites the table, but copies a dead row version that some transaction may
still need: one whose deleting transaction (the forget) is not older than the oldest snapshot
or transaction id of the database (``backend_xmin``, ``backend_xid``; a standby's feedback,
a replication slot's ``xmin``, a prepared transaction). A reader holding a snapshot from before
the forget, or any transaction of the database that began before it, so keeps the forgotten
value in the table's new files, and a byte scan cannot always see it there: a long value is
stored compressed (TOAST). So ``compact`` looks for such holders before the ``VACUUM FULL``;
when there were some it checks again afterwards, vacuums once more if they have gone, and
otherwise reports the copy (``compaction_residue``), which the certificate lists and counts as
incomplete. Nothing waits for a holder: a long transaction may last for hours.

``ANALYZE`` (autovacuum's, or an operator's) copies sample values of every column into the
planner statistics (``pg_statistic``), the wide ``json`` column included, where a forgotten
value outlives its row. After the vacuum the column's statistics are cleared
(``pg_clear_attribute_stats``, PostgreSQL 18; before it a new ``ANALYZE`` of that column, of
rows that no longer hold the value, when the role may: PostgreSQL would skip it with only a
warning); the key store clears its ``key`` column's the same way. ``compact`` checks the holders
of the pending mark's forget too (``pending``): another process's later forget may have set it.
"""

from __future__ import annotations

import logging
from typing import Any

from psycopg import sql

from agent_custody_state.plugin import EventBackendError

from .pending import ErasureFlag, xid_of
from .statistics import warned

log = logging.getLogger(__name__)

#: The forget's transaction id, as ``xid`` (``txid_current``: every supported version).
CURRENT_XID = "SELECT (pg_catalog.txid_current() % 4294967296)::text"

#: How many holders of the database's horizon (pairs, with each of ``%(xids)s`` they are as
#: old as or older than): a dead row version deleted by such a transaction may be kept by
#: ``VACUUM FULL``. Backends of another database do not hold this database's horizon;
#: walsenders (no database: a standby's feedback) may.
HOLDERS = """
SELECT pg_catalog.count(*) FROM (
  SELECT backend_xmin AS x FROM pg_catalog.pg_stat_activity WHERE pid <> pg_catalog.pg_backend_pid()
   AND (datname = pg_catalog.current_database() OR datname IS NULL)
  UNION ALL SELECT backend_xid FROM pg_catalog.pg_stat_activity WHERE pid <> pg_catalog.pg_backend_pid()
   AND (datname = pg_catalog.current_database() OR datname IS NULL)
  UNION ALL SELECT xmin FROM pg_catalog.pg_replication_slots
  UNION ALL SELECT transaction FROM pg_catalog.pg_prepared_xacts
   WHERE database = pg_catalog.current_database()
) h, pg_catalog.unnest(%(xids)s::text[]) f
WHERE h.x IS NOT NULL AND pg_catalog.age(h.x) >= pg_catalog.age(f::xid)
"""

#: Whether the planner statistics hold a column of the table (``pg_stats``: the rows the role
#: may see, every column of a table it may select from).
HAS_STATS = (
    "SELECT 1 FROM pg_catalog.pg_stats WHERE schemaname = %(schema)s AND tablename = %(table)s "
    "AND attname = %(column)s"
)

#: Whether this role may ``ANALYZE`` the table (else PostgreSQL skips it with only a warning):
#: it has its owner's privileges (a superuser has every role's), or the database owner's (not
#: a shared catalog), or from PostgreSQL 17 ``MAINTAIN`` on it (granted, or ``pg_maintain``).
_MAY_ANALYZE = (
    "SELECT pg_catalog.pg_has_role(c.relowner, 'USAGE') OR (NOT c.relisshared AND "
    "pg_catalog.pg_has_role(d.datdba, 'USAGE')){} FROM pg_catalog.pg_class c, pg_catalog.pg_database d "
    "WHERE c.oid = pg_catalog.to_regclass(%(qualified)s) "
    "AND d.datname = pg_catalog.current_database()"
)

_SCHEMA_TABLE = (
    "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.oid = pg_catalog.to_regclass(%(qualified)s)"
)

#: Whether the server has ``pg_clear_attribute_stats`` (PostgreSQL 18), and its call: both in
#: ``pg_catalog``. Looked up by its bare name, a function of the name in another schema (one a
#: role that may create there planted before PostgreSQL 18, or found first on a ``search_path``
#: that names ``pg_catalog`` later) was found and run with this role's privileges.
_HAS_CLEAR = (
    "SELECT 1 FROM pg_catalog.pg_proc WHERE proname = 'pg_clear_attribute_stats' "
    "AND pronamespace = 'pg_catalog'::regnamespace"
)
_VERSION = "SELECT pg_catalog.current_setting('server_version_num')::int"
_CLEAR = "SELECT pg_catalog.pg_clear_attribute_stats(%(schema)s, %(table)s, %(column)s, false)"

KEPT_BY_TRANSACTIONS = {
    "where": "the table's files: VACUUM FULL kept the forgotten row version, because a "
    "transaction or snapshot of the database (or a standby's feedback, a replication slot, a "
    "prepared transaction) older than the forget may still read it; the byte scan cannot see "
    "it when the value is stored compressed",
    "until": "those transactions end and the table is vacuumed again (the next forget's "
    "VACUUM FULL, or the owner's)",
}

NOT_VACUUMED = {
    "where": "the table's files: the dead row version of the forgotten value, because the "
    "location says ?vacuum=false (no VACUUM FULL after a forget); the byte scan cannot see it "
    "when the value is stored compressed",
    "until": "the table owner runs VACUUM FULL on it",
}

STATISTICS_LEFT = {
    "where": "the planner statistics (pg_statistic) of the table's json column, which ANALYZE "
    "took before the forget and which could not be cleared",
    "until": "the table is analysed again by a role that may (ANALYZE, autovacuum)",
}


#: Added to a failed ``compact``'s error when a forget waits for it (``compact``): the forget
#: committed before the compaction ran.
UNFINISHED = (
    "what was written before it stands (a forget is recorded and its value is gone from the "
    "current row: do not forget it again), but the compaction did not finish, so dead row "
    "versions of forgotten values stay in the table's files until one does (the next forget "
    "or compact; a writer's open finishes one marked pending)"
)


def vacuum_full(raw: Any, qualified: str, location: str) -> None:
    """``VACUUM FULL`` the table (``raw``: autocommit, as VACUUM requires); PostgreSQL skips a
    table the role may not vacuum with only a warning, which for erasure is a failure."""
    warnings = warned(raw, f"VACUUM FULL {qualified}")
    if warnings:
        raise EventBackendError(
            f"{location}: VACUUM FULL did not run ({'; '.join(warnings)}); dead row versions "
            "of forgotten values remain until the table owner vacuums it"
        )


def holders(conn: Any, xids: list[str]) -> int:
    """How many transactions, snapshots, slots or prepared transactions may still need the row
    versions the transactions ``xids`` deleted (psycopg connection ``conn``, autocommit)."""
    if not xids:
        return 0
    row = conn.execute(HOLDERS, {"xids": xids}).fetchone()
    return int(row[0]) if row is not None else 0


def clear_statistics(conn: Any, qualified: str, column: str) -> bool:
    """Clear the planner statistics of ``column`` of the table ``qualified`` (as
    ``to_regclass`` reads it: quoted); whether none taken before are left (False: the role may
    not, and they stay)."""
    try:
        found = conn.execute(_SCHEMA_TABLE, {"qualified": qualified}).fetchone()
        if found is None:
            return True
        where = {"schema": found[0], "table": found[1], "column": column}
        if conn.execute(HAS_STATS, where).fetchone() is None:
            return True
        if conn.execute(_HAS_CLEAR).fetchone() is not None:
            conn.execute(_CLEAR, where)
        else:  # before PostgreSQL 18: new statistics, from rows that no longer hold the value
            if not _may_analyze(conn, qualified):  # it would be skipped, the old ones kept
                log.warning("statistics of %s.%s not cleared (may not analyse)", qualified, column)
                return False
            name = sql.Identifier(found[0], found[1])
            conn.execute(sql.SQL("ANALYZE {} ({})").format(name, sql.Identifier(column)))
            return True
        left = conn.execute(HAS_STATS, where).fetchone()
    except Exception as exc:  # a role that may not maintain the table
        log.warning("statistics of %s.%s not cleared (%s)", qualified, column, exc)
        return False
    return left is None


def _may_analyze(conn: Any, qualified: str) -> bool:
    version = conn.execute(_VERSION).fetchone()
    maintain = (
        " OR pg_catalog.has_table_privilege(c.oid, 'MAINTAIN')" if int(version[0]) >= 170000 else ""
    )
    row = conn.execute(_MAY_ANALYZE.format(maintain), {"qualified": qualified}).fetchone()
    return row is not None and bool(row[0])


class ForgetResidue:
    """The forget transactions of this backend since its last ``compact``, and what that
    ``compact`` could not erase (``compaction_residue``); a mixin of ``PostgresBackend``."""

    _forget_xids: list[str] | None = None
    _residue: list[dict[str, str]] | None = None
    _erasure: ErasureFlag | None = None  # a writer's pending-erasure row (``pending``)

    def remember_forget(self, xid: Any) -> None:
        """Note the transaction of the forget being written (``CURRENT_XID``, asked inside its
        section)."""
        if self._forget_xids is None:
            self._forget_xids = []
        self._forget_xids.append(str(xid))

    def forget_statement(self) -> str:
        """What a forget's section runs last: its erasure marked pending (``pending``; a
        writer's, unless ``?vacuum=false``), then ``CURRENT_XID``."""
        mark = self._erasure.statement() if self._erasure is not None else None
        return CURRENT_XID if mark is None else f"{mark}; {CURRENT_XID}"

    def settle_erasure(self, raw: Any, qualified: str, flag: ErasureFlag) -> None:
        """At a writer's open: keep ``flag`` for the forgets and compactions to come, and
        finish a compaction it says was cut off (``pending``)."""
        self._erasure = flag
        flag.settle(raw, lambda: self._vacuum(raw, qualified, flag.location), self.remember_forget)

    def vacuum_checked(self, raw: Any, qualified: str, location: str) -> None:
        """The ``VACUUM FULL`` of ``compact`` (unless ``?vacuum=false``), then the statistics
        cleared; the residue left recorded for ``compaction_residue``; the erasure marked
        pending before it cleared if it erased every dead row version (``pending``)."""
        if not getattr(self, "vacuum", True):
            xids = self._forget_xids
            self._residue, self._forget_xids = ([dict(NOT_VACUUMED)] if xids else []), None
            return
        flag = self._erasure
        value = flag.read(raw) if flag is not None else None
        if value is not None:  # another process's later forget may have set it: its holders too
            self.remember_forget(xid_of(value))
        if self._vacuum(raw, qualified, location) and flag is not None and value is not None:
            flag.clear(raw, value)

    def _vacuum(self, raw: Any, qualified: str, location: str) -> bool:
        """``vacuum_checked``'s vacuum; whether the dead row versions are gone (False: an older
        transaction kept one)."""
        xids = list(self._forget_xids or [])  # kept until done: a retry sees them again
        residue: list[dict[str, str]] = []
        kept = holders(raw, xids)
        vacuum_full(raw, qualified, location)
        if kept and holders(raw, xids):
            residue.append(dict(KEPT_BY_TRANSACTIONS))
        elif kept:
            vacuum_full(raw, qualified, location)  # they have gone: this one erases the rows
        if not clear_statistics(raw, qualified, "json"):
            residue.append(dict(STATISTICS_LEFT))
        self._residue, self._forget_xids = residue, None
        return KEPT_BY_TRANSACTIONS not in residue

    def compaction_residue(self) -> list[dict[str, str]]:
        """Where the last ``compact`` knows a forgotten value remains (empty: nowhere it could
        tell), as residual windows (``where``, ``until``)."""
        return [dict(w) for w in self._residue or []]
