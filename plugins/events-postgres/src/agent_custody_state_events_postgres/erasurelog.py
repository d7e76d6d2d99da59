"""The erasure log of a PostgreSQL ledger in crypto-shred mode: a table beside the events.

A key database restored alone from a backup taken before a forget holds the destroyed data key
again, and the ledger no longer names it (the forgotten assert's value is null). As a file
ledger's ``<ledger>.shredded`` (``agent_custody_state.ledger.keystore``), every doom of the
PostgreSQL key store first records each key id with its fact in ``<table>_shredded`` (fact_id,
kid) in the EVENTS' database: ``pg_dump`` of the events carries it, a restore of the key
database does not touch it. ``KeyStore.buried`` reads it back (``verify``, ``repair``,
``certificate reapply``); only facts the ledger records forgotten count.

The row is written on the events' connection, before the key database's intent, so inside the
forget's write section it commits with the forget, atomically, and so before the key is
destroyed (after the commit); a section that rolls back takes its row with it. The key database
may be another server: no transaction spans both, and none is needed, since only facts the
ledger records forgotten count. Outside a section (a doom of its own) the row commits at once.

A PostgreSQL ledger whose keys are in a file (``key_store=<path>``) logs here too
(``LoggedFileKeys``): the log belongs with the events, whatever holds the keys.

The table is created when a writer makes the key store (``PostgresBackend.keystore``), under
the table's exclusive write lock like the other side tables (docs/scale-out.md), if the role
may; a role that may not create or write it forgets as before, without the log (warned once),
and a name PostgreSQL would cut (a table name over 54 bytes) keeps none. The TypeScript original
reads only the events table.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import psycopg
import sqlalchemy as sa

from agent_custody_state.plugin import EventBackendError, FileKeyStore, KeyStoreError
from agent_custody_state_sql.schema import Prepared, SideTable

from .deadline import open_bounded
from .location import MAX_IDENTIFIER, libpq_url

log = logging.getLogger(__name__)

#: Whether the table exists, whether this role may read it and add to it, and whether it may
#: create it (``CREATE`` on the schema it would be created in).
_PROBE = """
SELECT t IS NOT NULL,
  t IS NOT NULL AND pg_catalog.has_table_privilege(t, 'SELECT'),
  t IS NOT NULL AND pg_catalog.has_table_privilege(t, 'INSERT'),
  coalesce(pg_catalog.has_schema_privilege(coalesce(:schema, pg_catalog.current_schema()),
    'CREATE'), false)
