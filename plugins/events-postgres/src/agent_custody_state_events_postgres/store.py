"""The PostgreSQL event store: SPEC 3's table in any database, shared by many server replicas.

A write section is ``BEGIN; LOCK TABLE <t> IN SHARE ROW EXCLUSIVE MODE``. That lock mode
conflicts with itself and with the row locks of ``INSERT``/``UPDATE`` (so it also holds off
writers that know nothing of this code), but not with plain ``SELECT``: readers are never
blocked, and under READ COMMITTED every statement after the lock sees all commits before it,
so the ledger's validate-then-append cannot race another replica's.

Forget updates the assert rows in place in the same transaction as the forget event; ``compact``
(run by the ledger after a forget or sweep) does ``VACUUM FULL`` on the table, which rewrites it
without the dead row versions, unless the location says ``?vacuum=false``.

A table whose ``json`` column is ``jsonb`` (older writers) is read through a cast to text and
written through a cast to jsonb.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection

from agent_custody_state.plugin import EventBackendError, FileKeyStore, KeyStore
from agent_custody_state_sql import SqlEventBackend

from .location import LocationError, parse_location

log = logging.getLogger(__name__)


class PostgresBackend(SqlEventBackend):
    """Events in a PostgreSQL table; ``location`` is a ``postgres[ql]://`` URL."""

    kind = "postgres"
    seq_ddl = "BIGSERIAL PRIMARY KEY"

    def __init__(self, location: str, *, connect_timeout: int = 10, **_options: object) -> None:
        try:
            where = parse_location(str(location))
        except LocationError as exc:
            raise EventBackendError(str(exc)) from None
        self.vacuum = where.vacuum
        self.where = where
        engine = sa.create_engine(
            where.connect_url,
            # Autocommit at the driver: a read never leaves a transaction open (which would
            # block VACUUM FULL); write sections are explicit BEGIN ... COMMIT.
            isolation_level="AUTOCOMMIT",
            poolclass=sa.pool.NullPool,
            connect_args={"connect_timeout": connect_timeout},
        )
        # The advisory key for schema setup (before the table exists, LOCK TABLE cannot work).
        digest = hashlib.sha256(f"agent-custody-state:{where.qualified}".encode()).digest()
        self._advisory_key = int.from_bytes(digest[:8], "big", signed=True)
        quoted = ".".join(f'"{part}"' for part in where.qualified.split("."))
        super().__init__(
            engine,
            location=where.display,
            table=where.table,
            schema=where.schema,
            quoted_table=quoted,
            index_prefix=where.qualified.replace(".", "_"),
        )

    # -- dialect hooks -----------------------------------------------------------------------

    def _begin_write(self) -> None:
        # One round trip (simple query protocol: no parameters): a single append is a handful
        # of round trips in all, so each one shows in the write rate.
        self._exec(f"BEGIN; LOCK TABLE {self._qualified} IN SHARE ROW EXCLUSIVE MODE")

    @contextmanager
    def _schema_lock(self, conn: Connection) -> Iterator[None]:
        conn.exec_driver_sql("BEGIN")
        try:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": self._advisory_key})
            if self.where.schema:
                conn.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{self.where.schema}"')
            yield
        except BaseException:
            self._rollback_quietly()
            raise
        conn.exec_driver_sql("COMMIT")

    def _json_field(self, *path: str) -> str:
        return f"(json::jsonb #>> '{{{','.join(path)}}}')"

    def _ids_select(self, name: str) -> sa.Select[Any]:
        return sa.select(sa.func.unnest(sa.bindparam(name, type_=ARRAY(sa.Text))))

    def _in_ids(self, column: sa.ColumnElement[Any], name: str) -> sa.ColumnElement[bool]:
        # One array parameter for any number of ids; the planner probes the index per element.
        return column == sa.any_(sa.bindparam(name, type_=ARRAY(sa.Text)))

    def _ids_param(self, ids: Sequence[str]) -> Any:
        return list(ids)

    def _json_is_jsonb(self, conn: Connection) -> bool:
        row = conn.execute(
            sa.text(
                "SELECT data_type FROM information_schema.columns WHERE table_schema = "
                "coalesce(:schema, current_schema()) AND table_name = :table AND "
                "column_name = 'json'"
            ),
            {"schema": self.where.schema, "table": self.where.table},
        ).first()
        return row is not None and row[0] == "jsonb"

    def _connection_lost(self) -> bool:
        return bool(self._raw.closed or self._raw.broken)

    # -- housekeeping ------------------------------------------------------------------------

    def keystore(self, location: str | None = None) -> KeyStore:
        """Crypto-shred keys in a database of their own (see ``keystore``): by default
        ``<db>_keys`` on this server, created on first use if the role may; a file path puts
        them in a file key store instead."""
        if location is not None and not location.lower().startswith(("postgres:", "postgresql:")):
            return FileKeyStore(location)
        from .keystore import PostgresKeyStore, default_keys_location

        if location is not None:
            return PostgresKeyStore(location)  # its database must exist: it may be elsewhere
        return PostgresKeyStore(
            default_keys_location(self.where), creator_url=self.where.connect_url
        )

    def compact(self) -> None:
        """``VACUUM FULL`` the table (unless ``?vacuum=false``): dead row versions are erased."""
        if not self.vacuum:
            return
        if self._depth:
            raise EventBackendError(f"{self.location}: compact cannot run inside a transaction")

        def vacuum() -> None:
            raw = self._raw
            warnings: list[str] = []

            def on_notice(diag: Any) -> None:
                if diag.severity in ("WARNING", "ERROR"):
                    warnings.append(str(diag.message_primary))

            raw.add_notice_handler(on_notice)
            try:
                # The connection is in autocommit mode: VACUUM refuses to run in a transaction.
                self._exec(f"VACUUM FULL {self._qualified}")
            finally:
                raw.remove_notice_handler(on_notice)
            if warnings:
                # PostgreSQL skips a table it may not vacuum with only a warning; for erasure
                # that is a failure the operator must see.
                raise EventBackendError(
                    f"{self.location}: VACUUM FULL did not run ({'; '.join(warnings)}); dead "
                    "row versions of forgotten values remain until the table owner vacuums it"
                )

        self._run(vacuum)