FROM (SELECT pg_catalog.to_regclass(:table)::oid AS t) AS shredded
"""


class ErasureLog:
    """The table ``<table>_shredded`` beside the events of ``backend`` (a ``PostgresBackend``)."""

    def __init__(self, backend: Any) -> None:
        side = SideTable(
            backend,
            "shredded",
            sa.Column("fact_id", sa.Text, primary_key=True),
            sa.Column("kid", sa.Text, primary_key=True),
        )
        self._backend, self.name, self.location = backend, side.name, side.location
        self._schema = backend._home
        self._fits = len(side.table.name.encode()) <= MAX_IDENTIFIER
        dialect = side._dialect
        self._probe = Prepared(sa.text(_PROBE), dialect)
        self._insert = Prepared(
            sa.text(
                f"INSERT INTO {self.name} (fact_id, kid) SELECT * FROM "
                "unnest(CAST(:facts AS TEXT[]), CAST(:kids AS TEXT[])) ON CONFLICT DO NOTHING"
            ),
            dialect,
        )
        self._select = Prepared(sa.text(f"SELECT fact_id, kid FROM {self.name}"), dialect)
        self._usable = False  # the table is there and this role may add to it
        self._warned = False

    def _state(self) -> tuple[bool, bool, bool, bool]:
        """(exists, may read, may insert, may create), asked of the catalog: a query of a
        missing table would abort the transaction it runs in."""
        if not self._fits:
            return False, False, False, False
        row = self._query(self._probe, {"table": self.name, "schema": self._schema})[0]
        return bool(row[0]), bool(row[1]), bool(row[2]), bool(row[3])

    def _query(self, q: Prepared, params: dict[str, Any], *, write: bool = False) -> list[Any]:
        """``q`` on the backend's connection (in its write section if one is open); on one of
        its own if the backend is closed: the key store, passed on as an object, outlived it."""
        backend = self._backend
        if not backend._closed:
            if write:
                backend._many(q, [params])
                return []
            return list(backend._rows(q, params))
        url, bounds = libpq_url(backend.where.connect_url), backend.bounds()
        try:  # bounded as the backend's connection was (``deadline``)
            with open_bounded(url, bounds["connect_timeout"], bounds["operation_timeout"]) as conn:
                cur = conn.execute(q.sql, q.args(params))
                return cur.fetchall() if cur.description else []
        except psycopg.Error as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise KeyStoreError(f"{self.location}: {reason}") from None

    def prepare(self, *, create: bool) -> None:
        """At the key store's open: whether dooms can log, the table created first when
        ``create`` (a writer) and the role may. Never fails an open: without the log, warned."""
        backend = self._backend
        exists, _, insert, may_create = self._state()
        if not exists and create and may_create and not backend._depth:
            ddl = (
                f"CREATE TABLE IF NOT EXISTS {self.name} (fact_id TEXT NOT NULL, "
                "kid TEXT NOT NULL, PRIMARY KEY (fact_id, kid))"
            )
            try:
                with backend.transaction():  # no keys: the exclusive write lock (scale-out.md)
                    backend._run(lambda: backend._exec(ddl))
            except EventBackendError as exc:
                log.warning("%s: not created (%s)", self.location, exc)
            exists, _, insert, _ = self._state()
        self._usable = exists and insert
        if create and not self._usable:
            self._warn()

    def _warn(self) -> None:
        if not self._warned:
            self._warned = True
            log.warning(
                "%s may not be used or created (the role's privileges, or a name PostgreSQL "
                "would cut): forgets keep no erasure log, so a key database restored alone from "
                "an older backup is not found",
                self.location,
            )

    def append(self, intents: Mapping[str, str]) -> None:
        """Log each key id (key id -> fact id) with its fact; in the caller's write section if
        one is open (it commits with the forget), else committed now."""
        if not intents:
            return
        if not self._usable:  # looked at again: another writer may have created it since
            exists, _, insert, _ = self._state()
            self._usable = exists and insert
            if not self._usable:
                self._warn()
                return
        params = {"facts": list(intents.values()), "kids": list(intents)}
        self._query(self._insert, params, write=True)

    def read(self) -> dict[str, list[str]]:
        """Fact id -> the key ids its forgets doomed ({} when there is no log)."""
        exists, readable, _, _ = self._state()
        if not exists:
            return {}
        if not readable:
            raise KeyStoreError(
                f"{self.location}: this role may not read the erasure log, so the keys a key "
                "database restored alone brought back cannot be looked for (GRANT SELECT)"
            )
        out: dict[str, list[str]] = {}
        for fact_id, kid in self._query(self._select, {}):
            out.setdefault(str(fact_id), []).append(str(kid))
        return out


class LoggedFileKeys(FileKeyStore):
    """A file key store for a PostgreSQL ledger (``key_store=<path>``), with the ledger's
    erasure log (``ErasureLog``) in the events' database."""

    def __init__(self, location: str, erasures: ErasureLog, *, create: bool) -> None:
        super().__init__(location)
        self._log = erasures
        try:
            erasures.prepare(create=create)
        except BaseException:
            self.close()
            raise

    def doom(self, intents: Mapping[str, str]) -> None:
        self._log.append(intents)  # first, as ``PostgresKeyStore.doom``
        super().doom(intents)

    def buried(self) -> dict[str, list[str]]:
        return self._log.read()
